"""ResumeInfo: how a resume concerns each agent and tool call of a resumed run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from plait import (
    AgentEvent,
    AgentInput,
    ChatModelAgent,
    Hooks,
    LoopAgent,
    Message,
    ParallelAgent,
    ResumeInfo,
    RunContext,
    Runner,
    SequentialAgent,
    interrupt,
    run_context,
    tool,
)
from plait.testing import ScriptedModel, call, reply

NOT = ResumeInfo(was_interrupted=False, is_resume_target=False)


class Asker:
    """A custom agent that asks a person in its own `run` (with `plait.interrupt`)."""

    description = "asks"

    def __init__(self, name: str) -> None:
        self.name = name

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        answer = interrupt(f"{self.name}?", state={"asked": self.name})
        yield ctx.event(message=Message.assistant(f"{self.name}: {answer}"))


class Sayer:
    """A custom agent that only answers."""

    description = "says"

    def __init__(self, name: str) -> None:
        self.name = name

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield ctx.event(message=Message.assistant(f"{self.name} said"))


class Seen(Hooks):
    """Record the `resume_info` of every agent as it enters."""

    def __init__(self) -> None:
        self.entered: list[tuple[str, ResumeInfo | None]] = []

    async def before_agent(self, ctx: RunContext, input: AgentInput) -> None:
        self.entered.append((ctx.agent_name, ctx.resume_info))

    def take(self) -> list[tuple[str, ResumeInfo | None]]:
        entered, self.entered = self.entered, []
        return entered


def test_each_agent_of_a_sequence_sees_how_the_resume_concerns_it() -> None:
    seen = Seen()
    flow = SequentialAgent("S", [Sayer("before"), Asker("asker"), Sayer("after")])
    runner = Runner(flow, hooks=[seen])
    paused = runner.query_sync("go")
    assert seen.take() == [("S", None), ("before", None), ("asker", None)]
    done = runner.resume_sync(paused.checkpoint_id, value="yes")  # type: ignore[arg-type]
    assert done.final_output == "after said"
    assert seen.take() == [
        ("S", ResumeInfo(was_interrupted=True, is_resume_target=False)),  # above the pause
        (
            "asker",
            ResumeInfo(
                was_interrupted=True,
                is_resume_target=True,
                interrupt_state={"asked": "asker"},
                data="yes",
            ),
        ),
        ("after", NOT),  # not on the interrupt's path
    ]


def test_an_interrupt_left_unanswered_is_interrupted_but_not_the_target() -> None:
    seen = Seen()
    runner = Runner(ParallelAgent("P", [Asker("one"), Asker("two")]), hooks=[seen])
    paused = runner.query_sync("go")
    by_agent = {i.info: i.id for i in paused.interrupts}
    seen.take()
    again = runner.resume_sync(paused.checkpoint_id, {by_agent["one?"]: "ok"})  # type: ignore[arg-type]
    assert [i.info for i in again.interrupts] == ["two?"]  # paused again
    assert dict(seen.take())["two"] == ResumeInfo(
        was_interrupted=True, is_resume_target=False, interrupt_state={"asked": "two"}
    )


def test_an_agent_entering_the_same_place_again_was_not_interrupted_there() -> None:
    seen = Seen()
    runner = Runner(LoopAgent("L", [Asker("asker")], max_iterations=2), hooks=[seen])
    paused = runner.query_sync("go")
    seen.take()
    again = runner.resume_sync(paused.checkpoint_id, value="first")  # type: ignore[arg-type]
    assert again.interrupts  # the second round asks anew
    loop, resumed, second_round = seen.take()
    assert loop == ("L", ResumeInfo(was_interrupted=True, is_resume_target=False))
    assert resumed[1] is not None and resumed[1].data == "first"
    assert second_round == ("asker", NOT)


def test_a_tool_call_that_paused_is_the_target_and_its_agent_is_above_it() -> None:
    infos: list[Any] = []
    seen = Seen()

    @tool
    def approve() -> str:
        """Ask a person to approve."""
        infos.append(run_context().resume_info)
        return str(run_context().interrupt("approve?", state=3))

    model = ScriptedModel([call("approve", {}), reply("approved")])
    runner = Runner(ChatModelAgent("A", model, tools=[approve]), hooks=[seen])
    paused = runner.query_sync("go")
    runner.resume_sync(paused.checkpoint_id, value=True)  # type: ignore[arg-type]
    assert infos == [
        None,
        ResumeInfo(was_interrupted=True, is_resume_target=True, interrupt_state=3, data=True),
    ]
    assert seen.take()[-1] == ("A", ResumeInfo(was_interrupted=True, is_resume_target=False))
