"""`AgentContext`, the public view of a run: what a custom agent and a tool see, state that
survives a pause (`save_state`/`load_state`), idempotency keys."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from plait import (
    AgentContext,
    AgentEvent,
    AgentInput,
    ChatModelAgent,
    Message,
    RunContext,
    Runner,
    interrupt,
    tool,
)
from plait.errors import SerializationError, UsageError
from plait.stores import SqliteStore
from plait.testing import ScriptedModel, call, reply


class Cart(BaseModel):
    items: list[str]
    total: float


class Saver:
    """Saves a plain value and a model, pauses, then reports what it loads back."""

    name, description = "saver", "Keeps state across a pause."

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        assert isinstance(ctx, AgentContext)
        if ctx.resume_info is None:  # the first run; on the resume the values must be there
            ctx.save_state("count", {"n": 1, "tags": ("a", "b")})
            ctx.save_state("cart", Cart(items=["pen"], total=2.5))
            yield ctx.event(message=Message.assistant("saved"))
        answer = interrupt({"question": "go on?"})
        self.seen = [ctx.load_state("count"), ctx.load_state("cart"), ctx.load_state("none")]
        yield ctx.event(message=Message.assistant(f"resumed with {answer}"))


async def test_saved_state_comes_back_after_a_resume_in_another_runner(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "plait.db")
    paused = await Runner(Saver(), store=store).query("hi").collect()
    assert paused.interrupts and paused.checkpoint_id is not None
    agent = Saver()
    resumed = (
        await Runner(agent, store=SqliteStore(tmp_path / "plait.db"))
        .resume(paused.checkpoint_id, value="yes")
        .collect()
    )
    assert resumed.error is None and resumed.final_output == "resumed with yes"
    count, cart, missing = agent.seen
    assert count == {"n": 1, "tags": ["a", "b"]}  # plain JSON: a tuple comes back a list
    assert isinstance(cart, Cart) and cart == Cart(items=["pen"], total=2.5)
    assert missing is None


def test_a_value_that_is_not_json_is_refused_where_it_is_saved() -> None:
    class Opaque:
        pass

    class Keeper:
        name, description = "keeper", ""

        async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
            ctx.save_state("thing", {"f": Opaque()})
            yield ctx.event(message=Message.assistant("never"))

    result = Runner(Keeper()).query_sync("q")
    assert isinstance(result.error, SerializationError)
    assert result.error.path == "state['thing']['f']"
    assert not result.events[:-1]  # nothing was said before the refusal


def test_a_state_key_must_be_a_non_empty_string() -> None:
    class Keeper:
        name, description = "keeper", ""

        async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
            ctx.save_state("", 1)
            yield ctx.event(message=Message.assistant("never"))

    result = Runner(Keeper()).query_sync("q")
    assert isinstance(result.error, UsageError)


def test_tools_see_the_public_context_under_either_name() -> None:
    seen: list[tuple[Any, ...]] = []

    @tool
    def look(ctx: AgentContext, old: RunContext) -> str:
        """Look at the context."""
        seen.append((ctx is old, ctx.agent_name, ctx.session_id, [m.content for m in ctx.history]))
        return "looked"

    model = ScriptedModel([call("look", {}), reply("done")])
    agent = ChatModelAgent("looker", model, instruction="Look.", tools=[look])
    result = Runner(agent).query_sync("please look", session_id="s-1")
    assert result.final_output == "done"
    assert seen == [(True, "looker", "s-1", ["Look.", "please look", ""])]
    assert look.info().parameters["properties"] == {}


def test_an_idempotency_key_is_stable_for_a_call_across_a_pause(tmp_path: Path) -> None:
    keys: list[str | None] = []

    @tool
    def charge(amount: int, ctx: AgentContext) -> str:
        """Charge once a person approves.

        Args:
            amount: How much.
        """
        keys.append(ctx.idempotency_key)
        return f"charged {amount}: {interrupt({'approve': amount})}"

    model = ScriptedModel([call("charge", {"amount": 5}), call("charge", {"amount": 5}), "ok"])
    agent = ChatModelAgent("cashier", model, tools=[charge])
    paused = Runner(agent, store=SqliteStore(tmp_path / "a.db")).query_sync("pay")
    assert paused.checkpoint_id is not None
    again = Runner(agent, store=SqliteStore(tmp_path / "a.db"))
    second = again.resume_sync(paused.checkpoint_id, value="yes")
    assert second.checkpoint_id is not None  # the second call pauses in its turn
    first_key, replayed_key, other_key = keys
    assert first_key is not None and first_key == replayed_key
    assert other_key is not None and other_key != first_key


def test_outside_a_tool_there_is_no_idempotency_key() -> None:
    class Agentish:
        name, description = "plain", ""

        async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
            yield ctx.event(message=Message.assistant(repr(ctx.idempotency_key)))

    assert Runner(Agentish()).query_sync("q").final_output == "None"


@pytest.mark.parametrize("name", ["RunContext", "AgentContext"])
def test_both_names_are_the_public_protocol(name: str) -> None:
    import plait

    assert getattr(plait, name) is AgentContext


async def test_emit_passes_a_custom_value_up_as_the_agents_event() -> None:
    took: list[bool] = []

    @tool
    async def report(ctx: AgentContext) -> str:
        """Report progress while working."""
        took.append(ctx.emit({"progress": 50}))
        took.append(ctx.emit(ctx.event(message=Message.assistant("half way"))))
        return "done"

    report.emits_events = True  # its caller takes the events it passes up
    model = ScriptedModel([call("report", {}), reply("reported")])
    events = [e async for e in Runner(ChatModelAgent("worker", model, tools=[report])).query("go")]
    custom = [e for e in events if e.output is not None and e.output.custom is not None]
    assert [(e.agent_name, e.run_path, e.output.custom) for e in custom if e.output] == [
        ("worker", ("worker",), {"progress": 50})
    ]
    said = [e.message.message for e in events if e.message is not None and e.message.message]
    assert "half way" in [m.content for m in said]
    assert took == [True, True]


def test_emit_says_when_nobody_takes_the_value() -> None:
    took: list[bool] = []

    @tool
    def quiet(ctx: AgentContext) -> str:
        """Try to report progress."""
        took.append(ctx.emit({"progress": 1}))
        return "done"

    model = ScriptedModel([call("quiet", {}), reply("ok")])
    assert Runner(ChatModelAgent("worker", model, tools=[quiet])).query_sync("go").error is None
    assert took == [False]  # a tool that does not say it emits has no caller for its events
