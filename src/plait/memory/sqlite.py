"""`SqliteMemoryService`: memories in a SQLite file, searched with FTS5.

The memories are rows of `plait_memories`; their words (see `plait.memory.base.words`) are
indexed by the FTS5 table `plait_memories_fts`, kept in step by triggers. A search is an
FTS5 query that ORs the query's words, each quoted (so no word is read as FTS syntax), ranked
by bm25. The file may be the one a `SqliteStore` uses: the tables and the schema version
table (`plait_memory_schema_version`) are the service's own. The schema is created on first
use by `MIGRATIONS`, applied in order under `BEGIN IMMEDIATE`.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from plait.errors import StoreError
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
from plait.stores._aiosqlite import connect

__all__ = ["MIGRATIONS", "SqliteMemoryService"]

#: The schema, the statements of each version; append new versions, never edit old ones.
MIGRATIONS: list[tuple[str, ...]] = [
    (
        """CREATE TABLE plait_memories (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            user_id TEXT NOT NULL,
            text TEXT NOT NULL,
            metadata TEXT,
            words TEXT NOT NULL,
            created_at REAL NOT NULL
        )""",
        "CREATE INDEX plait_memories_user_id ON plait_memories (user_id)",
        """CREATE VIRTUAL TABLE plait_memories_fts USING fts5(
            words, content='plait_memories', content_rowid='seq',
            tokenize='unicode61 remove_diacritics 0'
        )""",
        """CREATE TRIGGER plait_memories_added AFTER INSERT ON plait_memories BEGIN
            INSERT INTO plait_memories_fts (rowid, words) VALUES (new.seq, new.words);
        END""",
        """CREATE TRIGGER plait_memories_deleted AFTER DELETE ON plait_memories BEGIN
            INSERT INTO plait_memories_fts (plait_memories_fts, rowid, words)
            VALUES ('delete', old.seq, old.words);
        END""",
    ),
]

_BUSY_TIMEOUT_MS = 30_000

_ADD = """
INSERT INTO plait_memories (id, user_id, text, metadata, words, created_at)
VALUES (?, ?, ?, ?, ?, ?)
"""
# params: the query's words (space-separated), the FTS5 query, user_id, k
_SEARCH = """
SELECT m.id, m.text, m.metadata, plait_shared_words(m.words, ?) AS shared,
    bm25(plait_memories_fts) AS rank
FROM plait_memories_fts JOIN plait_memories AS m ON m.seq = plait_memories_fts.rowid
WHERE plait_memories_fts MATCH ? AND m.user_id = ?
ORDER BY shared DESC, rank, m.seq DESC
LIMIT ?
"""
_DELETE = "DELETE FROM plait_memories WHERE id = ? AND user_id = ?"

_ADDING, _SEARCHING, _DELETING = "adding a memory", "searching memories", "deleting a memory"


def fts_query(query_words: Sequence[str]) -> str:
    """Return the FTS5 query matching any of `query_words`, each a quoted string."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in query_words)


def _shared_words(indexed: str, query_words: str) -> int:
    """Return how many distinct words two space-separated word lists share (the SQL
    function `plait_shared_words`)."""
    return len(set(indexed.split()) & set(query_words.split()))


async def _migrate(db: aiosqlite.Connection) -> None:
    """Apply the migrations this file lacks, in one `BEGIN IMMEDIATE` transaction."""
    await db.execute_fetchall("BEGIN IMMEDIATE")
    try:
        await db.execute_fetchall(
            "CREATE TABLE IF NOT EXISTS plait_memory_schema_version"
            " (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        rows = list(
            await db.execute_fetchall("SELECT MAX(version) FROM plait_memory_schema_version")
        )
        current = int(rows[0][0] or 0)
        for version, statements in enumerate(MIGRATIONS[current:], start=current + 1):
            for statement in statements:
                await db.execute_fetchall(statement)
            await db.execute_fetchall(
                "INSERT INTO plait_memory_schema_version (version, applied_at) VALUES (?, ?)",
                (version, time.time()),
            )
        await db.execute_fetchall("COMMIT")
    except BaseException:
        if db.in_transaction:
            await db.execute_fetchall("ROLLBACK")
        raise


async def _open(path: str) -> aiosqlite.Connection:
    """Connect to `path` in autocommit mode, with the schema up to date."""
    db = await connect(path)
    try:
        await db.execute_fetchall(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        await db.create_function("plait_shared_words", 2, _shared_words, deterministic=True)
        await _migrate(db)
    except BaseException:
        await db.close()
        raise
    return db


class SqliteMemoryService(ClosingMemoryService):
    """Long-term memories in a SQLite file, searched with its full-text index (FTS5).

    Nothing is opened until the first call. The connection belongs to the event loop it was
    opened in; a call from another loop (a later `asyncio.run`) opens a new one. Close the
    service with `await service.close()` or `async with`; one left open does not keep the
    process alive. A failure of the file (unreadable, full disk) is a `StoreError` naming
    the operation.

    Args:
        path: The database file, created if missing (it may be a `SqliteStore`'s).
    """

    def __init__(self, path: str | Path = "plait.db") -> None:
        self.path = os.fspath(path)
        self._db: aiosqlite.Connection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._stale: list[aiosqlite.Connection] = []

    def __repr__(self) -> str:
        return f"SqliteMemoryService({self.path!r})"

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
                self._db = await _open(self.path)
            return self._db

    async def _query(self, operation: str, sql: str, params: Iterable[Any]) -> list[Any]:
        """Run one statement and return its rows; a failure is a `StoreError`."""
        try:
            db = await self._connection()
            return list(await db.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            detail = " ".join(str(exc).split()) or "no detail"
            raise StoreError(
                f"{operation} failed in {self.path} (SQLite): {type(exc).__name__}: {detail}",
                operation=operation,
            ) from exc

    async def add(self, user_id: str, text: str, metadata: dict[str, Any] | None = None) -> str:
        """Remember `text` (with JSON `metadata`) for `user_id`; return the new memory's id."""
        check_user_id(user_id)
        check_text(text)
        encoded = encode_metadata(metadata)
        memory_id = uuid.uuid4().hex
        indexed = " ".join(words(text))
        params = (memory_id, user_id, text, encoded, indexed, time.time())
        await self._query(_ADDING, _ADD, params)
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
        params = (" ".join(found), fts_query(found), user_id, k)
        rows = await self._query(_SEARCHING, _SEARCH, params)
        return [
            MemoryItem(id=i, text=t, metadata=decode_metadata(m), score=score(shared, -rank))
            for i, t, m, shared, rank in rows
        ]

    async def delete(self, user_id: str, memory_id: str) -> None:
        """Forget the memory `memory_id` of `user_id` (nothing when it has none such)."""
        check_user_id(user_id)
        if not is_memory_id(memory_id):
            return
        await self._query(_DELETING, _DELETE, (memory_id, user_id))

    async def close(self) -> None:
        """Close the connection; the next use opens a new one."""
        found = [*self._stale, *([self._db] if self._db is not None else [])]
        self._stale, self._db = [], None
        for db in found:
            await db.close()
