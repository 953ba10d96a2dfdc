"""Stores for checkpoints and sessions: memory, SQLite (the default), PostgreSQL and Redis.

The backends other than `MemoryStore` are imported on first use; PostgreSQL and Redis need
`pip install "plait[postgres]"` / `"plait[redis]"`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
]

_BACKENDS = {
    "PostgresStore": "plait.stores.postgres",
    "RedisStore": "plait.stores.redis",
    "SqliteStore": "plait.stores.sqlite",
}


def __getattr__(name: str) -> Any:
    module = _BACKENDS.get(name)
    if module is None:
        raise AttributeError(f"module 'plait.stores' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
