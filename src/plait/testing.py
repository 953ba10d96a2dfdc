"""Test models that ship with plait: `ScriptedModel`, `FunctionModel` and script helpers.

```python
model = ScriptedModel([call("add", {"a": 1, "b": 2}), reply("3")])
```
"""

from __future__ import annotations

import inspect
import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import field
from typing import Any

from plait._util.record import record
from plait.errors import ModelError
from plait.messages import Message, ToolCall, Usage
from plait.tools.base import ToolInfo

__all__ = ["FunctionModel", "ModelRequest", "ScriptedModel", "call", "calls", "reply"]

Reply = Message | str
ReplyFn = Callable[[list[Message], list[ToolInfo]], Reply | Awaitable[Reply]]
ScriptEntry = Message | str | Callable[[list[Message], list[ToolInfo]], Reply]


def reply(text: str, usage: Usage | None = None) -> Message:
    """Return an assistant message with `text` (a final answer)."""
    return Message.assistant(text, usage=usage)


def call(
    name: str,
    args: dict[str, Any] | str | None = None,
    *,
    id: str | None = None,
    text: str = "",
    usage: Usage | None = None,
) -> Message:
    """Return an assistant message calling tool `name`; a `str` `args` is sent verbatim."""
    arguments = args if isinstance(args, str) else json.dumps(args or {})
    tool_call = ToolCall(id=id or f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=arguments)
    return Message.assistant(text, (tool_call,), usage=usage)


def calls(*messages: Message, text: str = "", usage: Usage | None = None) -> Message:
    """Merge several `call(...)` messages into one assistant message with several tool calls."""
    tool_calls = tuple(tc for m in messages for tc in m.tool_calls)
    return Message.assistant(text, tool_calls, usage=usage)


@record
class ModelRequest:
    """A snapshot of one request made to a test model."""

    messages: tuple[Message, ...]
    tools: tuple[ToolInfo, ...]
    options: dict[str, Any] = field(default_factory=dict)


class FunctionModel:
    """A model whose replies are built by `fn(messages, tools) -> Message | str` (sync or async).

    In streaming mode the reply is split into several chunks: the text word by word, then
    each tool call in two chunks (merged by index). `requests` records every request.
    With `supports_output_schema=True` it declares structured-output support, so a
    structured-output agent passes it the `output_schema` option (recorded with the
    request's options) instead of offering a `final_result` tool.
    """

    def __init__(
        self, fn: ReplyFn, *, chunk_words: int = 1, supports_output_schema: bool = False
    ) -> None:
        self._fn = fn
        self._chunk_words = max(1, chunk_words)
        self.supports_output_schema = supports_output_schema
        self.requests: list[ModelRequest] = []

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Record the request and return the function's reply."""
        self.requests.append(
            ModelRequest(messages=tuple(messages), tools=tuple(tools), options=dict(options))
        )
        result = self._fn(list(messages), list(tools))
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, str):
            return Message.assistant(result)
        if not isinstance(result, Message):
            raise ModelError(f"the test model's function returned {type(result).__name__}")
        return result

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Yield the reply in several chunks."""
        message = await self.generate(messages, tools=tools, **options)
        for chunk in _split(message, self._chunk_words):
            yield chunk


class ScriptedModel(FunctionModel):
    """A model that replays a script of replies in order.

    Entries are a `Message`, a `str` (a final text) or a callable
    `(messages, tools) -> Message | str`, which may raise (the run gets a `ModelError`).
    Running past the end of the script raises a `ModelError`.

    With `per_run=True` the script is replayed from its start for every new request from
    the user instead of once in all: the entry used is the number of assistant messages
    after the conversation's last user message. One model then answers any number of runs,
    concurrent ones included (each reads its own messages), and a resumed run picks up where
    it paused, in any process. A callable entry builds a tool call afresh for each run (and
    so a fresh call id) and can answer from the request it reads.

    ```python
    model = ScriptedModel([call("add", {"a": 1, "b": 2}), reply("3")], per_run=True)
    ```
    """

    def __init__(
        self,
        script: Sequence[ScriptEntry],
        *,
        chunk_words: int = 1,
        supports_output_schema: bool = False,
        per_run: bool = False,
    ) -> None:
        super().__init__(
            self._next, chunk_words=chunk_words, supports_output_schema=supports_output_schema
        )
        self.script = list(script)
        self.per_run = per_run
        self._position = 0

    @property
    def remaining(self) -> int:
        """Return how many script entries have not been used yet (with `per_run`: by the
        latest request)."""
        return len(self.script) - self._position

    def _next(self, messages: list[Message], tools: list[ToolInfo]) -> Reply:
        position = _turn_position(messages) if self.per_run else self._position
        if position >= len(self.script):
            used = "all were used in this run" if self.per_run else "all were used"
            hint = (
                ""
                if self.per_run
                else " (to answer every run from the start of the script, as a served agent "
                "must, make it with ScriptedModel(..., per_run=True))"
            )
            raise ModelError(
                f"ScriptedModel: the script has {len(self.script)} replies and {used}; "
                f"request {position + 1} has no reply{hint}"
            )
        entry = self.script[position]
        self._position = position + 1
        if callable(entry):
            return entry(messages, tools)
        return entry


def _turn_position(messages: Sequence[Message]) -> int:
    """Return how many assistant messages follow the last user message."""
    count = 0
    for message in reversed(messages):
        if message.role == "user":
            break
        count += message.role == "assistant"
    return count


_WORD = re.compile(r"\S+\s*|\s+")


def _split(message: Message, words_per_chunk: int) -> list[Message]:
    words = _WORD.findall(message.content)
    chunks = [
        Message(role=message.role, content="".join(words[i : i + words_per_chunk]))
        for i in range(0, len(words), words_per_chunk)
    ]
    for index, tc in enumerate(message.tool_calls):
        half = len(tc.arguments) // 2
        first = ToolCall(id=tc.id, name=tc.name, arguments=tc.arguments[:half], index=index)
        rest = ToolCall(id="", name="", arguments=tc.arguments[half:], index=index)
        chunks.append(Message(role=message.role, tool_calls=(first,)))
        chunks.append(Message(role=message.role, tool_calls=(rest,)))
    if not chunks:
        chunks.append(Message(role=message.role))
    if message.usage is not None:
        chunks.append(Message(role=message.role, usage=message.usage))
    return chunks
