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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from plait.errors import UsageError
from plait.memory.base import (
    ClosingMemoryService,
    MemoryItem,
    decode_metadata,
    score,
)
from plait.stores._network import DEFAULT_TIMEOUT
from plait.stores._pgclient import PostgresClient

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

_ADDING, _SEARCHING, _DELETING = "adding a memory", "searching memories", "deleting a memory"


def ts_query(query_words: Sequence[str]) -> str:
    """Return the `to_tsquery` text matching any of `query_words`, each a quoted lexeme."""
    quoted = ("'" + w.replace("\\", "\\\\").replace("'", "''") + "'" for w in query_words)
    return " | ".join(quoted)


class PostgresMemoryService(PostgresClient, ClosingMemoryService):
    """Long-term memories in PostgreSQL, searched with its full-text search.

    Nothing is opened until the first call. The pool belongs to the event loop it was opened
    in; a call from another loop opens a new one. Close it with `await service.close()` or
    `async with` (else its loop's end closes it); it runs no task of its own.

    The connection settings are `PostgresStore`'s (`plait.stores.postgres`), whose pool
    code it shares: `dsn` names the server; `max_size` caps the connections (at least 1;
    operations beyond it wait their turn); `table_prefix` goes before every table name, so
    several services can share a database; `timeout` is the seconds each operation may take.
    An invalid one, or psycopg missing, is a `UsageError`.
    """

    _migrations = MIGRATIONS
    _version_table = "memory_schema_version"
    _lock_name = "plait.memory.migrate"
    _reads = frozenset({_SEARCHING})

    def __init__(
        self,
        dsn: str,
        *,
        max_size: int = 10,
        table_prefix: str = "plait_",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise UsageError(f"max_size must be an int of 1 or more, got {max_size!r}")
        self._setup(
            "PostgresMemoryService",
            dsn,
            table_prefix=table_prefix,
            min_size=1,
            max_size=max_size,
            timeout=timeout,
        )
        p = table_prefix
        self._add_sql = f"""
            INSERT INTO {p}memories (id, user_id, text, metadata, words)
            VALUES (%s, %s, %s, %s, to_tsvector('simple', %s))"""
        # params: the query's words (space-separated), the tsquery, user_id, k
        self._search_sql = f"""
            SELECT m.id, m.text, m.metadata, (
                SELECT count(*) FROM unnest(m.words) AS u
                WHERE u.lexeme = ANY(tsvector_to_array(to_tsvector('simple', %s)))
            ) AS shared, ts_rank(m.words, q) AS rank
            FROM {p}memories AS m, to_tsquery('simple', %s) AS q
            WHERE m.user_id = %s AND m.words @@ q
            ORDER BY shared DESC, rank DESC, m.seq DESC
            LIMIT %s"""
        self._delete_sql = f"DELETE FROM {p}memories WHERE id = %s AND user_id = %s"

    def __repr__(self) -> str:
        return f"PostgresMemoryService({self.address!r}, table_prefix={self.table_prefix!r})"

    async def _add(
        self, memory_id: str, user_id: str, text: str, metadata: str | None, indexed: str
    ) -> None:
        """Store the memory, its words in a `tsvector`."""
        params = (memory_id, user_id, text, metadata, indexed)
        await self._query(_ADDING, self._add_sql, params)

    async def _search(self, user_id: str, query_words: list[str], k: int) -> list[MemoryItem]:
        """Return the best `k` memories sharing one of `query_words`."""
        params = (" ".join(query_words), ts_query(query_words), user_id, k)
        rows = await self._query(_SEARCHING, self._search_sql, params)
        return [
            MemoryItem(id=i, text=t, metadata=decode_metadata(m), score=score(shared, rank))
            for i, t, m, shared, rank in rows
        ]

    async def _delete(self, user_id: str, memory_id: str) -> None:
        """Delete the memory, if it is `user_id`'s."""
        await self._query(_DELETING, self._delete_sql, (memory_id, user_id))
