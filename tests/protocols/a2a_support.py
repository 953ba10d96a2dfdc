"""What the A2A tests share: models that stream on the test's signal, or never finish."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

from plait.messages import Message

WAIT = 10.0


class GatedModel:
    """Streams `first`, then waits for the test to set `go` before it streams `rest`."""

    def __init__(self, first: str, rest: str) -> None:
        self.first, self.rest = first, rest
        self.go = threading.Event()

    async def generate(self, messages: Sequence[Message], **options: Any) -> Message:
        """Answer whole."""
        return Message.assistant(self.first + self.rest)

    async def stream(self, messages: Sequence[Message], **options: Any) -> AsyncIterator[Message]:
        """Stream `first`; once `go` is set, `rest`."""
        yield Message.assistant(self.first)
        await asyncio.to_thread(self.go.wait, WAIT)
        yield Message.assistant(self.rest)


class HangingModel:
    """Streams one word, then never goes on: `started` is set once the word is out,
    `stopped` once the stream was closed (its run was stopped)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.stopped = threading.Event()

    async def generate(self, messages: Sequence[Message], **options: Any) -> Message:
        """Never answer."""
        async for _ in self.stream(messages):
            pass
        raise AssertionError("unreachable")

    async def stream(self, messages: Sequence[Message], **options: Any) -> AsyncIterator[Message]:
        """Stream a word, then wait until cancelled."""
        try:
            yield Message.assistant("thinking ")
            self.started.set()
            await asyncio.Event().wait()
            yield Message.assistant("never")
        finally:
            self.stopped.set()


async def waited(event: threading.Event) -> bool:
    """Wait (at most `WAIT` seconds, off the event loop) for `event`; return whether it came."""
    return await asyncio.to_thread(event.wait, WAIT)
