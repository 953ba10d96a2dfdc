"""A TCP proxy that puts network faults between a store and its server.

`FaultProxy(host, port)` listens on a free port of 127.0.0.1 and forwards every connection to
the server. Its mode can be switched at any time, also while connections are open:

- "pass": forward both ways.
- "delay": forward both ways, every chunk `delay` seconds late.
- "drop": reset every open connection, and every new one as soon as it is accepted.
- "blackhole": accept connections but never answer: nothing is forwarded either way.
- "lose_replies": forward what the client sends to the server, never the server's answers.

Back in "pass" or "delay", the connections that lost bytes in "blackhole" or "lose_replies" are
reset (their byte stream is broken, as after a long partition); connections that lost nothing
go on. Only loopback addresses are used.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from types import TracebackType
from typing import Literal, Self

__all__ = ["FaultProxy", "Mode"]

Mode = Literal["pass", "delay", "drop", "blackhole", "lose_replies"]


def _reset(writer: asyncio.StreamWriter | None) -> None:
    """Close a connection with a TCP reset (no orderly goodbye)."""
    if writer is None or writer.transport.is_closing():
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class _Link:
    """One client connection and its connection to the server (None while blackholed)."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.server: asyncio.StreamWriter | None = None
        self.lost_bytes = False

    def reset(self) -> None:
        _reset(self.client)
        _reset(self.server)


class FaultProxy:
    """A TCP proxy to `host:port` whose `mode` injects faults; `async with` runs it."""

    def __init__(self, host: str, port: int, *, delay: float = 0.05) -> None:
        self.target = (host, port)
        self.delay = delay
        self.host = "127.0.0.1"
        self.port = 0
        self.accepted = 0
        self._mode: Mode = "pass"
        self._links: set[_Link] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        #: Set when bytes are dropped ("blackhole", "lose_replies"); cleared by `set_mode`.
        self.swallowed = asyncio.Event()

    @property
    def address(self) -> str:
        """Return `host:port` of the proxy."""
        return f"{self.host}:{self.port}"

    @property
    def mode(self) -> Mode:
        """Return the current mode."""
        return self._mode

    def set_mode(self, mode: Mode) -> None:
        """Switch to `mode`; see the module's docstring."""
        self._mode = mode
        self.swallowed.clear()
        if mode == "drop":
            for link in list(self._links):
                link.reset()
        elif mode in ("pass", "delay"):
            for link in list(self._links):
                if link.lost_bytes:
                    link.reset()

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.reset()  # every handler then ends by itself
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=5)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        link = _Link(writer)
        self._links.add(link)
        self.accepted += 1
        try:
            await self._serve(link, reader)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            link.reset()
            self._links.discard(link)
            self._handlers.discard(task)

    async def _serve(self, link: _Link, reader: asyncio.StreamReader) -> None:
        if self._mode == "drop":
            return
        if self._mode == "blackhole":  # never connected to the server: swallow everything
            link.lost_bytes = True
            while await reader.read(65536):
                self.swallowed.set()
            return
        server_reader, link.server = await asyncio.open_connection(*self.target)
        pumps = [
            asyncio.ensure_future(self._pump(link, reader, link.server, replies=False)),
            asyncio.ensure_future(self._pump(link, server_reader, link.client, replies=True)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.wait(pumps)

    async def _pump(
        self,
        link: _Link,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        replies: bool,
    ) -> None:
        """Copy one direction of a connection, as the mode says, until it ends."""
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                mode = self._mode
                if mode == "blackhole" or (mode == "lose_replies" and replies):
                    link.lost_bytes = True
                    self.swallowed.set()
                    continue
                if mode == "delay":
                    await asyncio.sleep(self.delay)
                writer.write(data)
                await writer.drain()
