"""`PostgresMemoryService`: memories in PostgreSQL, searched with its full-text search.

The memories are rows of `<prefix>memories`; their words (see `plait.memory.base.words`) are
kept as a `tsvector` of the `simple` configuration (no stemming, no stop words), under a GIN
index. A search ORs the query's words into one `tsquery` (each word quoted, so none is read
as syntax) and ranks the matches by `ts_rank`. The schema is created on first use by
`MIGRATIONS`, in one transaction holding an advisory lock, and recorded in
`<prefix>memory_schema_version`.

Every operation ends within the service's `timeout` (10 s unless given), with its result or a
`StoreError` naming the operation and the server's `host:port`.

Needs `pip install "plait[postgres]"`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import math
import re
import uuid
from collections.abc import AsyncGenerator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from plait.errors import UsageError
from plait.memory.base import (
    ClosingMemoryService,
    MemoryItem,
    check_k,
    check_query,
    check_text,
    check_user_id,
    decode_metadata,
    encode_metadata,
    is_memory_id,
    score,
    words,
)
from plait.stores._network import DEFAULT_TIMEOUT, check_timeout, failed, timed_out
from plait.stores._pgpool import ConnectionPool, close_when_done, dsn_address, forget_task

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["MIGRATIONS", "PostgresMemoryService"]

_Connection: TypeAlias = "AsyncConnection[tuple[Any, ...]]"

#: The schema, the statements of each version with `{prefix}` before every name; append new
#: versions, never edit old ones.
MIGRATIONS: list[tuple[str, ...]] = [
    (
        """CREATE TABLE {prefix}memories (
            seq BIGSERIAL PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            user_id TEXT NOT NULL,
            text TEXT NOT NULL,
            metadata TEXT,
            words TSVECTOR NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )""",
        "CREATE INDEX {prefix}memories_user_id ON {prefix}memories (user_id)",
        "CREATE INDEX {prefix}memories_words ON {prefix}memories USING GIN (words)",
    ),
]

_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
_ADDING, _SEARCHING, _DELETING = "adding a memory", "searching memories", "deleting a memory"
_CLOSE_WAIT = 5.0  # seconds `close` waits for operations that ran out of time


def ts_query(query_words: Sequence[str]) -> str:
    """Return the `to_tsquery` text matching any of `query_words`, each a quoted lexeme."""
    quoted = ("'" + w.replace("\\", "\\\\").replace("'", "''") + "'" for w in query_words)
    return " | ".join(quoted)


def _require_psycopg() -> ModuleType:
    """Import `psycopg`, or explain how to install it."""
    try:
        import psycopg
    except ImportError as exc:
        raise UsageError(
            'PostgresMemoryService needs psycopg: pip install "plait[postgres]"'
        ) from exc
    return psycopg


def _lock_key(prefix: str) -> int:
    """Return the advisory lock key that serializes migrations of the tables of `prefix`."""
    digest = hashlib.blake2b(f"plait.memory.migrate:{prefix}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresMemoryService(ClosingMemoryService):
    """Long-term memories in PostgreSQL, searched with its full-text search.

    Nothing is opened until the first call. The pool belongs to the event loop it was opened
    in; a call from another loop opens a new one. Close it with `await service.close()` or
    `async with` (else its loop's end closes it); it runs no task of its own.

    Args:
        dsn: The server, e.g. `postgresql://user:password@host:5432/db`.
        max_size: Connections open at most; more operations at once wait their turn.
        table_prefix: Put before every table name, to keep several services in one database.
        timeout: Seconds each operation may take (default 10).

    Raises:
        UsageError: psycopg is not installed, or the size, the prefix or the timeout are
            invalid.
    """

    def __init__(
        self,
        dsn: str,
        *,
        max_size: int = 10,
        table_prefix: str = "plait_",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._psycopg = _require_psycopg()
        if not _PREFIX.fullmatch(table_prefix):
            raise UsageError(
                f"table_prefix {table_prefix!r} must be letters, digits and underscores"
                " (at most 40, not starting with a digit)"
            )
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise UsageError(f"max_size must be an int of 1 or more, got {max_size!r}")
        self.dsn = dsn
        self.max_size = max_size
        self.table_prefix = p = table_prefix
        self.timeout = check_timeout("PostgresMemoryService", timeout)
        self.address = dsn_address(dsn)
        self._add = f"""
            INSERT INTO {p}memories (id, user_id, text, metadata, words)
            VALUES (%s, %s, %s, %s, to_tsvector('simple', %s))"""
        # params: the query's words (space-separated), the tsquery, user_id, k
        self._search = f"""
            SELECT m.id, m.text, m.metadata, (
                SELECT count(*) FROM unnest(m.words) AS u
                WHERE u.lexeme = ANY(tsvector_to_array(to_tsvector('simple', %s)))
            ) AS shared, ts_rank(m.words, q) AS rank
            FROM {p}memories AS m, to_tsquery('simple', %s) AS q
            WHERE m.user_id = %s AND m.words @@ q
            ORDER BY shared DESC, rank DESC, m.seq DESC
            LIMIT %s"""
        self._delete = f"DELETE FROM {p}memories WHERE id = %s AND user_id = %s"
        self._pool: ConnectionPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._closer: AsyncGenerator[None, None] | None = None
        self._leftovers: set[asyncio.Task[Any]] = set()

    def __repr__(self) -> str:
        return f"PostgresMemoryService({self.address!r}, table_prefix={self.table_prefix!r})"

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
        except BaseException:
            self._closer = None
            await closer.aclose()
            raise
        return pool

    async def _new_connection(self) -> _Connection:
        """Open a connection in autocommit mode."""
        limit = max(2, math.ceil(self.timeout))  # libpq counts whole seconds, at least 2
        connect = self._psycopg.AsyncConnection.connect
        return cast("_Connection", await connect(self.dsn, autocommit=True, connect_timeout=limit))

    async def _migrate(self, connection: _Connection) -> None:
        """Apply the migrations the database lacks, one process at a time."""
        p = self.table_prefix
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(p),))
            await connection.execute(
                f"CREATE TABLE IF NOT EXISTS {p}memory_schema_version (version INTEGER"
                " PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            cursor = await connection.execute(f"SELECT MAX(version) FROM {p}memory_schema_version")
            row = await cursor.fetchone()
            current = int(row[0] or 0) if row is not None else 0
            for version, statements in enumerate(MIGRATIONS[current:], start=current + 1):
                for statement in statements:
                    await connection.execute(statement.format(prefix=p))
                await connection.execute(
                    f"INSERT INTO {p}memory_schema_version (version) VALUES (%s)", (version,)
                )

    async def _query(self, operation: str, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """Run one statement within `timeout` and return its rows.

        The statement runs in a task of its own; when the time is up that task is cancelled
        but not waited for (a server that does not answer would drag the cancel out).

        Raises:
            StoreError: The time ran out, or the server or the connection failed.
        """
        task = asyncio.ensure_future(self._run(sql, params))
        write = operation != _SEARCHING
        try:
            async with asyncio.timeout(self.timeout):
                return await asyncio.shield(task)
        except TimeoutError:
            raise timed_out(
                operation, "PostgreSQL", self.address, self.timeout, write=write
            ) from None
        except (self._psycopg.Error, OSError) as exc:
            raise failed(operation, "PostgreSQL", self.address, exc, write=write) from exc
        finally:
            if not task.done():
                task.cancel()
                self._leftovers.add(task)
                task.add_done_callback(functools.partial(forget_task, leftovers=self._leftovers))

    async def _run(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """Run one statement on a pooled connection and return its rows."""
        pool = await self._connect()
        async with pool.connection() as connection:
            cursor = await connection.execute(sql, params)
            return await cursor.fetchall() if cursor.description is not None else []

    async def add(self, user_id: str, text: str, metadata: dict[str, Any] | None = None) -> str:
        """Remember `text` (with JSON `metadata`) for `user_id`; return the new memory's id."""
        check_user_id(user_id)
        check_text(text)
        encoded = encode_metadata(metadata)
        memory_id = uuid.uuid4().hex
        params = (memory_id, user_id, text, encoded, " ".join(words(text)))
        await self._query(_ADDING, self._add, params)
        return memory_id

    async def search(self, user_id: str, query: str, k: int = 5) -> list[MemoryItem]:
        """Return at most `k` memories of `user_id` that share a word with `query`, best
        first; none for a query without words."""
        check_user_id(user_id)
        check_query(query)
        check_k(k)
        found = list(dict.fromkeys(words(query)))
        if not found:
            return []
        params = (" ".join(found), ts_query(found), user_id, k)
        rows = await self._query(_SEARCHING, self._search, params)
        return [
            MemoryItem(id=i, text=t, metadata=decode_metadata(m), score=score(shared, rank))
            for i, t, m, shared, rank in rows
        ]

    async def delete(self, user_id: str, memory_id: str) -> None:
        """Forget the memory `memory_id` of `user_id` (nothing when it has none such)."""
        check_user_id(user_id)
        if not is_memory_id(memory_id):
            return
        await self._query(_DELETING, self._delete, (memory_id, user_id))

    async def close(self) -> None:
        """Close the pool; the next use opens a new one (a pool of another loop is only
        dropped: that loop closed it when it ended)."""
        self._pool = None
        closer, self._closer = self._closer, None
        leftovers, self._leftovers = self._leftovers, set()
        if self._loop is not asyncio.get_running_loop():
            return
        for task in leftovers:
            task.cancel()
        if leftovers:
            await asyncio.wait(leftovers, timeout=_CLOSE_WAIT)
        if closer is not None:
            await closer.aclose()
