"""`PostgresStore`: checkpoints and sessions in PostgreSQL, shared by every process using it.

Two tables, `<prefix>checkpoints` and `<prefix>sessions`, are reached through a pool of
psycopg connections in autocommit mode, so each write is committed when its method returns.
Writes, claims and compare-and-set session writes are single statements (`INSERT ... ON
CONFLICT ... RETURNING`, a guarded `UPDATE`), atomic under concurrent use from any number
of processes. A batch of checkpoints (`put_checkpoints`, a run's step save) is one statement
too; a step save's commit does not wait for the disk unless `flush_steps=True`.

Every operation ends within the store's `timeout` (10 s unless given), with its result or a
`StoreError` naming the operation and the server's `host:port`.

The schema is created on first use by `MIGRATIONS`, applied in order in one transaction that
holds a `pg_advisory_xact_lock`, and recorded in `<prefix>schema_version`. The documents'
columns are compressed with lz4 where the server has it (PostgreSQL 14 and later, built with
lz4, as the usual packages are), else with the server's default. Expiry times use
the server's clock (`now()`); expired rows read as absent and are deleted now and then by
writes.

Needs `pip install "plait[postgres]"`.
"""

from __future__ import annotations

import functools
import math
import time
from typing import TYPE_CHECKING, Any, TypeAlias

from plait.errors import UsageError
from plait.stores._checks import MAX_BATCH
from plait.stores._network import DEFAULT_TIMEOUT
from plait.stores._pgclient import PostgresClient
from plait.stores._rows import checkpoint_from_rows, session_from_rows
from plait.stores.base import (
    CheckpointRecord,
    CheckpointStatus,
    CheckpointWrite,
    ClosingStore,
    Operation,
    SessionRecord,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["MIGRATIONS", "PostgresStore"]

_Connection: TypeAlias = "AsyncConnection[tuple[Any, ...]]"

#: The schema, one script per version with `{prefix}` before every name; append new
#: versions, never edit old ones.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE {prefix}checkpoints (
        id TEXT PRIMARY KEY,
        data BYTEA NOT NULL,
        version BIGINT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'claimed', 'done')),
        expires_at TIMESTAMPTZ
    );
    CREATE INDEX {prefix}checkpoints_expires_at
        ON {prefix}checkpoints (expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE {prefix}sessions (
        id TEXT PRIMARY KEY,
        data BYTEA NOT NULL,
        expires_at TIMESTAMPTZ
    );
    CREATE INDEX {prefix}sessions_expires_at
        ON {prefix}sessions (expires_at) WHERE expires_at IS NOT NULL;
    """,
    """
    ALTER TABLE {prefix}sessions ADD COLUMN IF NOT EXISTS version BIGINT NOT NULL DEFAULT 1;
    """,
    # lz4 compresses the documents several times faster than PostgreSQL's default (pglz);
    # a server without it (before version 14, or built without lz4) keeps its default
    """
    DO $$
    BEGIN
        ALTER TABLE {prefix}checkpoints ALTER COLUMN data SET COMPRESSION lz4;
        ALTER TABLE {prefix}sessions ALTER COLUMN data SET COMPRESSION lz4;
    EXCEPTION WHEN feature_not_supported OR syntax_error THEN
        NULL;
    END
    $$;
    """,
]


#: The parameters of the checkpoint `n` of a batch: its id, its status, its data.
_PARAMETERS = tuple((f"i{n}", f"s{n}", f"d{n}") for n in range(MAX_BATCH))


def _statements(script: str) -> tuple[str, ...]:
    """Split a migration script into its statements (a `$$ ... $$` body is one piece)."""
    pieces = script.split("$$")
    statements, current = [], ""
    for n, piece in enumerate(pieces):
        if n % 2:  # inside $$ ... $$
            current += f"$${piece}$$"
            continue
        *done, current_end = piece.split(";")
        if done:
            statements += [current + done[0], *done[1:]]
            current = current_end
        else:
            current += current_end
    statements.append(current)
    return tuple(part.strip() for part in statements if part.strip())


class _Queries:
    """The statements of one table prefix."""

    def __init__(self, p: str) -> None:
        live = "(expires_at IS NULL OR expires_at > now())"
        expiry = "now() + %s::float8 * interval '1 second'"
        self.get_checkpoint = (
            f"SELECT data, version, status FROM {p}checkpoints WHERE id = %s AND {live}"
        )
        self.put_checkpoint = f"""
            INSERT INTO {p}checkpoints AS c (id, data, version, status, expires_at)
            VALUES (%s, %b, 1, %s, {expiry})
            ON CONFLICT (id) DO UPDATE SET
                data = EXCLUDED.data,
                version = c.version + 1,
                status = EXCLUDED.status,
                expires_at = EXCLUDED.expires_at
            RETURNING version"""
        self._prefix = p
        self._ttl_expiry = "now() + %(ttl)s::float8 * interval '1 second'"
        self.claim_checkpoint = f"""
            UPDATE {p}checkpoints SET status = 'claimed', version = version + 1
            WHERE id = %s AND version = %s AND status = 'pending' AND {live}
            RETURNING version"""
        self.delete_checkpoint = f"DELETE FROM {p}checkpoints WHERE id = %s"
        self.get_session = f"SELECT data, version FROM {p}sessions WHERE id = %s AND {live}"
        # the stored row is alive: its version counts on; an expired one starts again at 1
        stored_live = "(s.expires_at IS NULL OR s.expires_at > now())"
        insert = f"""
            INSERT INTO {p}sessions AS s (id, data, version, expires_at)
            VALUES (%s, %b, 1, {expiry})"""
        self.put_session = f"""{insert}
            ON CONFLICT (id) DO UPDATE SET
                data = EXCLUDED.data,
                version = CASE WHEN {stored_live} THEN s.version + 1 ELSE 1 END,
                expires_at = EXCLUDED.expires_at
            RETURNING version"""
        self.create_session = f"""{insert}
            ON CONFLICT (id) DO UPDATE SET
                data = EXCLUDED.data, version = 1, expires_at = EXCLUDED.expires_at
            WHERE NOT {stored_live}
            RETURNING version"""
        self.replace_session = f"""
            UPDATE {p}sessions SET data = %b, version = version + 1, expires_at = {expiry}
            WHERE id = %s AND version = %s AND {live}
            RETURNING version"""
        self.delete_session = f"DELETE FROM {p}sessions WHERE id = %s"
        self.put_checkpoints = functools.lru_cache(maxsize=16)(self._put_checkpoints)
        self.sweeps = (
            f"DELETE FROM {p}checkpoints WHERE expires_at <= now()",
            f"DELETE FROM {p}sessions WHERE expires_at <= now()",
        )

    def _put_checkpoints(self, shape: tuple[int, ...], flush: bool) -> str:
        """Return the statement that writes one checkpoint per item of `shape`: the
        checkpoint `n` has the parameters `i<n>` (its id) and `s<n>` (its status), and the
        data `d<shape[n]>` (the same bytes written under two ids are sent once); `ttl` is
        every one's. Without `flush`, its commit does not wait for the disk."""
        rows = ", ".join(
            f"(%(i{n})s, %(d{data})b, %(s{n})s, {self._ttl_expiry})" for n, data in enumerate(shape)
        )
        # set_config(..., true) holds for this statement's own transaction, up to its commit
        start, join = "", ""
        if not flush:
            start = "WITH a AS (SELECT set_config('synchronous_commit', 'off', true))"
            join = "CROSS JOIN a"
        return f"""{start}
            INSERT INTO {self._prefix}checkpoints AS c (id, data, version, status, expires_at)
            SELECT w.id, w.data, 1, w.status, w.expires_at
            FROM (VALUES {rows}) AS w (id, data, status, expires_at) {join}
            ON CONFLICT (id) DO UPDATE SET
                data = EXCLUDED.data,
                version = c.version + 1,
                status = EXCLUDED.status,
                expires_at = EXCLUDED.expires_at
            RETURNING id, version"""


class PostgresStore(PostgresClient, ClosingStore):
    """A store in PostgreSQL: shared by processes and machines, safe under concurrent resumes.

    Nothing is opened until the first call. The pool belongs to the event loop it was opened
    in; a call from another loop (a later `asyncio.run`) opens a new pool. A pool is closed by
    `await store.close()` (or `async with`), or else when its event loop ends; it runs no task
    of its own, so a store that is never closed never keeps a process from exiting.

    Every operation ends within `timeout` seconds, waiting for a free connection included:
    with its result, or with a `StoreError` that names the operation and the server's
    `host:port`. A write that fails that way may or may not have been applied (the request
    may have reached the server before the answer was lost); one that never reached the
    server changed nothing. A pooled connection that the server closed while it was idle is
    replaced before it is used.

    Args:
        dsn: The server, e.g. `postgresql://user:password@host:5432/db`.
        min_size: Connections opened on first use. Idle connections are kept open until
            the store is closed or its loop ends.
        max_size: Connections open at most; more operations at once wait their turn.
        table_prefix: Put before every table name, to keep several stores in one database.
        timeout: Seconds each operation may take (default 10).
        flush_steps: Whether a running run's step checkpoints wait for the server's disk
            when they commit. By default they do not (PostgreSQL's asynchronous commit, for
            those writes alone): a step checkpoint is seen by every client as soon as it is
            written and survives any client's crash, but a crash of the server itself may
            lose the last fraction of a second of them, and a run then resumes from an
            earlier step. (These are the writes made with `put_checkpoints(...,
            flush=False)`: a run's steps, and the mark that retires them when it completes.)
            Every other write (pauses, claims, sessions) waits for the disk, and makes the
            writes before it durable too.

    Raises:
        UsageError: psycopg is not installed, or the sizes, the prefix or the timeout are
            invalid.
    """

    #: Seconds between two deletions of expired rows by the same store.
    sweep_interval: float = 60.0

    _migrations = tuple(_statements(script) for script in MIGRATIONS)
    _version_table = "schema_version"
    _lock_name = "plait.migrate"
    _reads = frozenset({Operation.READ_CHECKPOINT, Operation.READ_SESSION})

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        table_prefix: str = "plait_",
        timeout: float = DEFAULT_TIMEOUT,
        flush_steps: bool = False,
    ) -> None:
        if min_size < 0 or max_size < max(min_size, 1):
            raise UsageError(f"need 0 <= min_size <= max_size, max_size >= 1; got {min_size}")
        self._setup(
            "PostgresStore",
            dsn,
            table_prefix=table_prefix,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
        )
        self._sql = _Queries(table_prefix)
        self.flush_steps = flush_steps
        self._last_sweep = -math.inf

    def __repr__(self) -> str:
        return f"PostgresStore({self.address!r}, table_prefix={self.table_prefix!r})"

    async def _sweep(self, connection: _Connection) -> None:
        """Delete expired rows, if `sweep_interval` has passed since this store last did."""
        now = time.monotonic()
        if now - self._last_sweep >= self.sweep_interval:
            self._last_sweep = now
            for statement in self._sql.sweeps:
                await connection.execute(statement)

    async def _get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        """Return the checkpoint, or None."""
        rows = await self._query(
            Operation.READ_CHECKPOINT, self._sql.get_checkpoint, (checkpoint_id,)
        )
        return checkpoint_from_rows(checkpoint_id, rows)

    async def _put_checkpoint(
        self, checkpoint_id: str, data: bytes, status: CheckpointStatus, ttl: float | None
    ) -> int:
        """Write the checkpoint; return its new version."""
        params = (checkpoint_id, data, status, ttl)
        rows = await self._query(
            Operation.WRITE_CHECKPOINT, self._sql.put_checkpoint, params, sweep=True
        )
        return int(rows[0][0])

    async def _put_checkpoints(
        self, writes: list[CheckpointWrite], ttl: float | None, flush: bool
    ) -> list[int]:
        """Write the checkpoints in one statement (one round trip, one commit); return their
        versions. Bytes written under several ids (a step and its snapshot) are sent once."""
        params: dict[str, Any] = {"ttl": ttl}
        sent: dict[int, int] = {}  # id() of data already a parameter -> its number
        shape: list[int] = []
        for (checkpoint_id, data, status), (i, s, d) in zip(writes, _PARAMETERS, strict=False):
            params[i], params[s] = checkpoint_id, status
            n = len(shape)
            first = sent.setdefault(id(data), n)
            if first == n:
                params[d] = data
            shape.append(first)
        sql = self._sql.put_checkpoints(tuple(shape), flush or self.flush_steps)
        rows = await self._query(Operation.WRITE_CHECKPOINT, sql, params, sweep=True)
        versions: dict[str, int] = dict(rows)  # id -> version (a BIGINT: an int)
        return [versions[checkpoint_id] for checkpoint_id, _, _ in writes]

    async def _claim_checkpoint(self, checkpoint_id: str, version: int) -> bool:
        """Move pending@version to claimed; False if another resume won."""
        rows = await self._query(
            Operation.CLAIM_CHECKPOINT, self._sql.claim_checkpoint, (checkpoint_id, version)
        )
        return len(rows) == 1

    async def _delete_checkpoint(self, checkpoint_id: str) -> None:
        """Delete the checkpoint."""
        await self._query(
            Operation.DELETE_CHECKPOINT, self._sql.delete_checkpoint, (checkpoint_id,)
        )

    async def _get_session_record(self, session_id: str) -> SessionRecord | None:
        """Return the session with its version, or None."""
        rows = await self._query(Operation.READ_SESSION, self._sql.get_session, (session_id,))
        return session_from_rows(session_id, rows)

    async def _put_session(
        self, session_id: str, data: bytes, ttl: float | None, expected_version: int | None
    ) -> int:
        """Write the session, if at `expected_version` when given; return its new version."""
        params: tuple[Any, ...]
        if expected_version is None:
            sql, params = self._sql.put_session, (session_id, data, ttl)
        elif expected_version == 0:
            sql, params = self._sql.create_session, (session_id, data, ttl)
        else:
            sql, params = self._sql.replace_session, (data, ttl, session_id, expected_version)
        rows = await self._query(Operation.WRITE_SESSION, sql, params, sweep=True)
        return await self._written(session_id, expected_version, rows)

    async def _delete_session(self, session_id: str) -> None:
        """Delete the session."""
        await self._query(Operation.DELETE_SESSION, self._sql.delete_session, (session_id,))
