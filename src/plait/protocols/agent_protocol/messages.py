"""The one converter of messages between plait and the Agent Protocol, both ways.

The SDK's shape: `{"type": "human" | "ai" | "tool" | "system", "content", "id",
"tool_calls": [{"name", "args", "id", "type": "tool_call"}], "tool_call_id", "name"}`. On
input `role` ("user", "assistant", "tool", "system", or the SDK's types) is taken instead
of `type`, content may be a list of parts (their text is joined), and tool call arguments
may come as an object (`args`) or as JSON text (`arguments`, OpenAI's way). An `ai`
message's `name` is the agent that wrote it.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import uuid
from collections.abc import Mapping
from itertools import repeat
from typing import Any

import pydantic_core

from plait.messages import Message, Role, ToolCall
from plait.run.sessions import SessionDocument
from plait.server.limits import ApiError

__all__ = [
    "from_sdk",
    "input_messages",
    "message_id",
    "new_id",
    "split_input",
    "state_at_start",
    "to_sdk",
]

_TYPES: dict[str, str] = {"user": "human", "assistant": "ai", "tool": "tool", "system": "system"}
_ROLES: dict[str, Role] = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "tool": "tool",
    "system": "system",
    "developer": "system",
}


#: The hash of the URL namespace, which `message_id` goes on from.
_NAMESPACE = hashlib.sha1(uuid.NAMESPACE_URL.bytes, usedforsecurity=False)
#: The bits of a UUID's version and variant, cleared then set (as `uuid.UUID` does).
_KEPT_BITS = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_VERSION_5 = (0x5000 << 64) | (0x8000 << 48)
_VERSION_4 = (0x4000 << 64) | (0x8000 << 48)
#: A UUID's 16 bytes in the groups its text shows them in.
_GROUPS = struct.Struct(">IHHHHI")
_TEXT = "%08x-%04x-%04x-%04x-%04x%08x"


def _uuid_text(raw: bytes, version: int) -> str:
    """Return the UUID of the 16 bytes `raw` with the `version` bits (and the RFC 4122
    variant) set, as `str(uuid.UUID(bytes=raw, version=...))` writes it."""
    return _TEXT % _GROUPS.unpack((int.from_bytes(raw) & _KEPT_BITS | version).to_bytes(16))


def new_id() -> str:
    """Return a new random id: `str(uuid.uuid4())`, without building a `uuid.UUID`."""
    return _uuid_text(os.urandom(16), _VERSION_4)


def message_id(thread_id: str, position: int) -> str:
    """Return the id of the message at `position` of a thread (the same at every read):
    `uuid.uuid5(uuid.NAMESPACE_URL, f"plait:{thread_id}/{position}")`, without hashing the
    namespace again."""
    digest = _NAMESPACE.copy()
    digest.update(f"plait:{thread_id}/{position}".encode())
    raw = int.from_bytes(digest.digest()[:16]) & _KEPT_BITS | _VERSION_5  # (as `_uuid_text`)
    return _TEXT % _GROUPS.unpack(raw.to_bytes(16))


def to_sdk(message: Message, id: str, author: str | None = None) -> dict[str, Any]:
    """Return `message` in the SDK's shape, with id `id` (`author`: who wrote it)."""
    calls = (
        [
            {"name": c.name, "args": _arguments(c.arguments), "id": c.id, "type": "tool_call"}
            for c in message.tool_calls
        ]
        if message.tool_calls
        else []
    )
    name = message.name if message.role == "tool" else author
    return {
        "type": _TYPES[message.role],
        "content": message.content,
        "id": id,
        "tool_calls": calls,
        "tool_call_id": message.tool_call_id,
        "name": None if name == "user" else name,
    }


def _arguments(text: str) -> Any:
    """Return the tool call arguments `text` as `json.loads` reads them (`pydantic_core`
    reads the same object, faster; `json.loads` reads what it refuses)."""
    if not text:
        return {}
    try:
        return pydantic_core.from_json(text)
    except ValueError:
        pass
    try:
        return json.loads(text)
    except ValueError:
        return {"__arguments__": text}


def from_sdk(data: object) -> Message:
    """Return the plait message of an SDK message object.

    Raises:
        ApiError: `422`, not a message (no known `type` or `role`, content not text).
    """
    if not isinstance(data, Mapping):
        raise ApiError(422, f"a message is an object, not {type(data).__name__}")
    kind = data.get("type", data.get("role"))
    role = _ROLES.get(kind) if isinstance(kind, str) else None
    if role is None:
        raise ApiError(422, f"a message's type is one of {sorted(_TYPES.values())}, not {kind!r}")
    listed = data.get("tool_calls")
    calls = tuple(map(_tool_call, listed)) if listed else ()
    name = data.get("name") if role == "tool" else None
    call_id = data.get("tool_call_id") if role == "tool" else None
    return Message(
        role=role,
        content=_text(data.get("content", "")),
        tool_calls=calls if role == "assistant" else (),
        tool_call_id=call_id if isinstance(call_id, str) else None,
        name=name if isinstance(name, str) else None,
    )


def _text(content: object) -> str:
    if type(content) is str:  # (the usual case, at once)
        return content
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text") for p in content if p]
        if all(isinstance(part, str) for part in parts):
            return "".join(str(part) for part in parts)
    raise ApiError(422, "a message's content is text, or a list of text parts")


def _tool_call(call: object) -> ToolCall:
    if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
        raise ApiError(422, "a tool call is an object with a name")
    arguments = call.get("args", call.get("arguments", {}))
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id=str(call.get("id") or uuid.uuid4().hex), name=call["name"], arguments=text)


def input_messages(value: object) -> list[Message]:
    """Return the messages of a run's `input`: `{"messages": [...]}`, a list of messages,
    or one text.

    Raises:
        ApiError: `422`, an input that holds no messages.
    """
    if isinstance(value, Mapping):
        value = value.get("messages", [])
    if isinstance(value, str):
        return [Message.user(value)]
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list):
        raise ApiError(422, 'input is {"messages": [...]}')
    return [Message.user(m) if isinstance(m, str) else from_sdk(m) for m in value]


def split_input(value: object) -> tuple[list[Message], dict[str, Any]]:
    """Return the messages of a run's `input` and its other keys (session values).

    Raises:
        ApiError: `422`, an input that holds no messages.
    """
    extra = (
        {str(k): v for k, v in value.items() if k != "messages"}
        if isinstance(value, Mapping)
        else {}
    )
    return input_messages(value), extra


def state_at_start(
    thread_id: str, session: SessionDocument, given: list[Message], extra: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Return the thread's messages (in the SDK's shape) and values as a run starts."""
    kept = [*session.messages, *zip(repeat("user"), given)]
    messages = [to_sdk(m, message_id(thread_id, i), a) for i, (a, m) in enumerate(kept)]
    return messages, {**session.values, **extra}
