"""A custom agent runs again from its start on a resume; what it says again, as it said it
before the pause, is neither streamed again nor kept twice in the session, whether or not
the agent keeps values with `save_state`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plait import AgentContext, AgentEvent, AgentInput, Message, Runner, SequentialAgent, interrupt
from plait.stores import MemoryStore, SqliteStore
from plait.stores.base import Store


class Starter:
    """Counts its runs with `save_state`, says it is starting, then asks a question."""

    def __init__(self, name: str, *, keeps: bool = True, says_again: str | None = None) -> None:
        self.name, self.description = name, "Starts, then asks."
        self.keeps = keeps
        self.says_again = says_again  # what it says on a resume instead, if anything

    async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        if self.keeps:
            runs = ctx.load_state("runs") or 0
            ctx.save_state("runs", runs + 1)
        text = f"{self.name}: starting"
        if ctx.resume_info is not None and self.says_again is not None:
            text = self.says_again
        yield ctx.event(message=Message.assistant(text))
        answer = interrupt({"question": f"{self.name} goes on?"})
        yield ctx.event(message=Message.assistant(f"{self.name}: {answer}"))


def _stores(tmp_path: Path) -> dict[str, Store]:
    return {"memory": MemoryStore(), "sqlite": SqliteStore(tmp_path / "plait.db")}


def _said(events: list[AgentEvent]) -> list[str]:
    return [
        e.message.message.content
        for e in events
        if e.message is not None and e.message.message is not None
    ]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@pytest.mark.parametrize("keeps", [True, False])
async def test_a_resumed_custom_agent_says_nothing_twice(
    tmp_path: Path, backend: str, keeps: bool
) -> None:
    store = _stores(tmp_path)[backend]
    flow = SequentialAgent("flow", [Starter("a", keeps=keeps), Starter("b", keeps=keeps)])
    runner = Runner(flow, store=store)
    first = await runner.query("go", session_id="s").collect()
    assert _said(first.events) == ["a: starting"]
    second = await runner.resume(first.checkpoint_id, value="yes").collect()
    assert _said(second.events) == ["a: yes", "b: starting"]
    third = await runner.resume(second.checkpoint_id, value="ok").collect()
    assert third.error is None
    assert _said(third.events) == ["b: ok"]
    session = await runner.sessions.get("s")
    assert session is not None
    said = [m.content for m in session.messages if m.role == "assistant"]
    assert said == ["a: starting", "a: yes", "b: starting", "b: ok"]


async def test_what_a_resumed_agent_says_differently_is_passed_on() -> None:
    agent = Starter("a", says_again="a: starting over")
    runner = Runner(agent, store=MemoryStore())
    first = await runner.query("go", session_id="s").collect()
    resumed = await runner.resume(first.checkpoint_id, value="yes").collect()
    assert _said(resumed.events) == ["a: starting over", "a: yes"]
