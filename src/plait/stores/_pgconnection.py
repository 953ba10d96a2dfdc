"""The psycopg connection of `PostgresStore` and `PostgresMemoryService`, which keeps the time
bound of the statement running on it by cutting itself.

Imported only once psycopg is known to be installed (`plait.stores._pgclient`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import time
from typing import Any

from psycopg import AsyncConnection, AsyncCursor, OperationalError
from psycopg.pq import ExecStatus

__all__ = ["StoreConnection"]


class StoreConnection(AsyncConnection[tuple[Any, ...]]):
    """A connection whose statements each have a time bound, kept by the connection itself.

    `rows(sql, params)` runs a statement on the connection's own cursor, made once (which
    holds the last statement's result until the next one).
    `start(timeout)` before a statement, `end()` after it. A statement still running when its
    time is up has its connection cut: the socket is shut down both ways (its descriptor
    stays open), so the statement's wait ends at once with an `OperationalError`, and
    `timed_out` tells why. The connection is then only good for closing.

    One timer watches the connection while statements run on it, and is set again for a
    later statement only when it fires: a statement pays for no timer of its own.

    A statement whose caller is cancelled has psycopg ask the server to cancel it, and wait
    for the server; that request is given the time left to the statement, and none once it
    is up (psycopg then logs a warning), so a server that does not answer cannot hold a
    cancelled caller past it either. (psycopg 3.3 and later: their cancellation ends by
    raising the caller's `CancelledError` whatever the request's outcome.)
    """

    #: When the running statement's time is up (`time.monotonic()`); infinite between them.
    deadline: float = math.inf
    #: Whether the connection was cut because a statement's time was up.
    timed_out: bool = False
    _watch: asyncio.TimerHandle | None = None
    _cursor: AsyncCursor[tuple[Any, ...]] | None = None

    async def rows(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        """Run one statement; return its rows (none for a statement that returns none)."""
        cursor = self._cursor
        if cursor is None:
            cursor = self._cursor = self.cursor()
        await cursor.execute(sql, params)
        result = cursor.pgresult
        if result is None or result.status != ExecStatus.TUPLES_OK:
            return []
        return await cursor.fetchall()

    def start(self, timeout: float) -> None:
        """A statement starts on the connection, with `timeout` seconds to end."""
        self.deadline = time.monotonic() + timeout
        if self._watch is None:
            self._watch = asyncio.get_running_loop().call_later(timeout, self._check)

    def end(self) -> None:
        """The statement has ended."""
        self.deadline = math.inf

    def _check(self) -> None:
        """The timer fired: cut the connection if the running statement's time is up, else
        watch it until it is; stop watching between statements."""
        self._watch = None
        if self.deadline == math.inf:
            return
        left = self.deadline - time.monotonic()
        if left > 0:
            self._watch = asyncio.get_running_loop().call_later(left, self._check)
            return
        self.timed_out = True
        if not self.closed:
            with contextlib.suppress(OSError), socket.socket(fileno=os.dup(self.fileno())) as sock:
                sock.shutdown(socket.SHUT_RDWR)

    async def close(self) -> None:
        """Stop watching the connection, and close it."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        await super().close()

    async def cancel_safe(self, *, timeout: float = 30.0) -> None:  # noqa: ASYNC109 (psycopg's)
        """Ask the server to cancel the running statement, within the time it has left."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise OperationalError("the statement's time is up: it is not cancelled")
        await super().cancel_safe(timeout=min(timeout, left))
