"""A model's stream as a ChatModelAgent passes it on: checked chunk by chunk."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from plait.events import AgentOutput, MessageStream, MessageVariant
from plait.messages import Message

__all__ = ["CheckedChunks", "streaming_output"]


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
