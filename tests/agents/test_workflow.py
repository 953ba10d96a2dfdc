"""Sequential, parallel and loop workflow agents (Eino scenarios 20-25)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from plait import (
    AgentAction,
    AgentContext,
    AgentEvent,
    AgentInput,
    BreakLoopAction,
    ChatModelAgent,
    LoopAgent,
    Message,
    ParallelAgent,
    RunContext,
    Runner,
    SequentialAgent,
    interrupt,
    run_context,
    tool,
)
from plait.errors import ModelError, UsageError
from plait.testing import FunctionModel, ScriptedModel, call, reply
from tests.conftest import kinds


def _says(name: str, *texts: str) -> tuple[ChatModelAgent, ScriptedModel]:
    model = ScriptedModel([reply(t) for t in texts])
    return ChatModelAgent(name, model), model


def test_sequential_children_see_earlier_messages_and_the_run_path_accumulates() -> None:
    a1, _ = _says("A1", "R1")
    a2, m2 = _says("A2", "R2")
    result = Runner(SequentialAgent("S", [a1, a2])).query_sync("q")
    assert [e.run_path for e in result.events] == [("S", "A1"), ("S", "A1", "A2")]
    assert m2.requests[0].messages == (
        Message.user("q"),
        Message(role="user", content="For context: [A1] said: R1.", name="A1"),
    )
    assert result.final_output == "R2"


def test_sequential_stops_at_an_exit() -> None:
    first = ChatModelAgent(
        "A1", ScriptedModel([call("exit", {"final_result": "stop"})]), exit_tool=True
    )
    second, model = _says("A2", "never")
    result = Runner(SequentialAgent("S", [first, second])).query_sync("q")
    assert kinds(result.events) == ["assistant", "tool:exit"]
    assert model.requests == []
    assert result.final_output == "stop"


def test_sequential_stops_at_an_error_without_adding_one() -> None:
    a1, _ = _says("A1", "R1")
    a2 = ChatModelAgent("A2", ScriptedModel([]))
    a3, m3 = _says("A3", "never")
    result = Runner(SequentialAgent("S", [a1, a2, a3])).query_sync("q")
    assert kinds(result.events) == ["assistant", "error:ModelError"]
    assert m3.requests == []
    assert isinstance(result.error, ModelError)


def test_loop_runs_max_iterations_rounds() -> None:
    agent, model = _says("A", "one", "two", "three")
    result = Runner(LoopAgent("L", [agent], max_iterations=3)).query_sync("q")
    assert [e.run_path for e in result.events] == [
        ("L", "A"),
        ("L", "A", "A"),
        ("L", "A", "A", "A"),
    ]
    # each round sees its own earlier answers verbatim
    assert [m.role for m in model.requests[2].messages] == ["user", "assistant", "assistant"]


def test_loop_stops_at_an_error() -> None:
    agent, _ = _says("A", "one", "two")
    result = Runner(LoopAgent("L", [agent], max_iterations=10)).query_sync("q")
    assert kinds(result.events) == ["assistant", "assistant", "error:ModelError"]


class Breaker:
    """Emits a message carrying a BreakLoopAction, then one more message."""

    description = ""

    def __init__(self, name: str) -> None:
        self.name = name
        self.runs = 0

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        self.runs += 1
        yield ctx.event(
            message=Message.assistant("breaking"),
            action=AgentAction(break_loop=BreakLoopAction(from_agent="L")),
        )
        yield ctx.event(message=Message.assistant("still delivered"))


def test_break_loop_is_marked_done_and_takes_effect_after_the_agent_finishes() -> None:
    breaker = Breaker("B")
    after, model = _says("After", "never")
    result = Runner(LoopAgent("L", [breaker, after])).query_sync("q")
    assert [e.message.message.content for e in result.events] == [  # type: ignore[union-attr]
        "breaking",
        "still delivered",
    ]
    assert result.events[0].action == AgentAction(
        break_loop=BreakLoopAction(from_agent="L", done=True, current_iterations=0)
    )
    assert breaker.runs == 1
    assert model.requests == []


def test_a_tool_can_break_the_loop_on_a_later_iteration() -> None:
    rounds = {"n": 0}

    @tool
    def check() -> str:
        """Check whether the work is done."""
        rounds["n"] += 1
        if rounds["n"] == 2:
            run_context().break_loop()
            return "done"
        return "not yet"

    model = ScriptedModel([call("check", {}), reply("r1"), call("check", {}), reply("r2")])
    worker = ChatModelAgent("W", model, tools=[check])
    result = Runner(LoopAgent("L", [worker])).query_sync("q")
    breaks = [e.action.break_loop for e in result.events if e.action and e.action.break_loop]
    assert breaks == [BreakLoopAction(from_agent="W", done=True, current_iterations=1)]
    assert result.final_output == "r2"  # the agent finished its turn after the break


def test_parallel_children_run_concurrently_and_later_agents_see_both() -> None:
    started: set[str] = set()
    both = asyncio.Event()

    class Waiter:
        description = ""

        def __init__(self, name: str) -> None:
            self.name = name

        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            started.add(self.name)
            if len(started) == 2:
                both.set()
            await asyncio.wait_for(both.wait(), timeout=5)  # hangs if run one after the other
            yield ctx.event(message=Message.assistant(f"{self.name} done"))

    summary, model = _says("Sum", "summary")
    flow = SequentialAgent("S", [ParallelAgent("P", [Waiter("A"), Waiter("B")]), summary])
    result = Runner(flow).query_sync("q")
    paths = {e.run_path for e in result.events}
    assert {("S", "P", "A"), ("S", "P", "B")} <= paths
    seen = [m.content for m in model.requests[0].messages]
    assert seen == ["q", "For context: [A] said: A done.", "For context: [B] said: B done."]


def test_parallel_events_interleave() -> None:
    class Ticker:
        description = ""

        def __init__(self, name: str) -> None:
            self.name = name

        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            for i in range(3):
                await asyncio.sleep(0.005)
                yield ctx.event(message=Message.assistant(f"{self.name}{i}"))

    result = Runner(ParallelAgent("P", [Ticker("a"), Ticker("b")])).query_sync("q")
    order = [e.agent_name for e in result.events]
    assert sorted(order) == ["a", "a", "a", "b", "b", "b"]
    assert order != ["a", "a", "a", "b", "b", "b"]


def test_a_parallel_error_cancels_the_siblings() -> None:
    cancelled = asyncio.Event()

    class Slow:
        name = "slow"
        description = ""

        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            yield ctx.event(message=Message.assistant("late"))

    broken = ChatModelAgent("broken", ScriptedModel([]))
    result = Runner(ParallelAgent("P", [Slow(), broken])).query_sync("q")
    assert kinds(result.events) == ["error:ModelError"]
    assert cancelled.is_set()


def test_workflows_validate_their_configuration() -> None:
    with pytest.raises(UsageError, match="at least one"):
        SequentialAgent("S", [])
    with pytest.raises(UsageError, match="max_iterations"):
        LoopAgent("L", [_says("A")[0]], max_iterations=0)


@pytest.mark.parametrize("kind", [SequentialAgent, ParallelAgent, LoopAgent])
def test_a_workflow_refuses_two_children_with_one_name(kind: type[SequentialAgent]) -> None:
    a, _ = _says("a")
    with pytest.raises(
        UsageError, match=rf"^{kind.__name__} 'w': sub_agents has several agents named 'a'"
    ):
        kind("w", [a, _says("b")[0], a])  # the same agent twice
    with pytest.raises(UsageError, match="several agents named 'a', 'b'"):
        kind("w", [a, _says("b")[0], _says("a")[0], _says("b")[0]])


@pytest.mark.parametrize("kind", [SequentialAgent, ParallelAgent, LoopAgent])
@pytest.mark.parametrize(
    ("given", "shown"),
    [(None, "None"), ("x" * 300, "'" + "x" * 96 + "..."), (ScriptedModel, "<class 'plait")],
    ids=["none", "long-string", "a-class"],
)
def test_what_is_not_an_agent_is_refused_when_a_workflow_is_built(
    kind: type[SequentialAgent], given: object, shown: str
) -> None:
    with pytest.raises(UsageError) as raised:
        kind("w", [_says("A")[0], given])  # type: ignore[list-item]
    message = str(raised.value)
    assert message.startswith(f"{kind.__name__} 'w': sub_agents[1] is {shown}")
    assert message.endswith(", not an Agent (needs name, description and run)")
    assert len(message) < 200


def test_a_model_agent_starts_afresh_in_each_round_after_a_resume() -> None:
    """A ChatModelAgent that finished its turn leaves no resume record behind: in the next
    round of a loop, after the run paused and resumed in between, it starts from its input."""

    @tool
    def add(a: int, b: int) -> int:
        """Add.

        Args:
            a: One.
            b: Two.
        """
        return a + b

    asked: list[list[str]] = []

    def adder(messages: list[Message], tools: object) -> Message:
        asked.append([m.role for m in messages])
        if messages[-1].role == "tool":
            return reply("sum done")
        return call("add", {"a": 1, "b": 2})

    class Asker:
        name, description = "asker", "Asks once."

        async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
            if ctx.load_state("asked") is None:
                ctx.save_state("asked", True)
                interrupt("go on?")
            yield ctx.event(message=Message.assistant("asked"))

    loop = LoopAgent(
        "rounds",
        [ChatModelAgent("adder", FunctionModel(adder), tools=[add]), Asker()],
        max_iterations=2,
    )
    runner = Runner(loop, durability="step")
    paused = runner.query_sync("add")
    assert paused.checkpoint_id is not None
    done = runner.resume_sync(paused.checkpoint_id, value="yes")
    assert done.error is None and done.final_output == "asked"
    # round 2 began with a model call on a fresh input, not from round 1's tool result
    first_of_round_2 = asked[2]
    assert first_of_round_2[-1] != "tool"
    assert len(asked) == 4
