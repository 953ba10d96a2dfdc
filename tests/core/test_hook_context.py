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


class Counter(Hooks):
    """Reads the run's counts, keeps a value for the whole run, and notes whether each
    agent paused; written on the public names only."""

    def __init__(self) -> None:
        self.requests: list[int] = []
        self.tool_calls: list[int] = []
        self.kept: list[Any] = []
        self.checkpoints: list[str | None] = []
        self.paused: list[bool] = []

    async def before_run(self, ctx: HookContext, input: Any) -> None:
        self.kept.append(ctx.run_value("first-input"))
        self.checkpoints.append(ctx.checkpoint_id)
        if ctx.run_value("first-input") is None:
            ctx.keep_run_value("first-input", input.messages[-1].content)

    async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
        self.requests.append(ctx.requests)

    async def before_tool(self, ctx: HookContext, call: ToolCall) -> None:
        self.tool_calls.append(ctx.tool_calls)

    async def after_agent(self, ctx: HookContext, error: Any) -> None:
        self.paused.append(ctx.paused)


@tool
def approve(item: str) -> str:
    """Ask a person to approve an item.

    Args:
        item: What to approve.
    """
    return f"{item}: {plait.interrupt({'approve': item})}"


async def test_a_hook_reads_the_runs_counts_and_keeps_a_run_value_across_a_pause() -> None:
    model = ScriptedModel(
        [call("add", {"a": 1, "b": 2}), call("approve", {"item": "x"}), reply("ok")]
    )
    counter = Counter()
    agent = ChatModelAgent("calc", model, tools=[add, approve])
    runner = Runner(agent, store=MemoryStore(), hooks=[counter])
    paused = await runner.query("first question", checkpoint_id="cp-1").collect()
    assert paused.interrupts and counter.paused == [True]
    done = await runner.resume(paused.checkpoint_id, value="yes").collect()
    assert done.final_output == "ok"
    assert counter.requests == [0, 1, 2]  # the calls sent before each, across the pause
    assert counter.tool_calls == [0, 1, 1]  # the paused call counts once it runs
    assert counter.kept == [None, "first question"]  # kept with the checkpoint
    assert counter.checkpoints == ["cp-1", "cp-1"]  # the id the run saves under, then resumes
    assert counter.paused == [True, False]


async def test_a_tool_calls_seams_share_their_agents_state_through_owner() -> None:
    seen: list[Any] = []

    class Tally(Hooks):
        async def before_tool(self, ctx: HookContext, call: ToolCall) -> None:
            agent = ctx.owner()
            assert agent.address == "agent:calc" and ctx.address.startswith("agent:calc;tool:")
            agent.save_state("calls", (agent.load_state("calls") or 0) + 1)

        async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
            seen.append(ctx.owner().load_state("calls"))

    model = ScriptedModel([call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4}), reply("")])
    await Runner(ChatModelAgent("calc", model, tools=[add], hooks=[Tally()])).query("q").collect()
    assert seen == [None, 1, 2]


async def test_a_hook_asks_several_questions_each_at_a_place_of_its_own() -> None:
    class Ask(Hooks):
        def __init__(self) -> None:
            self.answers: list[Any] = []

        async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
            asked = ctx.load_state("asked") or 0
            answer = ctx.place(f"ask-{asked}").interrupt({"question": asked})
            ctx.save_state("asked", asked + 1)
            self.answers.append(answer)

    hook = Ask()
    model = ScriptedModel([call("add", {"a": 1, "b": 2}), reply("3")])
    runner = Runner(ChatModelAgent("calc", model, tools=[add], hooks=[hook]), store=MemoryStore())
    first = await runner.query("q").collect()
    assert first.interrupts[0].address == "agent:calc;ask-0"
    second = await runner.resume(first.checkpoint_id, value="one").collect()
    assert [i.info for i in second.interrupts] == [{"question": 1}]
    done = await runner.resume(second.checkpoint_id, value="two").collect()
    assert done.final_output == "3"
    assert hook.answers == ["one", "two"]  # each place got its own answer


def test_a_place_is_named_by_a_text_without_a_semicolon() -> None:
    problems: list[str] = []

    class Bad(Hooks):
        async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
            for name in ("", "a;b"):
                try:
                    ctx.place(name)
                except plait.errors.UsageError as exc:
                    problems.append(str(exc))

    Runner(ChatModelAgent("calc", ScriptedModel([reply("")]), hooks=[Bad()])).query_sync("q")
    assert len(problems) == 2 and "';'" in problems[1]


async def test_after_tool_sees_what_a_failing_tool_raised() -> None:
    @tool
    def broken() -> str:
        """Fail."""
        raise ValueError("out of paper")

    seen: list[Any] = []

    class Look(Hooks):
        async def after_tool(self, ctx: HookContext, call: ToolCall, result: str) -> None:
            seen.append((ctx.tool_error, result))

    model = ScriptedModel([call("broken", {}), reply("sorry")])
    await Runner(ChatModelAgent("a", model, tools=[broken], hooks=[Look()])).query("q").collect()
    ((error, result),) = seen
    assert isinstance(error, ValueError) and "out of paper" in result
