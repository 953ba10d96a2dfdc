"""JSON documents in the server's store that several workers change at once.

A document is a session record holding one JSON object. `change_document` reads it, lets an
edit change it, and writes it back only if nobody wrote it in between (the store's
compare-and-set, `put_session(expected_version=...)`), else reads it again: processes that
share the store (one SQLite file, PostgreSQL, Redis) never lose each other's changes.

In one process, the changes of one document are applied together: while one write of it is
under way, the edits that arrive wait, and the next write applies all of them in the order
they came, each seeing the document as the ones before it left it (one read and one write
for many edits, so a document that every request of a busy user changes does not become a
queue of round trips).
"""

from __future__ import annotations

import asyncio
import json
import random
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from plait._util.json import plain_json
from plait.errors import SessionConflict
from plait.stores.base import GuardedStore, Store

__all__ = ["change_document", "create_document", "read_document"]

_T = TypeVar("_T")
_ATTEMPTS = 200  # writes tried while other processes keep changing the document first
_Edit = tuple[Callable[[dict[str, Any]], Any], Callable[[Any], bool], "asyncio.Future[Any]"]


class _Queue:
    """The edits of one document waiting for its next write, and the lock of its writes."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.pending: list[_Edit] = []


_QUEUES: weakref.WeakValueDictionary[tuple[int, int, str], _Queue] = weakref.WeakValueDictionary()


def _queue(store: Store, key: str) -> _Queue:
    at = (id(asyncio.get_running_loop()), id(store), key)
    found = _QUEUES.get(at)
    if found is None:
        found = _QUEUES[at] = _Queue()
    return found


async def read_document(store: Store, key: str) -> dict[str, Any]:
    """Return the document `key` of `store` (`{}` when there is none)."""
    found = await GuardedStore(store).get_session(key)
    return {} if found is None else dict(json.loads(found))


async def create_document(
    store: Store, key: str, data: dict[str, Any], *, ttl: float | None = None
) -> bool:
    """Write `data` as the document `key` of `store` if there is none (kept `ttl` seconds;
    None: for good), in one compare-and-set write that reads nothing; return False, having
    written nothing, when the document exists (change it with `change_document`).

    Raises:
        StoreError: The store failed.
    """
    try:
        await GuardedStore(store).put_session(key, plain_json(data), ttl=ttl, expected_version=0)
    except SessionConflict:
        return False
    return True


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
    False of that, the edit needs no write (it only looked). An edit that raises has no
    effect; its error is raised here.

    Raises:
        SessionConflict: Other processes changed the document first, every time.
        StoreError: The store failed.
    """
    queue = _queue(store, key)
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    queue.pending.append((edit, write, done))
    async with queue.lock:
        if not done.done():
            batch, queue.pending = queue.pending, []
            try:
                await _apply(GuardedStore(store), key, batch, ttl)
            except BaseException as exc:
                for _, _, waiting in batch:
                    if not waiting.done():
                        waiting.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
    result: _T = done.result()
    return result


async def _apply(store: GuardedStore, key: str, batch: list[_Edit], ttl: float | None) -> None:
    """Apply the edits of `batch` in order in one write (retried on a conflict), and give
    each its result."""
    last: SessionConflict | None = None
    for attempt in range(_ATTEMPTS):
        record = await store.get_session_record(key)
        base = None if record is None else record.data
        data, results = _edited(base, batch)
        changed = any(
            not isinstance(result, _Failed) and write(result)
            for (_, write, _), result in zip(batch, results, strict=True)
        )
        if changed:
            try:
                await store.put_session(
                    key,
                    plain_json(data),
                    ttl=ttl,
                    expected_version=0 if record is None else record.version,
                )
            except SessionConflict as conflict:
                last = conflict
                await asyncio.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
                continue
        for (_, _, waiting), result in zip(batch, results, strict=True):
            if isinstance(result, _Failed):
                waiting.set_exception(result.error)
            else:
                waiting.set_result(result)
        return
    assert last is not None
    raise last


class _Failed:
    """What an edit that raised gave: its error."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def _edited(base: bytes | None, batch: list[_Edit]) -> tuple[dict[str, Any], list[Any]]:
    """Return the document stored as `base` with the edits of `batch` applied in order, and
    what each returned (`_Failed` for one that raised).

    An edit that raises leaves the document as it was before it: the document is decoded
    again and the edits before it are applied again (edits are functions of the document,
    as a retried compare-and-set already needs), so a batch encodes nothing until its
    write, however large the document."""
    data: dict[str, Any] = {} if base is None else dict(json.loads(base))
    results: list[Any] = []
    for edit, _, _ in batch:
        try:
            results.append(edit(data))
        except Exception as exc:
            results.append(_Failed(exc))
            data = {} if base is None else dict(json.loads(base))
            for at, (again, _, _) in enumerate(batch[: len(results) - 1]):
                if not isinstance(results[at], _Failed):
                    results[at] = again(data)
    return data, results
