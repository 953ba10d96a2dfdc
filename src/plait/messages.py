"""Messages exchanged with models: `Message`, `ToolCall`, `Usage`, and what a model is told
of a tool (`ToolInfo`, with its `Effect`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from typing import Any, Literal

from plait._util.json import JSONMixin
from plait._util.record import record

__all__ = ["EFFECTS", "Effect", "Message", "Role", "ToolCall", "ToolInfo", "Usage", "merge_chunks"]

Role = Literal["system", "user", "assistant", "tool"]


@record
class Usage(JSONMixin):
    """Tokens spent by one or more model calls."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Return input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


@record
class ToolCall(JSONMixin):
    """A tool call requested by the model.

    `arguments` is the JSON text exactly as the model sent it. `index` is used only on
    streaming chunks: chunks with the same index belong to the same call.
    """

    id: str
    name: str
    arguments: str = ""
    index: int | None = None


@record
class Message(JSONMixin):
    """One chat message: system, user, assistant (possibly with tool calls) or tool result."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    usage: Usage | None = None

    @classmethod
    def system(cls, text: str) -> Message:
        """Build a system message."""
        return _make_message("system", text, (), None, None, None)

    @classmethod
    def user(cls, text: str) -> Message:
        """Build a user message."""
        return _make_message("user", text, (), None, None, None)

    @classmethod
    def assistant(
        cls, text: str = "", tool_calls: Sequence[ToolCall] = (), *, usage: Usage | None = None
    ) -> Message:
        """Build an assistant message, optionally with tool calls."""
        if type(tool_calls) is not tuple:
            tool_calls = tuple(tool_calls)
        return _make_message("assistant", text, tool_calls, None, None, usage)

    @classmethod
    def tool(cls, content: str, tool_call_id: str | None, *, name: str | None = None) -> Message:
        """Build the result message of a tool call."""
        return _make_message("tool", content, (), tool_call_id, name, None)


# Positional constructor (role, content, tool_calls, tool_call_id, name, usage) for hot paths.
_make_message: Callable[..., Message] = Message._make  # type: ignore[attr-defined]


def merge_chunks(chunks: Iterable[Message]) -> Message:
    """Concatenate streamed chunks into one message.

    Text is joined; tool-call chunks merge by `index` (or, without one, a chunk whose `id`
    differs from the previous call's starts a new call); usage is summed.
    """
    role: Role = "assistant"
    texts: list[str] = []
    calls: list[list[str]] = []  # [id, name, arguments]
    by_index: dict[int, list[str]] = {}
    usage: Usage | None = None
    name: str | None = None
    tool_call_id: str | None = None
    for i, chunk in enumerate(chunks):
        if i == 0:
            role = chunk.role
        if chunk.content:
            texts.append(chunk.content)
        if chunk.usage is not None:
            usage = chunk.usage if usage is None else usage + chunk.usage
        name = chunk.name or name
        tool_call_id = chunk.tool_call_id or tool_call_id
        for tc in chunk.tool_calls:
            _merge_call(calls, by_index, tc)
    return Message(
        role=role,
        content="".join(texts),
        tool_calls=tuple(ToolCall(id=c[0], name=c[1], arguments=c[2]) for c in calls),
        tool_call_id=tool_call_id,
        name=name,
        usage=usage,
    )


def _merge_call(calls: list[list[str]], by_index: dict[int, list[str]], tc: ToolCall) -> None:
    if tc.index is not None:
        current = by_index.get(tc.index)
        if current is None:
            current = by_index[tc.index] = ["", "", ""]
            calls.append(current)
    elif calls and (not tc.id or tc.id == calls[-1][0]):
        current = calls[-1]
    else:
        current = ["", "", ""]
        calls.append(current)
    if tc.id and not current[0]:
        current[0] = tc.id
    if tc.name and not current[1]:
        current[1] = tc.name
    current[2] += tc.arguments


#: What running a tool does to the world (see docs/approvals.md): `"read"` nothing,
#: `"idempotent"` (the default) something that may safely happen again, `"once"` something
#: that must happen at most once: its calls are journaled in the run's store.
Effect = Literal["read", "idempotent", "once"]
EFFECTS: tuple[Effect, ...] = ("read", "idempotent", "once")


@record
class ToolInfo(JSONMixin):
    """What the model is told about a tool: name, description and JSON schema of parameters
    (and `hints`, structured facts a local model may use, which providers are not sent)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    # What a model may use besides the schema, never sent to a provider: the transfer tool
    # puts {"agents": {name: description}} here for models that choose agents themselves.
    hints: dict[str, Any] = field(default_factory=dict)
    # What calling the tool does (never sent to a provider): "read", "idempotent" or "once".
    effect: Effect = "idempotent"
