"""The test models shipped in plait.testing."""

from __future__ import annotations

import json

import pytest

from plait import Message, ToolCall, Usage
from plait.errors import ModelError
from plait.testing import FunctionModel, ScriptedModel, call, calls, reply
from plait.tools import ToolInfo


def test_script_helpers_build_assistant_messages() -> None:
    assert reply("hi", Usage(input_tokens=1)) == Message.assistant(
        "hi", usage=Usage(input_tokens=1)
    )
    one = call("add", {"a": 1}, id="c1", text="adding")
    assert one == Message.assistant("adding", [ToolCall(id="c1", name="add", arguments='{"a": 1}')])
    generated = call("add", {})
    assert generated.tool_calls[0].id.startswith("call_")
    assert generated.tool_calls[0].id != call("add", {}).tool_calls[0].id
    assert call("add", "{raw").tool_calls[0].arguments == "{raw"
    both = calls(call("a", {}, id="1"), call("b", {}, id="2"))
    assert [tc.id for tc in both.tool_calls] == ["1", "2"]


async def test_scripted_model_replays_records_and_runs_out_clearly() -> None:
    model = ScriptedModel(["first", reply("second")])
    info = ToolInfo(name="t", description="d")
    assert (await model.generate([Message.user("1")], tools=[info])).content == "first"
    assert (await model.generate([Message.user("2")], temperature=0)).content == "second"
    assert model.requests[0].messages == (Message.user("1"),)
    assert model.requests[0].tools == (info,)
    assert model.requests[1].options == {"temperature": 0}
    assert model.remaining == 0
    with pytest.raises(ModelError, match="all were used"):
        await model.generate([Message.user("3")])


async def test_callable_entries_see_the_request_and_may_raise() -> None:
    def echo(messages: list[Message], tools: list[ToolInfo]) -> str:
        return f"{len(messages)} messages, {len(tools)} tools"

    def fail(messages: list[Message], tools: list[ToolInfo]) -> str:
        raise TimeoutError("slow provider")

    model = ScriptedModel([echo, fail])
    assert (await model.generate([Message.user("x")])).content == "1 messages, 0 tools"
    with pytest.raises(TimeoutError):
        await model.generate([])


async def test_streaming_splits_text_and_tool_calls_into_several_chunks() -> None:
    message = call(
        "add", {"a": 1, "b": 2}, id="c1", text="let me add", usage=Usage(output_tokens=5)
    )
    model = ScriptedModel([message])
    chunks = [c async for c in model.stream([Message.user("x")])]
    assert [c.content for c in chunks[:3]] == ["let ", "me ", "add"]
    assert len(chunks) == 6  # 3 words, 2 tool-call halves, usage
    from plait.messages import merge_chunks

    merged = merge_chunks(chunks)
    assert merged.content == "let me add"
    assert merged.tool_calls == (
        ToolCall(id="c1", name="add", arguments=json.dumps({"a": 1, "b": 2})),
    )
    assert merged.usage == Usage(output_tokens=5)


async def test_function_model_builds_each_reply() -> None:
    async def answer(messages: list[Message], tools: list[ToolInfo]) -> Message:
        return reply(messages[-1].content.upper())

    model = FunctionModel(answer)
    assert (await model.generate([Message.user("shout")])).content == "SHOUT"
    assert len(model.requests) == 1


async def test_a_per_run_script_restarts_at_each_new_user_request() -> None:
    model = ScriptedModel([call("add", {"a": 1}, id="c1"), reply("done")], per_run=True)
    asked = [Message.system("be brief"), Message.user("add 1")]
    first = await model.generate(asked)
    assert first.tool_calls[0].id == "c1"
    result = Message.tool("1", tool_call_id="c1")
    assert (await model.generate([*asked, first, result])).content == "done"
    # a later request (a new run, or the next turn of a session) starts the script again
    again = [*asked, first, result, Message.assistant("done"), Message.user("add 2")]
    assert (await model.generate(again)).tool_calls[0].id == "c1"
    assert (await model.generate([Message.user("other")])).tool_calls[0].id == "c1"
    assert model.remaining == 1


async def test_a_per_run_script_runs_out_within_one_run_clearly() -> None:
    model = ScriptedModel([reply("only")], per_run=True)
    over = [Message.user("x"), Message.assistant("only")]
    with pytest.raises(ModelError, match="1 replies and all were used in this run"):
        await model.generate(over)
    assert (await model.generate([Message.user("y")])).content == "only"


def test_a_per_run_scripted_agent_answers_every_run_and_concurrent_ones() -> None:
    import asyncio

    from plait import ChatModelAgent, Runner, tool

    @tool
    def double(n: int) -> int:
        """Double a number.

        Args:
            n: The number.
        """
        return 2 * n

    def ask(messages: list[Message], tools: list[ToolInfo]) -> Message:
        return call("double", {"n": int(messages[-1].content)})

    def answer(messages: list[Message], tools: list[ToolInfo]) -> str:
        return f"twice is {messages[-1].content}"

    agent = ChatModelAgent("doubler", ScriptedModel([ask, answer], per_run=True), tools=[double])
    runner = Runner(agent)
    assert [runner.query_sync(n).final_output for n in ("1", "2", "3")] == [
        "twice is 2",
        "twice is 4",
        "twice is 6",
    ]

    async def both() -> list[object]:
        results = await asyncio.gather(runner.query("5").collect(), runner.query("7").collect())
        return [r.final_output for r in results]

    assert asyncio.run(both()) == ["twice is 10", "twice is 14"]
