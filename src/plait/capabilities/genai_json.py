"""Messages and values as the OpenTelemetry GenAI conventions write them in span attributes
(`plait.tracing`'s captured contents): JSON strings."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from plait.messages import Message

__all__ = ["dumps", "genai_message", "messages_json"]


def _arguments(text: str) -> Any:
    """Return a tool call's arguments parsed, or the text when it is not JSON."""
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text


def genai_message(message: Message) -> dict[str, Any]:
    """Return a message as the GenAI conventions write it: a role and its parts."""
    parts: list[dict[str, Any]] = []
    if message.role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.content}
        )
    else:
        if message.content:
            parts.append({"type": "text", "content": message.content})
        for call in message.tool_calls:
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.id,
                    "name": call.name,
                    "arguments": _arguments(call.arguments),
                }
            )
    out: dict[str, Any] = {"role": message.role, "parts": parts}
    if message.name:
        out["name"] = message.name
    return out


def messages_json(messages: Sequence[Message]) -> str:
    """Return `messages` as a JSON string of GenAI messages."""
    return dumps([genai_message(m) for m in messages])


def dumps(value: Any) -> str:
    """Return `value` as a JSON string (what JSON cannot hold, as its text)."""
    return json.dumps(value, ensure_ascii=False, default=str)
