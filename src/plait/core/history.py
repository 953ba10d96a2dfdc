"""A run's history: messages with their authors, and how one agent sees another's.

Messages written by other agents reach an agent as user messages "For context: [Agent]
said: …"; its own messages (and the caller's) stay verbatim.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from plait.events import MessageVariant
from plait.messages import Message

__all__ = [
    "HistoryRecord",
    "as_records",
    "history_for",
    "rewrite_message",
    "whole",
    "whole_messages",
]

# One recorded message of the run's history: (author agent name, message variant).
HistoryRecord = tuple[str, MessageVariant]

USER = "user"  # the author of the caller's messages


def rewrite_message(author: str, message: Message) -> Message:
    """Render another agent's message as a user message "For context: [author] …"; its
    `name` is the author (adapters do not send it to providers)."""
    parts = ["For context:"]
    if message.role == "tool":
        parts.append(f"[{author}] `{message.name}` tool returned result: {message.content}.")
    else:
        if message.content:
            parts.append(f"[{author}] said: {message.content}.")
        for tc in message.tool_calls:
            parts.append(f"[{author}] called tool: `{tc.name}` with arguments: {tc.arguments}.")
    return Message(role="user", content=" ".join(parts), name=author)


def whole(variant: MessageVariant) -> Message:
    """Return the whole message of a recorded variant (a stream is complete by now)."""
    if variant.message is not None:
        return variant.message
    assert variant.stream is not None
    return variant.stream.merged()


def whole_messages(records: Iterable[HistoryRecord]) -> list[tuple[str, Message]]:
    """Return the records as (author, whole message) pairs."""
    return [(author, whole(variant)) for author, variant in records if not dropped(variant)]


def dropped(variant: MessageVariant) -> bool:
    """Whether `variant` is a model reply cut short by a stop: it is asked for again on the
    resume, so no history, session or checkpoint keeps it."""
    stream = variant.stream
    return stream is not None and stream.stopped


def as_records(pairs: Iterable[tuple[str, Message]]) -> list[HistoryRecord]:
    """Return (author, message) pairs as history records."""
    records: list[HistoryRecord] = []
    for author, message in pairs:
        role: Literal["assistant", "tool"] = "tool" if message.role == "tool" else "assistant"
        records.append((author, MessageVariant(is_streaming=False, role=role, message=message)))
    return records


def history_for(
    agent_name: str,
    root_input: Sequence[Message],
    history: Iterable[HistoryRecord],
    root_authors: Sequence[str] | None = None,
) -> list[Message]:
    """Return the input for `agent_name`: the root input, then the recorded history, with
    other agents' messages rewritten "For context" (`root_authors` names the author of each
    root input message, as in a session; None: all are the caller's)."""
    if root_authors is None:
        messages = list(root_input)
    else:
        messages = [
            m if a in (USER, agent_name) else rewrite_message(a, m)
            for a, m in zip(root_authors, root_input, strict=True)
        ]
    for author, variant in history:
        if dropped(variant):
            continue
        message = whole(variant)
        messages.append(message if author == agent_name else rewrite_message(author, message))
    return messages
