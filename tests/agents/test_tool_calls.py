"""A round of tool calls: time limits per agent and per tool, and what a timed-out call becomes."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from plait import (
    ChatModelAgent,
    FunctionTool,
    RunContext,
    Runner,
    RunResult,
    errors,
    interrupt,
    run_context,
    tool,
)
from plait.errors import ToolError, UsageError
from plait.testing import ScriptedModel, call, calls, reply

pytestmark = pytest.mark.timeout(60)


class Hang:
    """An async tool that never returns by itself, and records that it was cancelled."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

        @tool
        async def hang() -> str:
            """Wait forever."""
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            return "never"

        self.tool = hang


@tool
async def quick() -> str:
    """Answer at once."""
    return "quick result"


async def _collect(runner: Runner) -> Any:
    async with asyncio.timeout(20):  # the faults fixed here would hang forever
        return await runner.query("go").collect()


async def test_a_tool_past_the_agents_tool_timeout_is_stopped_and_told_to_the_model() -> None:
    hang = Hang()
    model = ScriptedModel([calls(call("hang"), call("quick")), reply("gave up on hang")])
    agent = ChatModelAgent("A", model, tools=[hang.tool, quick], tool_timeout=0.2)
    result = await _collect(Runner(agent))
    assert result.error is None
    assert result.final_output == "gave up on hang"
    assert hang.cancelled.is_set()
    told = {m.name: m.content for m in model.requests[1].messages if m.role == "tool"}
    assert told == {
        "hang": "Error: tool 'hang' did not finish within 0.2 s and was stopped",
        "quick": "quick result",
    }


async def test_with_tool_errors_raise_a_timeout_ends_the_run_with_tool_timeout() -> None:
    hang = Hang()
    model = ScriptedModel([call("hang", id="c1"), reply("never")])
    agent = ChatModelAgent("A", model, tools=[hang.tool], tool_timeout=0.1, tool_errors="raise")
    result = await _collect(Runner(agent))
    err = result.error
    assert isinstance(err, errors.ToolTimeout)
    assert isinstance(err, ToolError) and isinstance(err, TimeoutError)
    assert (err.tool_name, err.limit, err.call_id, err.agent_name) == ("hang", 0.1, "c1", "A")
    assert "tool 'hang' of agent 'A' ran longer than its timeout of 0.1 s" in str(err)
    assert "@tool(timeout=...)" in str(err)  # says what to do
    assert len(model.requests) == 1
    back = RunResult.from_json(result.to_json()).error  # as a server sends it
    assert type(back) is errors.ToolTimeout and back == err and back.limit == 0.1


async def test_a_tools_own_timeout_wins_over_the_agents_both_ways() -> None:
    @tool(timeout=0.1)
    async def short() -> str:
        """Sleep longer than this tool's own timeout."""
        await asyncio.sleep(5)
        return "late"

    async def nap() -> str:
        """Sleep longer than the agent's timeout but within this tool's."""
        await asyncio.sleep(0.3)
        return "rested"

    long = FunctionTool(nap, timeout=10)
    model = ScriptedModel([calls(call("short"), call("nap")), reply("done")])
    agent = ChatModelAgent("A", model, tools=[short, long], tool_timeout=0.05)
    assert (short.timeout, long.timeout) == (0.1, 10.0)
    result = await _collect(Runner(agent))
    told = {m.name: m.content for m in model.requests[1].messages if m.role == "tool"}
    assert told == {
        "short": "Error: tool 'short' did not finish within 0.1 s and was stopped",
        "nap": "rested",
    }
    assert result.final_output == "done"


async def test_a_sync_tool_past_its_timeout_sees_ctx_cancelled_and_stops() -> None:
    effects: list[str] = []
    checked = threading.Event()

    @tool(timeout=0.1)
    def write_slowly(ctx: RunContext) -> str:
        """Write after a while, unless told to stop."""
        for _ in range(500):
            if ctx.cancelled and run_context().cancelled:
                checked.set()
                return "stopped"
            time.sleep(0.01)
        effects.append("written")
        return "written"

    model = ScriptedModel([call("write_slowly"), reply("ok")])
    result = await _collect(Runner(ChatModelAgent("A", model, tools=[write_slowly])))
    assert result.final_output == "ok"
    assert "did not finish within 0.1 s" in model.requests[1].messages[-1].content
    assert await asyncio.to_thread(checked.wait, 10)
    assert effects == []


def test_a_tool_that_finishes_in_time_is_not_affected() -> None:
    model = ScriptedModel([call("quick"), reply("done")])
    agent = ChatModelAgent("A", model, tools=[quick], tool_timeout=5)
    assert Runner(agent).query_sync("go").final_output == "done"
    assert model.requests[1].messages[-1].content == "quick result"


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "1", True, [1]])
def test_a_timeout_must_be_a_positive_finite_number_or_none(bad: Any) -> None:
    def f() -> str:
        """Do nothing."""
        return ""

    with pytest.raises(UsageError, match="positive finite number of seconds"):
        ChatModelAgent("A", ScriptedModel([]), tool_timeout=bad)
    with pytest.raises(UsageError, match="tool 'f'"):
        tool(timeout=bad)(f)
    with pytest.raises(UsageError, match="tool 'f'"):
        FunctionTool(f, timeout=bad)
    assert ChatModelAgent("A", ScriptedModel([]), tool_timeout=None).tool_timeout is None
    assert ChatModelAgent("A", ScriptedModel([]), tool_timeout=2).tool_timeout == 2.0


@tool
async def ask_late(item: str) -> str:
    """Ask a person, after some work.

    Args:
        item: What to ask about.
    """
    await asyncio.sleep(0.05)
    return str(interrupt(f"late {item}?"))


@tool
async def ask_now(item: str) -> str:
    """Ask a person at once.

    Args:
        item: What to ask about.
    """
    return str(interrupt(f"now {item}?"))


async def test_interrupts_of_one_round_are_in_the_order_of_the_calls() -> None:
    model = ScriptedModel(
        [
            calls(
                call("ask_late", {"item": "a"}),
                call("ask_now", {"item": "b"}),
                call("ask_now", {"item": "c"}),
            )
        ]
    )
    agent = ChatModelAgent("A", model, tools=[ask_late, ask_now])
    paused = await Runner(agent).query("q").collect()
    assert [i.info for i in paused.interrupts] == ["late a?", "now b?", "now c?"]
