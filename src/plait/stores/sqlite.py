"""`SqliteStore`: checkpoints and sessions in one SQLite file, the default store.

The file is in WAL mode, so readers never wait for the writer and several processes can
share it; a writer waits up to `busy_timeout` for another. Every statement runs in
autocommit mode, so each write is committed when its method returns; writes, claims and
compare-and-set session writes are single statements (`INSERT ... ON CONFLICT ...
RETURNING`, a guarded `UPDATE`), which makes them atomic across connections and processes.

The schema is created on first use by `MIGRATIONS`, applied in order under
`BEGIN IMMEDIATE` and recorded in `plait_schema_version`. Expiry times are wall-clock
seconds (`time.time()`); expired rows read as absent and are deleted now and then by writes.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from plait.stores._aiosqlite import BUSY_TIMEOUT_MS, LoopConnection, open_migrated
from plait.stores._rows import checkpoint_from_rows, session_from_rows
from plait.stores.base import (
    CheckpointRecord,
    CheckpointStatus,
    CheckpointWrite,
    ClosingStore,
    SessionRecord,
)

__all__ = ["MIGRATIONS", "SqliteStore"]

#: The schema, one script per version; append new versions, never edit old ones.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE plait_checkpoints (
        id TEXT PRIMARY KEY,
        data BLOB NOT NULL,
        version INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'claimed', 'done')),
        expires_at REAL
    );
    CREATE INDEX plait_checkpoints_expires_at
        ON plait_checkpoints (expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE plait_sessions (
        id TEXT PRIMARY KEY,
        data BLOB NOT NULL,
        expires_at REAL
    );
    CREATE INDEX plait_sessions_expires_at
        ON plait_sessions (expires_at) WHERE expires_at IS NOT NULL;
    """,
    """
    ALTER TABLE plait_sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
    """,
]

_LIVE = "(expires_at IS NULL OR expires_at > ?)"

_GET_CHECKPOINT = f"SELECT data, version, status FROM plait_checkpoints WHERE id = ? AND {_LIVE}"
_PUT_CHECKPOINT = """
INSERT INTO plait_checkpoints (id, data, version, status, expires_at) VALUES (?, ?, 1, ?, ?)
ON CONFLICT (id) DO UPDATE SET
    data = excluded.data,
    version = plait_checkpoints.version + 1,
    status = excluded.status,
    expires_at = excluded.expires_at
RETURNING version
"""
_UPSERT_CHECKPOINTS = """
ON CONFLICT (id) DO UPDATE SET
    data = excluded.data,
    version = plait_checkpoints.version + 1,
    status = excluded.status,
    expires_at = excluded.expires_at
RETURNING id, version
"""
_CLAIM_CHECKPOINT = f"""
UPDATE plait_checkpoints SET status = 'claimed', version = version + 1
WHERE id = ? AND version = ? AND status = 'pending' AND {_LIVE}
RETURNING version
"""
_GET_SESSION = f"SELECT data, version FROM plait_sessions WHERE id = ? AND {_LIVE}"
# the stored row is alive: its version counts on; an expired one starts again at 1
_STORED_LIVE = "(plait_sessions.expires_at IS NULL OR plait_sessions.expires_at > ?)"
# params: id, data, expires_at, now
_PUT_SESSION = f"""
INSERT INTO plait_sessions (id, data, version, expires_at) VALUES (?, ?, 1, ?)
ON CONFLICT (id) DO UPDATE SET
    data = excluded.data,
    version = CASE WHEN {_STORED_LIVE} THEN plait_sessions.version + 1 ELSE 1 END,
    expires_at = excluded.expires_at
RETURNING version
"""
# params: id, data, expires_at, now; no row back when a live session exists
_CREATE_SESSION = f"""
INSERT INTO plait_sessions (id, data, version, expires_at) VALUES (?, ?, 1, ?)
ON CONFLICT (id) DO UPDATE SET
    data = excluded.data, version = 1, expires_at = excluded.expires_at
WHERE NOT {_STORED_LIVE}
RETURNING version
"""
# params: data, expires_at, id, expected version, now; no row back when it is not current
_REPLACE_SESSION = f"""
UPDATE plait_sessions SET data = ?, version = version + 1, expires_at = ?
WHERE id = ? AND version = ? AND {_LIVE}
RETURNING version
"""
_SWEEPS = (
    "DELETE FROM plait_checkpoints WHERE expires_at <= ?",
    "DELETE FROM plait_sessions WHERE expires_at <= ?",
)


def _statements(script: str) -> tuple[str, ...]:
    """Split a migration script into its statements."""
    return tuple(part.strip() for part in script.split(";") if part.strip())


@functools.lru_cache(maxsize=16)
def _put_checkpoints_sql(count: int) -> str:
    """Return the statement that writes `count` checkpoints (params: id, data, status,
    expires_at of each)."""
    rows = ", ".join(["(?, ?, 1, ?, ?)"] * count)
    columns = "(id, data, version, status, expires_at)"
    return f"INSERT INTO plait_checkpoints {columns} VALUES {rows}{_UPSERT_CHECKPOINTS}"


def _expiry(ttl: float | None) -> float | None:
    """Return the wall-clock time at which a record written now with `ttl` expires."""
    return None if ttl is None else time.time() + ttl


async def _enable_wal(db: aiosqlite.Connection) -> None:
    """Switch the file to WAL mode, waiting while other connections hold it.

    Changing the journal mode fails at once, without `busy_timeout`, when another connection
    is using the file; the mode is stored in the file, so this only waits on a fresh one.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            await db.execute_fetchall("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = (exc.sqlite_errorcode & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            if not busy or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.01)


async def _setup(db: aiosqlite.Connection) -> None:
    """Put the file in WAL mode, with commits synced at checkpoints."""
    await _enable_wal(db)
    await db.execute_fetchall("PRAGMA synchronous = NORMAL")


class SqliteStore(LoopConnection, ClosingStore):
    """A store in a SQLite file: durable, shared by the processes of one machine.

    Nothing is opened until the first call. The connection belongs to the event loop it was
    opened in; a call from another loop (a later `asyncio.run`) closes it and opens a new
    one. Close the store with `await store.close()` or `async with`; a store left open does
    not keep the process alive.

    Args:
        path: The database file, created if missing.
    """

    #: Seconds between two deletions of expired rows by the same store.
    sweep_interval: float = 60.0

    def __init__(self, path: str | Path = "plait.db") -> None:
        super().__init__(os.fspath(path))
        self._last_sweep = -math.inf

    async def _open(self) -> aiosqlite.Connection:
        """Connect in autocommit and WAL mode, with the schema up to date."""
        migrations = [_statements(script) for script in MIGRATIONS]
        return await open_migrated(self.path, "plait_schema_version", migrations, _setup)

    async def _query(self, sql: str, params: Iterable[Any] = ()) -> Sequence[Any]:
        """Run one statement and return its rows."""
        db = await self._connection()
        return list(await db.execute_fetchall(sql, params))

    async def _write(self, sql: str, params: Iterable[Any]) -> Sequence[Any]:
        """Run one writing statement, first deleting expired rows if it is time to."""
        now = time.monotonic()
        if now - self._last_sweep >= self.sweep_interval:
            self._last_sweep = now
            wall = time.time()
            for sweep in _SWEEPS:
                await self._query(sweep, (wall,))
        return await self._query(sql, params)

    async def _get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        """Return the checkpoint, or None."""
        rows = await self._query(_GET_CHECKPOINT, (checkpoint_id, time.time()))
        return checkpoint_from_rows(checkpoint_id, rows)

    async def _put_checkpoint(
        self, checkpoint_id: str, data: bytes, status: CheckpointStatus, ttl: float | None
    ) -> int:
        """Write the checkpoint; return its new version."""
        params = (checkpoint_id, data, status, _expiry(ttl))
        rows = await self._write(_PUT_CHECKPOINT, params)
        return int(rows[0][0])

    async def _put_checkpoints(
        self, writes: list[CheckpointWrite], ttl: float | None, flush: bool
    ) -> list[int]:
        """Write the checkpoints in one statement (one commit); return their versions.

        Every commit of this store is written to the file without waiting for the disk
        (`synchronous = NORMAL`), so `flush` changes nothing."""
        del flush
        expires = _expiry(ttl)
        params = [value for i, data, status in writes for value in (i, data, status, expires)]
        rows = await self._write(_put_checkpoints_sql(len(writes)), params)
        versions = {checkpoint_id: int(version) for checkpoint_id, version in rows}
        return [versions[checkpoint_id] for checkpoint_id, _, _ in writes]

    async def _claim_checkpoint(self, checkpoint_id: str, version: int) -> bool:
        """Move pending@version to claimed; False if another resume won."""
        rows = await self._query(_CLAIM_CHECKPOINT, (checkpoint_id, version, time.time()))
        return len(rows) == 1

    async def _delete_checkpoint(self, checkpoint_id: str) -> None:
        """Delete the checkpoint."""
        await self._query("DELETE FROM plait_checkpoints WHERE id = ?", (checkpoint_id,))

    async def _get_session_record(self, session_id: str) -> SessionRecord | None:
        """Return the session with its version, or None."""
        rows = await self._query(_GET_SESSION, (session_id, time.time()))
        return session_from_rows(session_id, rows)

    async def _put_session(
        self, session_id: str, data: bytes, ttl: float | None, expected_version: int | None
    ) -> int:
        """Write the session, if at `expected_version` when given; return its new version."""
        expires, now = _expiry(ttl), time.time()
        if expected_version is None:
            rows = await self._write(_PUT_SESSION, (session_id, data, expires, now))
        elif expected_version == 0:
            rows = await self._write(_CREATE_SESSION, (session_id, data, expires, now))
        else:
            replace = (data, expires, session_id, expected_version, now)
            rows = await self._write(_REPLACE_SESSION, replace)
        return await self._written(session_id, expected_version, rows)

    async def _delete_session(self, session_id: str) -> None:
        """Delete the session."""
        await self._query("DELETE FROM plait_sessions WHERE id = ?", (session_id,))
