"""Long-term memory: what users said in earlier sessions, searched by words.

`MemoryService` is the protocol (`add`, `search`, `delete`, all coroutines);
`SqliteMemoryService(path)` (FTS5) and `PostgresMemoryService(dsn)` (PostgreSQL full-text
search) are its backends, imported on first use. `RecallTool(service)` is the tool
`recall(query)` that searches the memories of the run's user (`session_values["user_id"]`);
`save_turns(service)` is the `Runner(after_run=[...])` callable that remembers each completed
run's turn. One user never sees another's memories. `plait.memory.conformance` holds the
checks every backend passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plait._util.lazy import lazy_exports
from plait.memory import limits
from plait.memory.base import MemoryItem, MemoryService, words
from plait.memory.limits import *  # noqa: F403 - the limits are part of the package's face
from plait.memory.recall import USER_ID, RecallTool
from plait.memory.turns import save_turns

if TYPE_CHECKING:
    from plait.memory.postgres import PostgresMemoryService
    from plait.memory.sqlite import SqliteMemoryService

__all__ = [
    "USER_ID",
    "MemoryItem",
    "MemoryService",
    "PostgresMemoryService",
    "RecallTool",
    "SqliteMemoryService",
    "save_turns",
    "words",
]
__all__ += limits.__all__

_BACKENDS = {
    "PostgresMemoryService": "plait.memory.postgres",
    "SqliteMemoryService": "plait.memory.sqlite",
}


__getattr__ = lazy_exports(__name__, _BACKENDS)
