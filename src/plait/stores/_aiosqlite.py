"""What `SqliteStore` and `SqliteMemoryService` share: opening an aiosqlite connection in
autocommit mode, on a daemon worker thread, without leaving that thread behind when the
connect fails; bringing a file's schema up to date; and one connection per event loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence

import aiosqlite

__all__ = ["BUSY_TIMEOUT_MS", "LoopConnection", "connect", "open_migrated"]

#: The longest wait for aiosqlite's thread to stop after a failed connect.
JOIN_SECONDS = 5.0
#: How long a connection waits for a file another connection holds, in milliseconds.
BUSY_TIMEOUT_MS = 30_000


async def connect(path: str) -> aiosqlite.Connection:
    """Connect to `path` in autocommit mode (every write is committed before it returns)."""
    db = aiosqlite.connect(path, isolation_level=None)
    # aiosqlite's worker thread is not a daemon: an unclosed connection would hold the
    # process open at exit. Every write is committed before it returns, so nothing is lost.
    worker = getattr(db, "_thread", db)
    if isinstance(worker, threading.Thread):
        worker.daemon = True
    try:
        await db
    except BaseException:
        # aiosqlite stops its worker thread when the connect fails; its last act is to
        # report to this loop, so wait for it while the loop still runs (else it may find
        # the loop closed and print "Event loop is closed" from its thread).
        if isinstance(worker, threading.Thread) and worker.is_alive():
            await asyncio.get_running_loop().run_in_executor(None, worker.join, JOIN_SECONDS)
        raise
    return db


async def _migrate(
    db: aiosqlite.Connection, table: str, migrations: Sequence[Sequence[str]]
) -> None:
    """Apply the migrations the file lacks (recorded in `table`), in one `BEGIN IMMEDIATE`
    transaction."""
    await db.execute_fetchall("BEGIN IMMEDIATE")
    try:
        await db.execute_fetchall(
            f"CREATE TABLE IF NOT EXISTS {table}"
            " (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        rows = list(await db.execute_fetchall(f"SELECT MAX(version) FROM {table}"))
        current = int(rows[0][0] or 0)
        for version, statements in enumerate(migrations[current:], start=current + 1):
            for statement in statements:
                await db.execute_fetchall(statement)
            await db.execute_fetchall(
                f"INSERT INTO {table} (version, applied_at) VALUES (?, ?)",
                (version, time.time()),
            )
        await db.execute_fetchall("COMMIT")
    except BaseException:
        if db.in_transaction:
            await db.execute_fetchall("ROLLBACK")
        raise


async def open_migrated(
    path: str,
    table: str,
    migrations: Sequence[Sequence[str]],
    setup: Callable[[aiosqlite.Connection], Awaitable[None]],
) -> aiosqlite.Connection:
    """Connect to `path` in autocommit mode, wait up to 30 s for a busy file, run `setup`,
    and apply the migrations the file lacks (recorded in `table`)."""
    db = await connect(path)
    try:
        await db.execute_fetchall(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        await setup(db)
        await _migrate(db, table, migrations)
    except BaseException:
        await db.close()
        raise
    return db


class LoopConnection:
    """One connection per event loop to the file at `path`, opened by `_open` on first use:
    a call from another loop (a later `asyncio.run`) closes the old one and opens a new one."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._db: aiosqlite.Connection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._stale: list[aiosqlite.Connection] = []

    async def _open(self) -> aiosqlite.Connection:
        """Open a connection to the file (each user defines this)."""
        raise NotImplementedError

    async def _connection(self) -> aiosqlite.Connection:
        """Return the connection of the running loop, opening it if needed."""
        loop = asyncio.get_running_loop()
        if self._loop is loop and self._db is not None:
            return self._db
        if self._loop is not loop:
            self._loop, self._lock = loop, asyncio.Lock()
            if self._db is not None:
                self._stale.append(self._db)
                self._db = None
        async with self._lock:
            if self._db is None:
                while self._stale:
                    await self._stale.pop().close()
                self._db = await self._open()
            return self._db

    async def close(self) -> None:
        """Close the connection; the next use opens a new one."""
        found = [*self._stale, *([self._db] if self._db is not None else [])]
        self._stale, self._db = [], None
        for db in found:
            await db.close()
