"""AgentTool: an agent as a tool (Eino scenarios 36-41, with plait's decisions)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from plait import (
    AgentAction,
    AgentEvent,
    AgentInput,
    AgentTool,
    ChatModelAgent,
    Message,
    RunContext,
    Runner,
    run_context,
    tool,
)
from plait.errors import MaxStepsExceeded, UsageError
from plait.testing import ScriptedModel, call, calls, reply
from tests.conftest import kinds


def _outer(model: ScriptedModel, inner: object, **kw: object) -> ChatModelAgent:
    return ChatModelAgent("Outer", model, tools=[AgentTool(inner, **kw)])  # type: ignore[arg-type]


def test_the_child_gets_the_request_and_its_final_answer_is_the_result() -> None:
    inner_model = ScriptedModel([reply("first"), reply("ignored")])
    inner = ChatModelAgent("Inner", inner_model, description="Does inner things")
    model = ScriptedModel([call("Inner", {"request": "Test request"}, id="c1"), reply("done")])
    outer = _outer(model, inner)
    assert outer.tools[0].name == "Inner"
    assert outer.tools[0].description == "Does inner things"
    assert outer.tools[0].parameters["required"] == ["request"]
    result = Runner(outer).query_sync("q")
    assert inner_model.requests[0].messages == (Message.user("Test request"),)
    tool_event = next(e for e in result.events if e.message and e.message.role == "tool")
    assert tool_event.message.message == Message.tool("first", "c1", name="Inner")  # type: ignore[union-attr]
    assert result.final_output == "done"


def test_child_events_come_up_one_level_deeper_with_the_run_path_extended() -> None:
    inner2 = ChatModelAgent("Inner2", ScriptedModel([reply("deepest")]))
    inner = ChatModelAgent(
        "Inner",
        ScriptedModel([call("Inner2", {"request": "go"}), reply("inner done")]),
        tools=[AgentTool(inner2)],
    )
    outer = _outer(ScriptedModel([call("Inner", {"request": "go"}), reply("outer done")]), inner)
    result = Runner(outer).query_sync("q")
    located = [(e.agent_name, e.run_path, e.depth) for e in result.events]
    assert ("Inner2", ("Outer", "Inner", "Inner2"), 2) in located
    assert ("Inner", ("Outer", "Inner"), 1) in located
    assert located[-1] == ("Outer", ("Outer",), 0)
    assert result.final_output == "outer done"


def test_internal_events_can_be_switched_off() -> None:
    inner = ChatModelAgent("Inner", ScriptedModel([reply("hidden")]))
    outer = _outer(
        ScriptedModel([call("Inner", {"request": "x"}), reply("done")]),
        inner,
        emit_internal_events=False,
    )
    result = Runner(outer).query_sync("q")
    assert {e.agent_name for e in result.events} == {"Outer"}
    assert kinds(result.events) == ["assistant", "tool:Inner", "assistant"]


def test_child_actions_never_act_on_the_parent() -> None:
    inner = ChatModelAgent(
        "Inner", ScriptedModel([call("exit", {"final_result": "inner exit"})]), exit_tool=True
    )
    model = ScriptedModel([call("Inner", {"request": "x"}), reply("parent continues")])
    result = Runner(_outer(model, inner)).query_sync("q")
    assert result.final_output == "parent continues"
    exits = [e for e in result.events if e.action and e.action.exit]
    assert [e.depth for e in exits] == [1]
    assert len(model.requests) == 2


def test_session_values_are_shared_both_ways() -> None:
    @tool
    def swap() -> str:
        """Read the parent's value and leave one for it."""
        values = run_context().session_values
        values["from_child"] = values["from_parent"] + "!"
        return "swapped"

    inner = ChatModelAgent("Inner", ScriptedModel([call("swap", {}), reply("ok")]), tools=[swap])
    outer = _outer(ScriptedModel([call("Inner", {"request": "x"}), reply("done")]), inner)

    async def main() -> dict[str, object]:
        stream = Runner(outer).query("q", session_values={"from_parent": "hi"})
        await stream.collect()
        return stream.context.session_values

    import asyncio

    assert asyncio.run(main()) == {"from_parent": "hi", "from_child": "hi!"}


def test_a_child_error_is_told_to_the_parent_model_and_not_forwarded() -> None:
    inner = ChatModelAgent("Inner", ScriptedModel([]))  # fails: the script is empty
    model = ScriptedModel([call("Inner", {"request": "x"}), reply("recovered")])
    result = Runner(_outer(model, inner)).query_sync("q")
    assert result.error is None
    assert all(e.error is None for e in result.events)
    tool_text = next(e for e in result.events if e.message and e.message.role == "tool")
    assert "ModelError" in tool_text.message.message.content  # type: ignore[union-attr]
    assert result.final_output == "recovered"


class LimitAgent:
    name = "Limited"
    description = "hits a run-wide limit"

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield ctx.event(error=MaxStepsExceeded("total_max_steps=3 reached"))


def test_a_limit_error_inside_the_child_ends_the_whole_run() -> None:
    model = ScriptedModel([call("Limited", {"request": "x"}), reply("never")])
    result = Runner(_outer(model, LimitAgent())).query_sync("q")
    assert isinstance(result.error, MaxStepsExceeded)
    assert len(model.requests) == 1


def test_bad_arguments_are_told_to_the_model() -> None:
    inner = ChatModelAgent("Inner", ScriptedModel([]))
    model = ScriptedModel([call("Inner", {"question": "x"}), reply("fixed")])
    result = Runner(_outer(model, inner)).query_sync("q")
    text = result.events[1].message.message.content  # type: ignore[union-attr]
    assert text == """Error: tool 'Inner' takes {"request": <string>}"""


def test_full_history_drops_system_and_the_calling_message() -> None:
    inner_model = ScriptedModel([reply("ok")])
    inner = ChatModelAgent("test-agent", inner_model)
    model = ScriptedModel(
        [call("test-agent", {"request": "child task"}, text="tool call msg"), reply("done")]
    )
    outer = ChatModelAgent(
        "react-agent",
        model,
        instruction="system text is dropped",
        tools=[AgentTool(inner, full_history=True)],
    )
    Runner(outer).run_sync([Message.user("first user message")])
    assert inner_model.requests[0].messages == (
        Message.user("first user message"),
        Message.user("child task"),
    )


def test_full_history_rewrites_earlier_assistant_and_tool_messages() -> None:
    inner_model = ScriptedModel([reply("ok")])
    inner = ChatModelAgent("Child", inner_model)

    @tool
    def look() -> str:
        """Look around."""
        return "a tree"

    model = ScriptedModel(
        [
            call("look", {}, id="l1", text="looking"),
            call("Child", {"request": "describe"}),
            reply("done"),
        ]
    )
    outer = ChatModelAgent("Parent", model, tools=[look, AgentTool(inner, full_history=True)])
    Runner(outer).query_sync("q")
    assert [m.content for m in inner_model.requests[0].messages] == [
        "q",
        "For context: [Parent] said: looking. [Parent] called tool: `look` with arguments: {}.",
        "For context: [Parent] `look` tool returned result: a tree.",
        "describe",
    ]


async def test_internal_events_stream_while_the_child_runs() -> None:
    inner = ChatModelAgent("Inner", ScriptedModel([reply("streamed inner")]))

    @tool
    async def other() -> str:
        """Another tool in the same round."""
        return "other"

    model = ScriptedModel([calls(call("Inner", {"request": "x"}), call("other", {})), "end"])
    outer = ChatModelAgent("Outer", model, tools=[AgentTool(inner), other])
    events = [e async for e in Runner(outer, enable_streaming=True).query("q")]
    inner_events = [e for e in events if e.agent_name == "Inner"]
    assert len(inner_events) == 1 and inner_events[0].message.is_streaming  # type: ignore[union-attr]
    assert (await inner_events[0].message.get_message()).content == "streamed inner"  # type: ignore[union-attr]
    inner_result = next(e for e in events if e.message and e.message.tool_name == "Inner")
    assert (await inner_result.message.get_message()).content == "streamed inner"  # type: ignore[union-attr]


def test_action_custom_from_child_tool_stays_with_the_child() -> None:
    @tool
    def mark() -> str:
        """Mark."""
        run_context().send_action(AgentAction(custom="child mark"))
        return "marked"

    inner = ChatModelAgent("Inner", ScriptedModel([call("mark", {}), reply("ok")]), tools=[mark])
    result = Runner(
        _outer(ScriptedModel([call("Inner", {"request": "x"}), reply("done")]), inner)
    ).query_sync("q")
    marked = [e for e in result.events if e.action and e.action.custom == "child mark"]
    assert [(e.agent_name, e.depth) for e in marked] == [("Inner", 1)]


def test_a_custom_input_schema_sends_the_raw_arguments_as_the_childs_message() -> None:
    from pydantic import BaseModel

    class Ask(BaseModel):
        custom_arg: str

    inner_model = ScriptedModel([reply("custom ok")])
    inner = ChatModelAgent("Inner", inner_model, description="takes custom args")
    tool_ = AgentTool(inner, input_schema=Ask)
    assert tool_.info().parameters["required"] == ["custom_arg"]
    model = ScriptedModel(
        [call("Inner", '{"custom_arg":"hello world"}'), call("Inner", '{"other": 1}'), "done"]
    )
    result = Runner(ChatModelAgent("Outer", model, tools=[tool_])).query_sync("q")
    assert inner_model.requests[0].messages == (Message.user('{"custom_arg":"hello world"}'),)
    texts = [
        e.message.message.content
        for e in result.events
        if e.message and e.message.role == "tool" and e.depth == 0
    ]  # type: ignore[union-attr]
    assert texts[0] == "custom ok"
    assert texts[1].startswith("Error: invalid arguments for tool 'Inner'")
    schema_tool = AgentTool(inner, input_schema={"type": "object", "properties": {"x": {}}})
    assert schema_tool.info().parameters == {"type": "object", "properties": {"x": {}}}


@tool
def _lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return query


@pytest.mark.parametrize(
    ("given", "shown"), [(None, "None"), ("Inner", "'Inner'"), (_lookup, "FunctionTool('_lookup')")]
)
def test_what_is_not_an_agent_is_refused_when_an_agent_tool_is_built(
    given: object, shown: str
) -> None:
    with pytest.raises(UsageError) as raised:
        AgentTool(given)  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"AgentTool: agent is {shown}, not an Agent (needs name, description and run)"
    )


def test_a_custom_input_model_is_checked_strictly_as_json() -> None:
    from pydantic import BaseModel

    class Ask(BaseModel):
        count: int

    inner_model = ScriptedModel([reply("counted")])
    tool_ = AgentTool(ChatModelAgent("Inner", inner_model), input_schema=Ask)
    model = ScriptedModel([call("Inner", '{"count": "3"}'), call("Inner", '{"count": 3}'), "done"])
    result = Runner(ChatModelAgent("Outer", model, tools=[tool_])).query_sync("q")
    texts = [
        e.message.message.content  # type: ignore[union-attr]
        for e in result.events
        if e.message and e.message.role == "tool" and e.depth == 0
    ]
    assert texts == [
        "Error: invalid arguments for tool 'Inner': count: Input should be a valid integer"
        " (got '3')",
        "counted",
    ]
    assert inner_model.requests[0].messages == (Message.user('{"count": 3}'),)
