"""Lines typed by a person, read without blocking the event loop.

`input()` blocks the thread that calls it until Enter, so a Ctrl-C at a prompt would wait
for the line. `LineReader.readline` waits for standard input in the event loop instead
(`loop.add_reader`; a daemon thread where the loop cannot watch the file), so a Ctrl-C
stops a prompt at once. The terminal still edits the line as it is typed. A `sys.stdin`
with no file descriptor (text given in memory, as a test runner does) is read directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import sys
import threading
from typing import TypeVar

__all__ = ["LineReader"]

_T = TypeVar("_T")

_CHUNK = 65536


class LineReader:
    """Reads lines from a file descriptor (by default that of `sys.stdin` when it is read)."""

    def __init__(self, fd: int | None = None) -> None:
        self.fd = fd
        self._buffer = b""

    async def readline(self) -> str | None:
        """Return the next line, without its end; None at the end of input."""
        if self.fd is None:
            try:
                self.fd = sys.stdin.fileno()
            except (AttributeError, ValueError, io.UnsupportedOperation):  # text in memory
                line = sys.stdin.readline()
                return line.removesuffix("\n").removesuffix("\r") if line else None
        while b"\n" not in self._buffer:
            chunk = await self._read()
            if not chunk:  # the end of input (Ctrl-D on a terminal: only of this line)
                line, self._buffer = self._buffer, b""
                return _text(line) if line else None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return _text(line)

    async def _read(self) -> bytes:
        assert self.fd is not None
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        try:
            loop.add_reader(self.fd, _settle, ready, None)
        except (NotImplementedError, OSError, ValueError):  # a file, or a loop without readers
            return await self._read_in_thread(loop)
        try:
            await ready
        finally:
            loop.remove_reader(self.fd)
        try:
            return os.read(self.fd, _CHUNK)
        except BlockingIOError:
            return await self._read()
        except OSError:  # the terminal went away
            return b""

    async def _read_in_thread(self, loop: asyncio.AbstractEventLoop) -> bytes:
        """Read in a daemon thread: one left waiting does not hold the process at its end."""
        done: asyncio.Future[bytes] = loop.create_future()

        def read() -> None:
            assert self.fd is not None
            try:
                data = os.read(self.fd, _CHUNK)
            except OSError:
                data = b""
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(_settle, done, data)

        threading.Thread(target=read, name="plait-stdin", daemon=True).start()
        return await done


def _settle(future: asyncio.Future[_T], value: _T) -> None:
    if not future.done():
        future.set_result(value)


def _text(line: bytes) -> str:
    return line.decode("utf-8", errors="replace").removesuffix("\r")
