"""Opening an aiosqlite connection the way `SqliteStore` and `SqliteMemoryService` need it:
in autocommit mode, on a daemon worker thread, and without leaving that thread behind when
the connect fails."""

from __future__ import annotations

import asyncio
import threading

import aiosqlite

__all__ = ["connect"]

#: The longest wait for aiosqlite's thread to stop after a failed connect.
JOIN_SECONDS = 5.0


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
