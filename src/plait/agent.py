"""The one interface every runnable thing implements: `Agent`, and its input."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from plait._json import JSONMixin
from plait._record import record
from plait.context import RunContext
from plait.errors import UsageError
from plait.events import AgentEvent
from plait.messages import Message

__all__ = ["Agent", "AgentInput"]


@record
class AgentInput(JSONMixin):
    """The messages an agent runs on, and whether model output should stream."""

    messages: Sequence[Message]
    enable_streaming: bool = False


@runtime_checkable
class Agent(Protocol):
    """Anything that runs: yields `AgentEvent`s for an input inside a run context.

    `run` is an async generator. Build events with `ctx.event(...)` so they carry the
    agent's name, run path and depth; an event with `error` set ends the stream.
    """

    name: str
    description: str

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Run on `input` and yield the events of this agent (and of those it calls)."""
        ...


def require_agent(value: object, what: str) -> Agent:
    """Return `value` if it is an `Agent`; else raise a one-line `UsageError` naming `what`.

    `what` says where the value was given, e.g. "SequentialAgent 's': sub_agents[0]".
    """
    if isinstance(value, Agent):
        return value
    shown = " ".join(repr(value).split())
    if len(shown) > 100:
        shown = shown[:97] + "..."
    raise UsageError(f"{what} is {shown}, not an Agent (needs name, description and run)")
