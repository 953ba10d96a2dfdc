"""A model's output as a ChatModelAgent takes it: a stream checked chunk by chunk, and the
model as its `wrap_model` hooks call on to it."""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any

from plait.events import AgentOutput, MessageStream, MessageVariant
from plait.messages import Message, ToolInfo
from plait.models.base import ChatModel, model_error, wrong_output
from plait.models.call_ids import CallIds, unique_ids

__all__ = ["CheckedChunks", "CheckedModel", "streaming_output"]


class CheckedChunks:
    """A model's stream that fails at a chunk that is not a Message, with the error
    `bad_chunk(chunk)` returns (a `ModelError` naming what the model gave), each chunk passed
    through `fix` (the agent gives tool calls ids unique in the reply there)."""

    __slots__ = ("_bad_chunk", "_fix", "_source")

    def __init__(
        self,
        source: AsyncIterator[Any],
        bad_chunk: Callable[[object], Exception],
        fix: Callable[[Message], Message],
    ) -> None:
        self._source = source
        self._bad_chunk = bad_chunk
        self._fix = fix

    def __aiter__(self) -> CheckedChunks:
        return self

    async def __anext__(self) -> Message:
        chunk = await self._source.__anext__()
        if isinstance(chunk, Message):
            return self._fix(chunk)
        await self.aclose()
        raise self._bad_chunk(chunk)

    async def aclose(self) -> None:
        """Close the model's stream."""
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            await aclose()


def streaming_output(stream: MessageStream) -> AgentOutput:
    """Return the output of an event that streams `stream`."""
    return AgentOutput(message=MessageVariant(is_streaming=True, role="assistant", stream=stream))


class CheckedModel:
    """An agent's model as its `wrap_model` hooks call on to it: a failure is the agent's
    `ModelError`, a reply (or each streamed chunk) that is not a Message is one too, and the
    reply's tool calls get ids unique within it, so the hooks see what the agent will."""

    __slots__ = ("_model", "_name", "_new_id")

    def __init__(self, model: ChatModel, name: str, new_id: Callable[[], str]) -> None:
        self._model = model
        self._name = name
        self._new_id = new_id

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Return the model's reply, checked."""
        try:
            reply = await self._model.generate(messages, tools=tools, **options)
        except Exception as exc:
            error = model_error(self._name, exc)
            raise error from None if error is exc else exc
        if not isinstance(reply, Message):
            raise wrong_output(self._model, self._name, "generate() returned", reply, "a Message")
        return unique_ids(reply, self._new_id)

    def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Return the model's chunks, checked."""
        model, name = self._model, self._name
        try:
            source = model.stream(messages, tools=tools, **options)
        except Exception as exc:
            error = model_error(name, exc)
            raise error from None if error is exc else exc
        if not isinstance(source, AsyncIterator):
            if inspect.iscoroutine(source):  # `async def stream` that returns, not yields
                source.close()
            raise wrong_output(
                model, name, "stream() returned", source, "an async iterator of Messages"
            )
        return self._chunks(source)

    async def _chunks(self, source: AsyncIterator[Any]) -> AsyncGenerator[Message, None]:
        model, name = self._model, self._name
        checked = CheckedChunks(
            source,
            lambda chunk: wrong_output(model, name, "stream() yielded", chunk, "Message chunks"),
            CallIds(self._new_id).chunk,
        )
        try:
            async for chunk in checked:
                yield chunk
        except Exception as exc:
            error = model_error(name, exc)
            raise error from None if error is exc else exc
        finally:
            await checked.aclose()
