"""`SqliteMemoryService`: memories in a SQLite file, searched with FTS5.

The memories are rows of `plait_memories`; their words (see `plait.memory.base.words`) are
indexed by the FTS5 table `plait_memories_fts`, kept in step by triggers. A search is an
FTS5 query that ORs the query's words, each quoted (so no word is read as FTS syntax), ranked
by bm25. The file may be the one a `SqliteStore` uses: the tables and the schema version
table (`plait_memory_schema_version`) are the service's own. The schema is created on first
use by `MIGRATIONS`, applied in order under `BEGIN IMMEDIATE`.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from plait.errors import StoreError
from plait.memory.base import (
    ClosingMemoryService,
    MemoryItem,
    decode_metadata,
    score,
)
from plait.stores._aiosqlite import LoopConnection, open_migrated

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


async def _setup(db: aiosqlite.Connection) -> None:
    """Give the connection the SQL function `plait_shared_words`."""
    await db.create_function("plait_shared_words", 2, _shared_words, deterministic=True)


class SqliteMemoryService(LoopConnection, ClosingMemoryService):
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
        super().__init__(os.fspath(path))

    def __repr__(self) -> str:
        return f"SqliteMemoryService({self.path!r})"

    async def _open(self) -> aiosqlite.Connection:
        """Connect in autocommit mode, with the schema up to date."""
        return await open_migrated(self.path, "plait_memory_schema_version", MIGRATIONS, _setup)

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

    async def _add(
        self, memory_id: str, user_id: str, text: str, metadata: str | None, indexed: str
    ) -> None:
        """Store the memory; a trigger indexes its words."""
        await self._query(_ADDING, _ADD, (memory_id, user_id, text, metadata, indexed, time.time()))

    async def _search(self, user_id: str, query_words: list[str], k: int) -> list[MemoryItem]:
        """Return the best `k` memories sharing one of `query_words`."""
        params = (" ".join(query_words), fts_query(query_words), user_id, k)
        rows = await self._query(_SEARCHING, _SEARCH, params)
        return [
            MemoryItem(id=i, text=t, metadata=decode_metadata(m), score=score(shared, -rank))
            for i, t, m, shared, rank in rows
        ]

    async def _delete(self, user_id: str, memory_id: str) -> None:
        """Delete the memory, if it is `user_id`'s."""
        await self._query(_DELETING, _DELETE, (memory_id, user_id))
