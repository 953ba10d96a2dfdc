"""The events a run context builds: its agent's (`AgentEvents`, a base of `Frame`), and
the event of a whole message in one call (`message_event`: every model reply and tool result).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from plait._util.record import dict_setter
from plait.errors import PlaitError
from plait.events import (
    AgentAction,
    AgentEvent,
    AgentOutput,
    InterruptCtx,
    InterruptInfo,
    MessageVariant,
)
from plait.messages import Message

__all__ = ["AgentEvents", "message_event"]

# Positional constructors of the event types, for the hot path (see plait._util.record).
_make_variant: Callable[..., MessageVariant] = MessageVariant._make  # type: ignore[attr-defined]
_make_output: Callable[..., AgentOutput] = AgentOutput._make  # type: ignore[attr-defined]
_make_event: Callable[..., AgentEvent] = AgentEvent._make  # type: ignore[attr-defined]
_new = object.__new__
_set_variant = dict_setter(MessageVariant)
_set_output = dict_setter(AgentOutput)
_set_event = dict_setter(AgentEvent)


class AgentEvents:
    """Build the events of the agent at a context's place."""

    __slots__ = ()

    agent_name: str
    run_path: tuple[str, ...]
    depth: int

    def pause_event(self, contexts: Sequence[InterruptCtx]) -> AgentEvent:
        """Build this agent's event announcing that it paused on `contexts`."""
        info = InterruptInfo(contexts=tuple(contexts))
        return self.event(action=AgentAction(interrupted=info))

    def event(
        self,
        *,
        message: Message | None = None,
        output: AgentOutput | None = None,
        action: AgentAction | None = None,
        error: PlaitError | None = None,
    ) -> AgentEvent:
        """Build an event of this agent; `message` is shorthand for a whole-message output."""
        if message is not None and error is None:
            role = "tool" if message.role == "tool" else "assistant"
            return message_event(self.agent_name, self.run_path, self.depth, role, message, action)
        if message is not None:
            role = "tool" if message.role == "tool" else "assistant"
            variant = _make_variant(False, role, message.name, message, None)
            output = _make_output(variant, None)
        return _make_event(self.agent_name, self.run_path, self.depth, output, action, error, None)


def message_event(
    agent_name: str,
    run_path: tuple[str, ...],
    depth: int,
    role: str,
    message: Message,
    action: AgentAction | None,
) -> AgentEvent:
    """Build the event of a whole message, its output and message variant, in one call (the
    event of every model reply and tool result): equal to `AgentEvent(agent_name=...,
    output=AgentOutput(message=MessageVariant(is_streaming=False, role=role,
    tool_name=message.name, message=message)), action=action)`. Records keep every field
    in their `__dict__` (`plait._util.record`)."""
    variant = _new(MessageVariant)
    _set_variant(
        variant,
        {
            "is_streaming": False,
            "role": role,
            "tool_name": message.name,
            "message": message,
            "stream": None,
        },
    )
    output = _new(AgentOutput)
    _set_output(output, {"message": variant, "custom": None})
    event = _new(AgentEvent)
    _set_event(
        event,
        {
            "agent_name": agent_name,
            "run_path": run_path,
            "depth": depth,
            "output": output,
            "action": action,
            "error": None,
            "handoff": None,
        },
    )
    return event
