"""The connection pool of `PostgresStore` and `PostgresMemoryService`: connections of one
event loop, with no task of its own; and the helpers both use around it.

Every connection is opened, checked and closed by the operation that needs it, in that
operation's task and so within its time bound; nothing runs in the background, so nothing
can keep an event loop from ending or wait on a server that does not answer. (A pool with
worker tasks does both: a worker cancelled while it connects keeps waiting for work, and the
end of `asyncio.run` then waits for it forever.)
"""

from __future__ import annotations

import asyncio
import contextlib
import select
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from plait.stores._pgconnection import StoreConnection

__all__ = ["ConnectionPool", "close_when_done", "dsn_address", "forget_task"]

_Connection: TypeAlias = "StoreConnection"


def _readable(fd: int) -> bool:
    """Return whether an idle connection's socket has something to read: the server closed
    it, or (rarely) sent a notice. True when that cannot be told cheaply."""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True


async def _alive(connection: _Connection, broken: type[Exception]) -> bool:
    """Return whether an idle connection still works; only a suspect one is asked."""
    try:
        if connection.closed:
            return False
        if _readable(connection.fileno()):
            await connection.execute("SELECT 1")
    except broken:
        return False
    return True


class ConnectionPool:
    """At most `max_size` connections lent at once (more callers wait their turn, first come
    first served); idle ones are kept, and lent again once checked.

    Args:
        connect: Opens a new connection.
        max_size: Connections lent at most at once.
        broken: The exception a connection the server has closed raises.
    """

    def __init__(
        self,
        connect: Callable[[], Awaitable[_Connection]],
        max_size: int,
        broken: type[Exception],
    ) -> None:
        self._connect = connect
        self._slots = asyncio.Semaphore(max_size)
        self._broken = broken
        self._idle: list[_Connection] = []
        self.closed = False

    def keep(self, connection: _Connection) -> None:
        """Keep an open connection for later use."""
        self._idle.append(connection)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[_Connection]:
        """Lend a connection, idle or new; give it back when the block ends.

        A connection whose block raised (an error, a cancellation) is closed, not kept: what
        state it was left in is not known.
        """
        connection = await self.lend()
        try:
            yield connection
        except BaseException:
            await self.drop(connection)
            raise
        await self.give_back(connection)

    async def lend(self) -> _Connection:
        """Lend a connection, idle or new: one of the `max_size` places is held until it
        is given back (`give_back`) or dropped (`drop`)."""
        await self._slots.acquire()
        try:
            return await self._take()
        except BaseException:
            self._slots.release()
            raise

    async def lend_idle(self) -> _Connection | None:
        """Lend the most recently used idle connection at once, if one of the places is
        free and the connection shows no sign of trouble (`lend` checks one that does);
        else None. A connection the loop watches (`quiet`) needs no look of its own."""
        idle = self._idle
        if not idle or self._slots.locked():
            return None
        connection = idle[-1]
        if connection.closed or (not connection.quiet and _readable(connection.fileno())):
            return None
        idle.pop()
        await self._slots.acquire()  # a free place: taken at once
        return connection

    async def give_back(self, connection: _Connection) -> None:
        """Take back a lent connection that is in a known state: kept for later use (closed
        if it, or the pool, is)."""
        try:
            if self.closed or connection.closed:
                await connection.close()
            else:
                self._idle.append(connection)
        finally:
            self._slots.release()

    async def drop(self, connection: _Connection) -> None:
        """Take back a lent connection whose use failed or was cancelled: it is closed."""
        try:
            await connection.close()
        finally:
            self._slots.release()

    async def _take(self) -> _Connection:
        """Return the most recently used idle connection that works, or a new one."""
        while self._idle:
            connection = self._idle.pop()
            try:
                alive = await _alive(connection, self._broken)
            except BaseException:
                await connection.close()
                raise
            if alive:
                return connection
            await connection.close()
        return await self._connect()

    async def close(self) -> None:
        """Close the idle connections; those lent are closed when they come back."""
        self.closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.close()


async def close_when_done(pool: ConnectionPool) -> AsyncGenerator[None, None]:
    """Keep `pool` open until this generator is closed, then close the pool.

    Once started, the event loop tracks the generator and closes it when it shuts down
    (`asyncio.run` does), so the pool's connections are closed with their loop.
    """
    try:
        yield
    finally:
        await pool.close()


def dsn_address(dsn: str) -> str:
    """Return the `host:port` a DSN points at (never its password)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(dsn)
    except Exception:
        return "an unreadable DSN"
    host = params.get("host") or params.get("hostaddr") or "localhost"
    return f"{host}:{params.get('port') or 5432}"


def forget_task(task: asyncio.Task[Any], leftovers: set[asyncio.Task[Any]]) -> None:
    """Drop a finished leftover task, reading its outcome so that none is logged."""
    leftovers.discard(task)
    if not task.cancelled():
        task.exception()
