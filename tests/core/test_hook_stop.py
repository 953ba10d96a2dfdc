"""`HookContext.stop`: a hook stops the run at its next safe point with its own error and a
checkpoint that `resume` continues; stopped in `before_model`, the call is not made (the
resumed run makes it) and the tool calls that finished are not run again."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from plait import (
    AgentTool,
    ChatModelAgent,
    HookContext,
    Hooks,
    Message,
    ModelRequest,
    Runner,
    tool,
)
from plait.errors import QuotaExceeded, RunCancelled
from plait.stores import MemoryStore
from plait.testing import FunctionModel, call, reply
from plait.tools.base import ToolInfo


class StopAt(Hooks):
    """Stops the run before its model call number `at` (once), with `error` (None: a plain
    stop)."""

    def __init__(self, at: int, error: QuotaExceeded | None) -> None:
        self.at = at
        self.error = error
        self.stopped = False

    async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
        if ctx.requests + 1 == self.at and not self.stopped:
            self.stopped = True
            ctx.stop(self.error)


def _agent(ran: list[int]) -> tuple[ChatModelAgent, FunctionModel]:
    @tool
    def step(n: int) -> str:
        """Do a step.

        Args:
            n: Its number.
        """
        ran.append(n)
        return f"step {n}"

    def think(messages: Sequence[Message], tools: Sequence[ToolInfo]) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        return call("step", {"n": done + 1}) if done < 2 else reply("done")

    model = FunctionModel(think)
    return ChatModelAgent("worker", model, tools=[step]), model


ERROR = QuotaExceeded("no room today", quota="tokens_per_day", limit=10, retry_after=60)


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("error", [ERROR, None], ids=["own error", "plain stop"])
async def test_a_stop_before_a_model_call_keeps_a_checkpoint_that_goes_on(
    streaming: bool, error: QuotaExceeded | None
) -> None:
    ran: list[int] = []
    agent, model = _agent(ran)
    hook = StopAt(2, error)
    runner = Runner(agent, store=MemoryStore(), hooks=[hook], enable_streaming=streaming)
    stopped = await runner.query("go").collect()
    assert isinstance(stopped.error, QuotaExceeded if error else RunCancelled)
    if error is not None:
        assert stopped.error.quota == "tokens_per_day"
    assert stopped.checkpoint_id is not None
    assert len(model.requests) == 1 and ran == [1]  # the second call was never sent

    resumed = await runner.resume(stopped.checkpoint_id).collect()
    assert resumed.error is None
    assert resumed.final_output == "done"
    assert ran == [1, 2]  # step 1 was not run again
    assert len(model.requests) == 3


async def test_a_stop_in_an_agent_run_as_a_tool_ends_the_whole_run_with_its_error() -> None:
    """The stop's error is the run's even when the agent run as a tool saved the run before
    its earlier events reached the top (they come first, then the error)."""
    ran: list[int] = []
    inner, inner_model = _agent(ran)

    def lead(messages: Sequence[Message], tools: Sequence[ToolInfo]) -> Message:
        if messages[-1].role == "tool":
            return reply(f"inner said: {messages[-1].content}")
        return call("worker", {"request": "go"})

    outer = ChatModelAgent("lead", FunctionModel(lead), tools=[AgentTool(inner)])
    hook = StopAt(3, ERROR)  # the lead's call, the worker's first, then stop
    runner = Runner(outer, store=MemoryStore(), hooks=[hook], durability="step")
    stopped = await runner.query("go").collect()
    assert isinstance(stopped.error, QuotaExceeded)
    assert stopped.checkpoint_id is not None
    assert ran == [1] and len(inner_model.requests) == 1

    resumed = await runner.resume(stopped.checkpoint_id).collect()
    assert resumed.error is None, resumed.error
    assert resumed.final_output == "inner said: done"
    assert ran[-1] == 2 and ran.count(2) == 1  # the stopped call was made on the resume
