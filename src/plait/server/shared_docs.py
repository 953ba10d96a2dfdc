"""JSON documents in the server's store that several workers change at once.

A document is a session record holding one JSON object. `change_document` reads it, lets an
edit change it, and writes it back only if nobody wrote it in between (the store's
compare-and-set, `put_session(expected_version=...)`), else reads it again: processes that
share the store (one SQLite file, PostgreSQL, Redis) never lose each other's changes. In one
process, the changes of one document wait for each other (a lock per event loop, store and
key), so many requests at once do not wear out each other's attempts.
"""

from __future__ import annotations

import asyncio
import json
import random
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from plait.errors import SessionConflict
from plait.stores.base import GuardedStore, Store

__all__ = ["change_document", "read_document"]

_T = TypeVar("_T")
_ATTEMPTS = 200  # writes tried while other processes keep changing the document first
_LOCKS: weakref.WeakValueDictionary[tuple[int, int, str], asyncio.Lock] = (
    weakref.WeakValueDictionary()
)


def _lock(store: Store, key: str) -> asyncio.Lock:
    at = (id(asyncio.get_running_loop()), id(store), key)
    found = _LOCKS.get(at)
    if found is None:
        found = _LOCKS[at] = asyncio.Lock()
    return found


async def read_document(store: Store, key: str) -> dict[str, Any]:
    """Return the document `key` of `store` (`{}` when there is none)."""
    found = await GuardedStore(store).get_session(key)
    return {} if found is None else dict(json.loads(found))


async def change_document(
    store: Store,
    key: str,
    edit: Callable[[dict[str, Any]], _T],
    *,
    ttl: float | None = None,
    write: Callable[[_T], bool] = lambda _: True,
) -> _T:
    """Apply `edit` to the document `key` of `store` (in place) and write it back atomically
    (kept `ttl` seconds; None: for good); return what `edit` returned. When `write` says
    False of that, nothing is written (the edit only looked).

    Raises:
        SessionConflict: Other processes changed the document first, every time.
        StoreError: The store failed.
    """
    guarded = GuardedStore(store)
    last: SessionConflict | None = None
    async with _lock(store, key):
        for attempt in range(_ATTEMPTS):
            record = await guarded.get_session_record(key)
            data: dict[str, Any] = {} if record is None else dict(json.loads(record.data))
            result = edit(data)
            if not write(result):
                return result
            try:
                await guarded.put_session(
                    key,
                    json.dumps(data, separators=(",", ":")).encode(),
                    ttl=ttl,
                    expected_version=0 if record is None else record.version,
                )
                return result
            except SessionConflict as conflict:
                last = conflict
                await asyncio.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
    assert last is not None
    raise last
