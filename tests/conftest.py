"""Shared helpers for plait's tests."""

from __future__ import annotations

from collections.abc import Sequence

from plait import AgentEvent, Message


async def messages_of(events: Sequence[AgentEvent]) -> list[Message]:
    """Return the whole message of every message event, in order."""
    out = []
    for event in events:
        if event.message is not None:
            out.append(await event.message.get_message())
    return out


def kinds(events: Sequence[AgentEvent]) -> list[str]:
    """Summarise events as 'assistant', 'tool:<name>' or 'error:<Type>'."""
    out = []
    for event in events:
        if event.error is not None:
            out.append(f"error:{type(event.error).__name__}")
        elif event.message is not None:
            variant = event.message
            out.append("assistant" if variant.role == "assistant" else f"tool:{variant.tool_name}")
        else:
            out.append("other")
    return out
