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
from typing import Any, TypeVar, cast

from psycopg import AsyncConnection, AsyncCursor, OperationalError
from psycopg.abc import PQGen
from psycopg.pq import ExecStatus
from psycopg.waiting import Ready, Wait

__all__ = ["StoreConnection"]

_T = TypeVar("_T")


class _Handed:
    """A statement's generator handed to psycopg's own wait part way: its first step gives
    `state` (the state the generator is waiting for), or raises `interrupt` (so that psycopg
    cancels the statement as it does for a caller interrupted in its own wait); after that,
    the generator's own steps."""

    def __init__(
        self, gen: PQGen[Any], state: Wait | None, interrupt: BaseException | None
    ) -> None:
        self.gen, self.state, self.interrupt = gen, state, interrupt

    def __iter__(self) -> _Handed:
        return self

    def __next__(self) -> Wait:
        interrupt, self.interrupt = self.interrupt, None
        if interrupt is not None:
            raise interrupt
        state, self.state = self.state, None
        return state if state is not None else next(self.gen)

    def send(self, ready: Ready | int) -> Wait:
        return self.gen.send(ready)


def _handed(gen: PQGen[_T], state: Wait | None, interrupt: BaseException | None) -> PQGen[_T]:
    """`gen` as `_Handed` gives it, typed as the generator psycopg's wait takes (it uses
    only `next` and `send`)."""
    return cast("PQGen[_T]", _Handed(gen, state, interrupt))


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

    A statement waits for its answer on a reader the event loop keeps for the connection
    from one statement to the next (`wait`): psycopg's own wait adds a reader and a timer
    for each wait and removes them after it. The reader is removed when the connection
    becomes readable while idle (the server closed it, or has something to say), when a
    statement fails, and before the connection is closed.

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
    _reader: tuple[asyncio.AbstractEventLoop, int] | None = None  # where the reader is kept
    _waiter: asyncio.Future[None] | None = None  # what a waiting statement waits on
    _early: bool = False  # a readiness the loop saw before the waiting statement was sent

    @property
    def quiet(self) -> bool:
        """Whether the loop watches the idle connection and has seen nothing to read on it
        since its last statement (as of its last poll): the server has not closed it."""
        return self._reader is not None

    async def wait(
        self,
        gen: PQGen[_T],
        interval: float = 0.1,
        timeout: float | None = None,  # noqa: ASYNC109 (psycopg's)
    ) -> _T:
        """Run a statement's generator to its end, waiting on the connection's reader.

        A wait with a `timeout` (psycopg's own, when it cancels), one for the socket to take
        more bytes, and a statement interrupted while waiting (a cancelled caller) are
        handed to psycopg's wait, which cancels an interrupted statement on the server.
        """
        if timeout is not None:
            self._drop_reader()
            return await super().wait(gen, interval, timeout)
        try:
            state = next(gen)
        except StopIteration as end:
            result: _T = end.value
            return result
        try:
            while not state & Wait.W:
                await self._readable()
                state = gen.send(Ready.R)
        except StopIteration as end:
            if self._reader is not None:
                self._hold_off(self._reader[0])
            result = end.value
            return result
        except OSError as exc:  # as psycopg's wait reports it
            self._drop_reader()
            raise OperationalError("connection socket closed") from exc
        except BaseException as exc:
            self._drop_reader()
            if isinstance(exc, Exception):
                raise
            return await super().wait(_handed(gen, None, exc), interval)
        self._drop_reader()  # the socket's send buffer is full: psycopg waits on both
        return await super().wait(_handed(gen, state, None), interval)

    async def _readable(self) -> None:
        """Wait until the loop sees the connection readable."""
        loop = asyncio.get_running_loop()
        if self._reader is None:
            fd = self.pgconn.socket
            loop.add_reader(fd, self._on_readable)
            self._reader = (loop, fd)
        waiter = self._waiter = loop.create_future()
        self._hold_off(loop)
        try:
            await waiter
        finally:
            self._waiter = None

    def _hold_off(self, loop: asyncio.AbstractEventLoop) -> None:
        """Have the reader ignore what the loop saw before now: the last answer's readiness,
        read since (an answer's readiness is seen by one more poll before the statement
        reads it), which would wake the next wait too early, or make an idle connection
        look closed. It is already queued, so it runs before `_settled`."""
        self._early = True
        loop.call_soon(self._settled)

    def _settled(self) -> None:
        self._early = False

    def _on_readable(self) -> None:
        """The loop saw the connection readable: wake the waiting statement, or, with none
        waiting, stop watching (the next statement's wait starts again)."""
        if self._early:
            return
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)
        else:
            self._drop_reader()

    def _drop_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            loop, fd = reader
            loop.remove_reader(fd)

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
        self._drop_reader()
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
