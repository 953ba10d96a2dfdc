"""`MCPToolset` answers what a server asks during a call: sampling with the model of the
agent making the call, elicitation by pausing the run (`elicitation="interrupt"`) and, when
it resumes, making the call again and answering with the resume value. Against real SDK
servers (`tests/protocols/mcp_servers/asks.py`), with the 2025-11-25 requests and the
2026-07-28 "input required" round trip, and against the reference server from npm."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from plait import ChatModelAgent, Hooks, Message, ModelRequest, Runner, RunResult, Usage
from plait.errors import UsageError
from plait.testing import ScriptedModel, call, calls, reply
from plait.tools import MCPToolset

ASKS = str(Path(__file__).parent / "mcp_servers" / "asks.py")
#: The reference server of the MCP project, run with npx (.ci/run fetches this version).
EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"
NAME_SCHEMA_REQUIRED = ["name"]


def asks(**options: Any) -> MCPToolset:
    return MCPToolset(sys.executable, args=[ASKS], **options)


def tool_results(result: RunResult) -> list[str]:
    """The contents of the tool messages of a run, in order."""
    return [
        e.output.message.message.content
        for e in result.events
        if e.output is not None
        and e.output.message is not None
        and e.output.message.message is not None
        and e.output.message.message.role == "tool"
    ]


def runner(toolset: MCPToolset, *script: Message | str) -> tuple[Runner, ScriptedModel]:
    model = ScriptedModel(list(script))
    return Runner(ChatModelAgent("desk", model, tools=[toolset])), model


# --- elicitation: the run pauses, the resume answers ------------------------------------------


async def test_a_2025_elicitation_pauses_the_run_and_the_resume_value_answers_it(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls"
    toolset = asks(protocol="legacy", elicitation="interrupt", env={"ASKS_LOG": str(log)})
    run, _ = runner(toolset, call("ask_name"), reply("greeted"))
    paused = await run.query("greet me").collect()
    assert paused.error is None
    [pending] = paused.interrupts
    asked = pending.info["elicitation"]
    assert asked["server"] == toolset.target
    assert (asked["tool"], asked["arguments"], asked["mode"]) == ("ask_name", {}, "form")
    assert asked["message"] == "What is your name?"
    assert asked["requested_schema"]["required"] == NAME_SCHEMA_REQUIRED
    assert asked["requested_schema"]["properties"]["name"]["type"] == "string"

    done = await run.resume(paused.checkpoint_id, value={"name": "Ana"}).collect()
    assert done.error is None
    assert tool_results(done) == ["Hello, Ana! (2025-11-25)"]
    assert done.final_output == "greeted"
    assert log.read_text().split() == ["ask_name", "ask_name"]  # the call was made again


async def test_none_declines_the_elicitation() -> None:
    run, _ = runner(asks(protocol="legacy", elicitation="interrupt"), call("ask_name"), "ok")
    paused = await run.query("greet me").collect()
    done = await run.resume(paused.checkpoint_id, value=None).collect()
    assert tool_results(done) == ["no name (decline, 2025-11-25)"]


async def test_a_2026_input_required_round_trip_pauses_the_run_and_the_resume_answers_it(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls"
    toolset = asks(elicitation="interrupt", env={"ASKS_LOG": str(log)})
    run, _ = runner(toolset, call("resolve_name"), reply("greeted"))
    paused = await run.query("greet me").collect()
    [pending] = paused.interrupts
    asked = pending.info["elicitation"]
    assert (asked["tool"], asked["message"]) == ("resolve_name", "What is your name?")
    assert asked["requested_schema"]["required"] == NAME_SCHEMA_REQUIRED

    done = await run.resume(paused.checkpoint_id, value={"name": "Ana"}).collect()
    assert tool_results(done) == ["Hello, Ana! (2026-07-28)"]
    assert log.read_text().split() == ["resolve_name"]  # its body ran once, answered


async def test_an_answer_that_does_not_fit_the_schema_is_asked_again_saying_why() -> None:
    run, _ = runner(asks(elicitation="interrupt"), call("resolve_name"), reply("greeted"))
    paused = await run.query("greet me").collect()
    again = await run.resume(paused.checkpoint_id, value={"nom": "Ana"}).collect()
    [pending] = again.interrupts
    assert pending.info["elicitation"]["problem"] == "the field 'name' is required"
    typed = await run.resume(again.checkpoint_id, value={"name": 7}).collect()
    [pending] = typed.interrupts
    assert pending.info["elicitation"]["problem"] == "the field 'name' is a string, not int"
    done = await run.resume(typed.checkpoint_id, value={"name": "Ana"}).collect()
    assert tool_results(done) == ["Hello, Ana! (2026-07-28)"]


@pytest.mark.parametrize(
    ("protocol", "tool", "version"),
    [("legacy", "ask_name", "2025-11-25"), ("auto", "resolve_name", "2026-07-28")],
)
async def test_parallel_calls_each_pause_with_their_own_question_and_take_their_own_answer(
    protocol: Any, tool: str, version: str
) -> None:
    toolset = asks(protocol=protocol, elicitation="interrupt")
    both = calls(call(tool, id="c1"), call(tool, id="c2"))
    run, _ = runner(toolset, both, reply("greeted both"))
    paused = await run.query("greet us").collect()
    by_call = {i.address.rsplit(":", 1)[1]: i.id for i in paused.interrupts}
    assert set(by_call) == {"c1", "c2"}
    answers = {by_call["c1"]: {"name": "Ana"}, by_call["c2"]: {"name": "Bo"}}
    done = await run.resume(paused.checkpoint_id, answers).collect()
    assert done.error is None, done.error
    assert sorted(tool_results(done)) == [f"Hello, Ana! ({version})", f"Hello, Bo! ({version})"]


async def test_without_elicitation_interrupt_the_server_is_told_the_client_does_not_take_it() -> (
    None
):
    run, _ = runner(asks(protocol="legacy"), call("ask_name"), reply("could not"))
    result = await run.query("greet me").collect()
    assert result.interrupts == ()
    [told] = tool_results(result)
    assert told.startswith("Error:")
    assert result.final_output == "could not"


# --- sampling: the agent's model answers -------------------------------------------------------


async def _sampled(toolset: MCPToolset, tool: str) -> tuple[RunResult, ScriptedModel]:
    used = Usage(input_tokens=11, output_tokens=3)
    run, model = runner(
        toolset,
        call(tool, {"text": "A long story about a cat."}),
        reply("cat story summarized", usage=used),  # the server's sampling request
        reply("done"),
    )
    return await run.query("summarize").collect(), model


async def test_a_2025_sampling_request_is_answered_by_the_agent_model() -> None:
    result, model = await _sampled(asks(protocol="legacy"), "ask_summary")
    assert result.error is None
    assert tool_results(result) == ["cat story summarized (by ScriptedModel, 2025-11-25)"]
    sampling = model.requests[1]
    assert [(m.role, m.content) for m in sampling.messages] == [
        ("system", "Summarize in three words."),
        ("user", "A long story about a cat."),
    ]
    assert sampling.tools == ()
    assert sampling.options == {"max_tokens": 50}
    assert result.usage.input_tokens >= 11 and result.usage.output_tokens >= 3


async def test_a_2026_sampling_input_request_is_answered_by_the_agent_model() -> None:
    result, model = await _sampled(asks(), "resolve_summary")
    assert tool_results(result) == ["cat story summarized (by ScriptedModel, 2026-07-28)"]
    assert model.requests[1].messages[1].content == "A long story about a cat."


async def test_a_sampling_call_passes_the_runners_wrap_model_hooks() -> None:
    seen: list[str] = []

    class Watch(Hooks):
        async def wrap_model(self, ctx: Any, request: ModelRequest, call_next: Any) -> Message:
            seen.append(request.messages[-1].content)
            reply: Message = await call_next(request)
            return reply

    model = ScriptedModel(
        [call("ask_summary", {"text": "A long story about a cat."}), "cat story", "done"]
    )
    agent = ChatModelAgent("desk", model, tools=[asks(protocol="legacy")])
    result = await Runner(agent, hooks=[Watch()]).query("summarize").collect()
    assert result.error is None
    assert "A long story about a cat." in seen  # the server's sampling request


async def test_with_sampling_off_the_server_is_told_the_client_does_not_take_it() -> None:
    toolset = asks(protocol="legacy", sampling=False)
    run, model = runner(toolset, call("ask_summary", {"text": "x"}), reply("could not"))
    result = await run.query("summarize").collect()
    [told] = tool_results(result)
    assert told.startswith("Error:")
    assert len(model.requests) == 2  # the agent's two turns, no sampling


# --- the reference server from npm (npx) -------------------------------------------------------


def everything(**options: Any) -> MCPToolset:
    return MCPToolset("npx", args=["-y", EVERYTHING, "stdio"], **options)


async def test_the_npm_reference_server_samples_the_agent_model_and_elicits_by_pausing() -> None:
    toolset = everything(
        elicitation="interrupt",
        tool_filter=["trigger-sampling-request", "trigger-elicitation-request"],
    )
    run, model = runner(
        toolset,
        call("trigger-sampling-request", {"prompt": "Say hello"}),
        reply("Hello from the agent's model"),  # its sampling request
        call("trigger-elicitation-request"),
        reply("thanks"),
    )
    paused = await run.query("try them").collect()
    assert paused.error is None, paused.error
    [sampled] = tool_results(paused)
    assert "Hello from the agent's model" in sampled
    assert model.requests[1].messages[-1].content.endswith("Say hello")
    [pending] = paused.interrupts
    asked = pending.info["elicitation"]
    assert asked["tool"] == "trigger-elicitation-request"
    assert asked["requested_schema"]["required"] == NAME_SCHEMA_REQUIRED

    done = await run.resume(paused.checkpoint_id, value={"name": "Ana", "check": True}).collect()
    assert done.error is None, done.error
    assert "Name: Ana" in tool_results(done)[-1]
    assert done.final_output == "thanks"


# --- options ---------------------------------------------------------------------------------


def test_unknown_protocol_sampling_or_elicitation_options_are_usage_errors() -> None:
    for options, match in [
        ({"protocol": "2024"}, "protocol is 'auto' or 'legacy'"),
        ({"sampling": "yes"}, "sampling is True or False"),
        ({"elicitation": "ask"}, "elicitation is 'interrupt' or None"),
    ]:
        with pytest.raises(UsageError, match=match):
            asks(**options)
