"""`PostgresClient`: what `PostgresStore` and `PostgresMemoryService` share: a pool of
connections per event loop (see `plait.stores._pgpool`), the schema brought up to date on
first use, and statements run within the time bound with their failures as `StoreError`s."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import math
import re
from collections.abc import AsyncGenerator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from plait.errors import UsageError
from plait.stores._network import check_timeout, failed, timed_out
from plait.stores._pgpool import ConnectionPool, close_when_done, dsn_address, forget_task

if TYPE_CHECKING:
    from plait.stores._pgconnection import StoreConnection

__all__ = ["PostgresClient"]

_Connection: TypeAlias = "StoreConnection"

_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
#: Seconds `close` waits for operations that ran out of time to let go of their connections.
_CLOSE_WAIT = 5.0


def _require_psycopg(owner: str) -> ModuleType:
    """Import `psycopg`, or explain how to install it.

    Raises:
        UsageError: The package is not installed.
    """
    try:
        import psycopg
    except ImportError as exc:
        raise UsageError(f'{owner} needs psycopg: pip install "plait[postgres]"') from exc
    return psycopg


#: What a statement's answer holds when its time ran out first.
_TIME_UP: list[tuple[Any, ...]] = []


def _time_up(answer: asyncio.Future[list[tuple[Any, ...]]]) -> None:
    """The time of the statement whose answer is `answer` is up."""
    if not answer.done():
        answer.set_result(_TIME_UP)


class PostgresClient:
    """A user of PostgreSQL through a pool of psycopg connections in autocommit mode.

    Each subclass names its schema: `_migrations` (the statements of each version, with
    `{prefix}` before every name), `_version_table` (where the applied versions are
    recorded, after the prefix), `_lock_name` (whose advisory lock serializes migrations) and
    `_reads` (the operations that write nothing).
    """

    _migrations: ClassVar[Sequence[Sequence[str]]]
    _version_table: ClassVar[str]
    _lock_name: ClassVar[str]
    _reads: ClassVar[frozenset[str]]

    def _setup(
        self,
        owner: str,
        dsn: str,
        *,
        table_prefix: str,
        min_size: int,
        max_size: int,
        timeout: float,
    ) -> None:
        """Check and keep the settings; nothing is opened until the first call.

        Raises:
            UsageError: psycopg is not installed, or the prefix or the timeout are invalid.
        """
        self._psycopg = _require_psycopg(owner)
        from plait.stores._pgconnection import StoreConnection

        self._connection_type = StoreConnection
        if not _PREFIX.fullmatch(table_prefix):
            raise UsageError(
                f"table_prefix {table_prefix!r} must be letters, digits and underscores"
                " (at most 40, not starting with a digit)"
            )
        self.dsn = dsn
        self.min_size = min_size
        self.max_size = max_size
        self.table_prefix = table_prefix
        self.timeout = check_timeout(owner, timeout)
        self.address = dsn_address(dsn)
        self._pool: ConnectionPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._closer: AsyncGenerator[None, None] | None = None
        self._leftovers: set[asyncio.Task[Any]] = set()

    async def _connect(self) -> ConnectionPool:
        """Return the pool of the running loop, opening it if needed."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the old loop's end closed (or will close) its pool
            self._loop, self._lock, self._pool = loop, asyncio.Lock(), None
            self._closer, self._leftovers = None, set()
        if self._pool is not None:
            return self._pool
        async with self._lock:
            if self._pool is None:
                self._pool = await self._open()
            return self._pool

    async def _open(self) -> ConnectionPool:
        """Bring the schema up to date, then open a pool that the loop's end closes."""
        pool = ConnectionPool(self._new_connection, self.max_size, self._psycopg.OperationalError)
        closer = self._closer = close_when_done(pool)
        await anext(closer)
        try:
            connection = await self._new_connection()
            pool.keep(connection)
            await self._migrate(connection)
            for _ in range(self.min_size - 1):
                pool.keep(await self._new_connection())
        except BaseException:
            self._closer = None
            await closer.aclose()
            raise
        return pool

    async def _new_connection(self) -> _Connection:
        """Open a connection in autocommit mode."""
        limit = max(2, math.ceil(self.timeout))  # libpq counts whole seconds, at least 2
        connect = self._connection_type.connect
        return await connect(self.dsn, autocommit=True, connect_timeout=limit)

    async def _migrate(self, connection: _Connection) -> None:
        """Apply the migrations the database lacks, one process at a time."""
        p = self.table_prefix
        table = f"{p}{self._version_table}"
        name = f"{self._lock_name}:{p}".encode()
        key = int.from_bytes(hashlib.blake2b(name, digest_size=8).digest(), "big", signed=True)
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
            await connection.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (version INTEGER PRIMARY KEY,"
                " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            cursor = await connection.execute(f"SELECT MAX(version) FROM {table}")
            row = await cursor.fetchone()
            current = int(row[0] or 0) if row is not None else 0
            for version, statements in enumerate(self._migrations[current:], start=current + 1):
                for statement in statements:
                    await connection.execute(statement.format(prefix=p))
                await connection.execute(f"INSERT INTO {table} (version) VALUES (%s)", (version,))

    async def _query(
        self,
        operation: str,
        sql: str,
        params: tuple[Any, ...] | dict[str, Any],
        *,
        sweep: bool = False,
    ) -> list[tuple[Any, ...]]:
        """Run one statement within `timeout` and return its rows; with `sweep`, first
        `_sweep` on the same connection.

        With an idle connection at hand the statement runs in the caller's task
        (`_query_here`); else, to wait for a place or a connection, in a task of its own
        (`_query_apart`).

        Raises:
            StoreError: The time ran out, or the server or the connection failed.
        """
        pool = self._pool
        if pool is not None and self._loop is asyncio.get_running_loop():
            connection = await pool.lend_idle()
            if connection is not None:
                return await self._query_here(operation, sql, params, sweep, connection)
        return await self._query_apart(operation, sql, params, sweep)

    async def _query_here(
        self,
        operation: str,
        sql: str,
        params: tuple[Any, ...] | dict[str, Any],
        sweep: bool,
        connection: StoreConnection,
    ) -> list[tuple[Any, ...]]:
        """Run the statement on a lent `connection`, in the caller's task.

        The connection keeps the time bound (`StoreConnection`): when the time is up it is
        cut, the statement fails at once, and its error is reported as the time running
        out. A connection that failed, or was cut, is closed.
        """
        pool = self._pool
        assert pool is not None
        connection.start(self.timeout)
        try:
            if sweep:
                await self._sweep(connection)
            rows = await connection.rows(sql, params)
        except BaseException as exc:
            await pool.drop(connection)
            if not isinstance(exc, (self._psycopg.Error, OSError)):
                raise
            write = operation not in self._reads
            if connection.timed_out:  # the error is the cut's
                raise timed_out(
                    operation, "PostgreSQL", self.address, self.timeout, write=write
                ) from None
            raise failed(operation, "PostgreSQL", self.address, exc, write=write) from exc
        connection.end()
        if connection.timed_out:  # the answer came, but the connection is cut
            await pool.drop(connection)
        else:
            await pool.give_back(connection)
        return rows

    async def _query_apart(
        self,
        operation: str,
        sql: str,
        params: tuple[Any, ...] | dict[str, Any],
        sweep: bool,
    ) -> list[tuple[Any, ...]]:
        """Run the statement (`_run`) in a task of its own, within `timeout`.

        When the time is up that task is cancelled but not waited for: psycopg then asks the
        server to cancel the statement, which a server that does not answer would drag past
        the timeout.
        """
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[list[tuple[Any, ...]]] = loop.create_future()
        task = loop.create_task(self._answer(answer, sql, params, sweep))
        timer = loop.call_later(self.timeout, _time_up, answer)
        write = operation not in self._reads
        try:
            rows = await answer
        except (self._psycopg.Error, OSError) as exc:
            raise failed(operation, "PostgreSQL", self.address, exc, write=write) from exc
        finally:
            timer.cancel()
            if not task.done():  # the time is up, or the caller was cancelled
                task.cancel()
                self._leftovers.add(task)
                task.add_done_callback(functools.partial(forget_task, leftovers=self._leftovers))
        if rows is _TIME_UP:
            raise timed_out(operation, "PostgreSQL", self.address, self.timeout, write=write)
        return rows

    async def _answer(
        self,
        answer: asyncio.Future[list[tuple[Any, ...]]],
        sql: str,
        params: tuple[Any, ...] | dict[str, Any],
        sweep: bool,
    ) -> None:
        """Run the statement (`_run`) and put its rows, or its error, in `answer` (unless
        the time is up already); the task ends with it, in the same step."""
        try:
            rows = await self._run(sql, params, sweep)
        except Exception as exc:
            if not answer.done():
                answer.set_exception(exc)
            return
        except asyncio.CancelledError:  # (not by `_query`): its caller is cancelled too
            if not answer.done():
                answer.cancel()
            raise
        if not answer.done():
            answer.set_result(rows)

    async def _run(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any], sweep: bool
    ) -> list[tuple[Any, ...]]:
        """Run one statement on a pooled connection and return its rows."""
        pool = self._pool
        if pool is None or self._loop is not asyncio.get_running_loop():
            pool = await self._connect()
        connection = await pool.lend()
        try:
            if sweep:
                await self._sweep(connection)
            rows = await connection.rows(sql, params)
        except BaseException:
            await pool.drop(connection)
            raise
        await pool.give_back(connection)
        return rows

    async def _sweep(self, connection: _Connection) -> None:
        """Delete expired rows (nothing expires here)."""
        del connection

    async def close(self) -> None:
        """Close the pool; the next use opens a new one.

        A pool opened in another loop is only dropped: that loop closed it when it ended.
        """
        self._pool = None
        closer, self._closer = self._closer, None
        leftovers, self._leftovers = self._leftovers, set()
        if self._loop is not asyncio.get_running_loop():
            return
        for task in leftovers:
            task.cancel()  # cancelled again, psycopg drops the connection at once
        if leftovers:
            await asyncio.wait(leftovers, timeout=_CLOSE_WAIT)
        if closer is not None:
            await closer.aclose()  # closes the pool
