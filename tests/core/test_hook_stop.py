"""`HookContext.stop`: a hook stops the run at its next safe point with its own error and a
checkpoint that `resume` continues; stopped in `before_model`, the call is not made (the
resumed run makes it) and the tool calls that finished are not run again."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from plait import ChatModelAgent, HookContext, Hooks, Message, ModelRequest, Runner, tool
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
