"""The `ChatModel` protocol every model provider implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, runtime_checkable

from plait.messages import Message
from plait.tools.base import ToolInfo

__all__ = ["ChatModel"]


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: `generate` returns a whole message, `stream` yields its chunks.

    The chunks of `stream` concatenate to the message (text joined, tool-call chunks merged
    by index, usage summed). Any object with these two methods is accepted as a model. One
    whose `generate` returns anything but a `Message`, or whose `stream` is not an async
    iterator of `Message`s, ends the run with a `ModelError` naming the type it gave.
    """

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Return the model's reply to `messages`, offering `tools`."""
        ...

    def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Yield the model's reply to `messages` in chunks."""
        ...
