"""Stores for checkpoints and sessions: memory, SQLite (the default), PostgreSQL and Redis.

The backends other than `MemoryStore` are imported on first use; PostgreSQL and Redis need
`pip install "plait[postgres]"` / `"plait[redis]"`. `from_url` opens one from a URL such as
`sqlite:///plait.db`, `postgresql://host/db` or `redis://host:6379/0`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from plait._util.lazy import lazy_exports
from plait.errors import UsageError
from plait.stores.base import (
    CheckpointRecord,
    CheckpointStatus,
    CheckpointStore,
    SessionRecord,
    SessionStore,
    Store,
)
from plait.stores.memory import MemoryStore

if TYPE_CHECKING:
    from plait.stores.postgres import PostgresStore
    from plait.stores.redis import RedisStore
    from plait.stores.sqlite import SqliteStore

__all__ = [
    "CheckpointRecord",
    "CheckpointStatus",
    "CheckpointStore",
    "MemoryStore",
    "PostgresStore",
    "RedisStore",
    "SessionRecord",
    "SessionStore",
    "SqliteStore",
    "Store",
    "from_url",
]

_BACKENDS = {
    "PostgresStore": "plait.stores.postgres",
    "RedisStore": "plait.stores.redis",
    "SqliteStore": "plait.stores.sqlite",
}


__getattr__ = lazy_exports(__name__, _BACKENDS)


_SCHEMES = (
    "sqlite:///relative/path.db, sqlite:////absolute/path.db, postgresql://..., "
    "postgres://..., redis://..., rediss://... or memory://"
)


def from_url(url: str) -> Store:
    """Open the store a URL names (nothing is connected until its first use).

    - `sqlite:///relative/path.db` or `sqlite:////absolute/path.db`: a `SqliteStore` file
      (`sqlite:///plait.db` is the default of the command line and the server).
    - `postgresql://...` or `postgres://...`: a `PostgresStore` on that DSN; the query
      parameter `table_prefix=` (not sent to the server) sets its table prefix.
    - `redis://...` or `rediss://...` (TLS): a `RedisStore`; the query parameter `prefix=`
      (not sent to the server) sets its key prefix.
    - `memory://`: a `MemoryStore` (this process only).

    Raises:
        UsageError: The scheme is none of these, or a SQLite URL names no file.
    """
    if not isinstance(url, str):
        raise UsageError(f"a store URL is a string, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise UsageError(f"a store URL starts with its scheme; use {_SCHEMES}")
    if scheme == "memory":
        return MemoryStore()
    if scheme == "sqlite":
        return _sqlite(rest)
    if scheme in ("postgresql", "postgres"):
        from plait.stores.postgres import PostgresStore

        dsn, prefix = _take_param(url, "table_prefix")
        return PostgresStore(dsn) if prefix is None else PostgresStore(dsn, table_prefix=prefix)
    if scheme in ("redis", "rediss"):
        from plait.stores.redis import RedisStore

        address, prefix = _take_param(url, "prefix")
        return RedisStore(address) if prefix is None else RedisStore(address, prefix=prefix)
    raise UsageError(f"unknown store URL scheme {scheme[:40]!r}; use {_SCHEMES}")


def _sqlite(rest: str) -> Store:
    """Open `sqlite:///<path>` (the part after `://` is `/<path>`; `//abs` is absolute)."""
    if not rest.startswith("/") or rest in ("/", "//"):
        raise UsageError(
            "a SQLite store URL names a file: sqlite:///relative/path.db or "
            "sqlite:////absolute/path.db"
        )
    from plait.stores.sqlite import SqliteStore

    return SqliteStore(rest[1:])


def _take_param(url: str, name: str) -> tuple[str, str | None]:
    """Return `url` without the query parameter `name`, and that parameter's value."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    values = [v for k, v in query if k == name]
    if not values:
        return url, None
    kept = urlencode([(k, v) for k, v in query if k != name])
    return urlunsplit(parts._replace(query=kept)), values[-1]
