"""The one interface every runnable thing implements: `Agent`, and its input."""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from plait._util.json import JSONMixin
from plait._util.record import record
from plait.core.agent_context import AgentContext
from plait.errors import UsageError
from plait.events import AgentEvent
from plait.messages import Message

__all__ = [
    "Agent",
    "AgentInput",
    "HidesParent",
    "LinkAware",
    "RecordsHistory",
    "Transferable",
    "is_agent",
    "require_agent",
    "require_unique_names",
]


@record
class AgentInput(JSONMixin):
    """The messages an agent runs on, and whether model output should stream.

    `source` is the conversation `messages` was rendered from, with the author of each
    message ("user" for the caller's), when plait built the input: a composite agent hands
    its children the same conversation, each seeing its own messages verbatim and the
    others' "For context". Without it, a composite's children start from `messages` as the
    caller's.
    """

    messages: Sequence[Message]
    enable_streaming: bool = False
    source: Sequence[tuple[str, Message]] | None = None


@runtime_checkable
class Agent(Protocol):
    """Anything that runs: yields `AgentEvent`s for an input inside a run context.

    `run` is an async generator. Build events with `ctx.event(...)` so they carry the
    agent's name, run path and depth; an event with `error` set ends the stream.
    """

    name: str
    description: str

    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Run on `input` and yield the events of this agent (and of those it calls)."""
        ...


@runtime_checkable
class Transferable(Protocol):
    """An agent that takes part in transfers: `set_sub_agents` gives a parent its
    `sub_agents` (the agents it may transfer to) and each child its `parent` (the agent it may
    transfer back to); both are set on every agent it touches."""

    sub_agents: Sequence[Agent]
    parent: Agent | None


@runtime_checkable
class LinkAware(Protocol):
    """An agent told when `set_sub_agents` changed its transfer links (a `ChatModelAgent`
    rebuilds the tools it offers its model)."""

    def transfer_links_changed(self) -> None:
        """React to new `sub_agents` or a new `parent`."""
        ...


@runtime_checkable
class HidesParent(Protocol):
    """An agent that may not transfer back to its parent by itself (the parent is not
    offered to its model); a flow may still hand control back to it."""

    disallow_transfer_to_parent: bool


@runtime_checkable
class RecordsHistory(Protocol):
    """An agent that records its own messages in the run's history (it runs a transfer flow
    inside), so the flow around it must not record them again."""

    records_history: bool


#: Classes whose instances were found to be agents, with `run` a method of the class (so an
#: instance of one is an agent once it has its `name` and `description`).
_AGENT_CLASSES: weakref.WeakSet[type] = weakref.WeakSet()


def is_agent(value: object) -> bool:
    """Whether `value` is an `Agent` (as `isinstance(value, Agent)`, without checking the
    protocol's members again for each instance of a class already seen)."""
    kind = type(value)
    if kind in _AGENT_CLASSES:
        return hasattr(value, "name") and hasattr(value, "description")
    if not isinstance(value, Agent):
        return False
    if callable(getattr(kind, "run", None)):
        _AGENT_CLASSES.add(kind)
    return True


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


def require_unique_names(agents: Sequence[Agent], what: str) -> None:
    """Raise a `UsageError` naming each name shared by two of `agents`.

    A composite's children are told apart by name: it addresses their interrupts and resume
    records. `what` says whose children they are, e.g. "ParallelAgent 'p': sub_agents".
    """
    names = [agent.name for agent in agents]
    shared = sorted({name for name in names if names.count(name) > 1})
    if shared:
        listed = ", ".join(repr(name) for name in shared)
        raise UsageError(
            f"{what} has several agents named {listed}; give each its own name (names "
            "address interrupts and resume records)"
        )
