"""`plait.HookContext`: what every seam of `plait.Hooks` is given besides `AgentContext` —
the place in the run, the agent's model, usage recording, emitting, per-run extras and a
pause — used here by a hook written with the public names only."""

from __future__ import annotations

from typing import Any

import plait
from plait import AgentEvent, ChatModelAgent, HookContext, Hooks, ModelRequest, Runner, tool
from plait.messages import ToolCall, Usage
from plait.stores import MemoryStore
from plait.testing import ScriptedModel, call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


class Asker(Hooks):
    """Asks a person before every tool call, counts model calls per run in `extras`, and
    charges a made-up summary call of its own to the run's usage."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, Any]] = []
        self.counts: list[int] = []

    async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
        assert isinstance(ctx, plait.HookContext)
        mine = ctx.extras.setdefault(id(self), {"calls": 0})
        mine["calls"] += 1
        self.counts.append(mine["calls"])
        self.seen.append(("model", ctx.address, ctx.model))

    async def before_tool(self, ctx: HookContext, call: ToolCall) -> None:
        self.seen.append(("tool", ctx.address, None))
        answer = ctx.interrupt({"ask": call.name})  # pauses the first time
        if answer != "yes":
            raise plait.errors.UsageError(f"not allowed: {call.name}")

    async def after_agent(self, ctx: HookContext, error: Any) -> None:
        ctx.record_model_call(Usage(input_tokens=3, output_tokens=4))


def _agent(model: ScriptedModel, hook: Asker) -> ChatModelAgent:
    return ChatModelAgent("calc", model, tools=[add], hooks=[hook])


async def test_a_hook_on_the_public_hook_context_pauses_counts_and_charges() -> None:
    model = ScriptedModel([call("add", {"a": 2, "b": 3}, id="c1"), reply("5")], per_run=True)
    hook = Asker()
    runner = Runner(_agent(model, hook), store=MemoryStore())
    paused = await runner.query("2 + 3?").collect()
    assert [i.info for i in paused.interrupts] == [{"ask": "add"}]
    assert paused.interrupts[0].address.startswith("agent:calc;tool:add:c1")
    done = await runner.resume(paused.checkpoint_id, value="yes").collect()
    assert done.error is None and done.final_output == "5"
    kinds = [(kind, address.split(";")[0]) for kind, address, _ in hook.seen]
    assert kinds[0] == ("model", "agent:calc") and ("tool", "agent:calc") in kinds
    assert all(m is model for kind, _, m in hook.seen if kind == "model")
    assert hook.counts == [1, 1]  # extras live with one run: the resume is a new one
    assert done.usage.input_tokens >= 3 and done.usage.output_tokens >= 4


async def test_emit_passes_an_event_up_only_where_a_caller_takes_events() -> None:
    took: list[bool] = []

    class Emitter(Hooks):
        async def before_tool(self, ctx: HookContext, call: ToolCall) -> None:
            event: AgentEvent = ctx.event(output=plait.AgentOutput(custom={"note": 1}))
            took.append(ctx.emit(event))

    model = ScriptedModel([call("add", {"a": 1, "b": 1}), reply("2")])
    agent = ChatModelAgent("calc", model, tools=[add], hooks=[Emitter()])
    result = await Runner(agent).query("1 + 1?").collect()
    assert result.final_output == "2"
    assert took == [False]  # a plain tool call's caller takes no events from it
