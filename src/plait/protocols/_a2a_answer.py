"""The answer of an A2A task as it is produced: one artifact, sent in coalesced chunks.

The a2a-sdk saves the whole task and copies it for every event an agent sends, so an event
per model token makes an answer of N tokens cost N whole tasks on the server and on every
client. `AnswerStream` sends the text of the run's top-level assistant messages as the
task's one `answer` artifact instead, in chunks that hold what came in the last
`MAX_DELAY` seconds or up to `MAX_BYTES` bytes, whichever comes first: a fast model sends
few large chunks, a slow one a chunk per `MAX_DELAY`, and the answer costs O(N) on both
sides.

The artifact holds the text of the latest top-level assistant message, as the run's final
output does: the first chunk of each message replaces what the artifact held (`append`
false), the next ones append to it. When the run completes, the last chunk carries
`last_chunk`; an answer that is not the streamed text (a structured answer, a tool's
result returned directly) replaces it whole.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from a2a.server.tasks import TaskUpdater
from a2a.types import Part

from plait.protocols._a2a_parts import part_of

__all__ = ["ARTIFACT_ID", "MAX_BYTES", "MAX_DELAY", "AnswerStream"]

#: The id (and name) of the artifact that holds a task's answer.
ARTIFACT_ID = "answer"
#: The most text one chunk holds, in UTF-8 bytes (a chunk is sent once it reaches it).
MAX_BYTES = 4096
#: The longest text waits before it is sent, in seconds.
MAX_DELAY = 0.05


class AnswerStream:
    """The `answer` artifact of one task, written as the run's text comes in."""

    def __init__(
        self, updater: TaskUpdater, *, max_bytes: int = MAX_BYTES, max_delay: float = MAX_DELAY
    ) -> None:
        self._updater = updater
        self._max_bytes = max_bytes
        self._max_delay = max_delay
        self._pending: list[str] = []  # text not sent yet
        self._bytes = 0  # its length in UTF-8 bytes
        self._message: list[str] = []  # the text of the current message, sent or not
        self._fresh = True  # the next chunk starts a message: it replaces the artifact
        self._agent = ""
        self._sent = False  # the artifact exists
        self._closed = False  # the task has ended: nothing more is sent
        self._due = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def sending(self) -> AsyncIterator[AnswerStream]:
        """Send what waits `max_delay` seconds while the block runs (a task of its own)."""
        pump = asyncio.ensure_future(self._pump())
        try:
            yield self
        finally:
            self._stop_timer()
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump

    async def _pump(self) -> None:
        while True:
            await self._due.wait()
            self._due.clear()
            await self.flush()

    async def begin(self, agent: str) -> None:
        """Start a new message of `agent`: its text replaces the artifact's."""
        await self.flush()
        self._message = []
        self._fresh = True
        self._agent = agent

    async def add(self, text: str) -> None:
        """Add a piece of the current message; send it once a chunk is full."""
        if not text:
            return
        self._pending.append(text)
        self._message.append(text)
        self._bytes += len(text.encode())
        if self._bytes >= self._max_bytes:
            await self.flush()
        elif self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._max_delay, self._due.set)

    async def flush(self) -> None:
        """Send the text that waits, as one chunk."""
        self._stop_timer()
        async with self._lock:
            if not self._pending:
                return
            text = "".join(self._pending)
            self._pending, self._bytes = [], 0
            await self._send([Part(text=text)], last=False)

    async def finish(self, answer: Any) -> None:
        """End the artifact with the run's final output `answer`: the streamed text's last
        chunk when it is that text, else `answer` whole."""
        self._stop_timer()
        async with self._lock:
            streamed = "".join(self._message)
            if isinstance(answer, str) and answer and answer == streamed:
                text = "".join(self._pending)
                self._pending, self._bytes = [], 0
                await self._send([Part(text=text)], last=True)
            else:
                self._pending, self._bytes, self._fresh = [], 0, True
                await self._send([part_of(answer)], last=True)
            self._closed = True

    def close(self) -> None:
        """Send nothing more (the task was canceled)."""
        self._closed = True
        self._stop_timer()

    async def _send(self, parts: list[Part], *, last: bool) -> None:
        if self._closed:
            return
        fresh = self._fresh or not self._sent
        self._fresh, self._sent = False, True
        await self._updater.add_artifact(
            parts,
            artifact_id=ARTIFACT_ID,
            name=ARTIFACT_ID,
            metadata={"agent": self._agent} if fresh and self._agent else None,
            append=not fresh,
            last_chunk=last,
        )

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._due.clear()
