"""Where a thread and its runs are kept: a document each, and a list of the user's threads.

Each thread has two documents (`documents.Document`) under its user's prefix in the server's
store: `<user>/ap/thread/<thread id>`, its record (metadata, times, latest run, the
checkpoints of its history; `{}`: no such thread), and `<user>/ap/runs/<thread id>`, the
records of its runs by run id, in the order they were made (the thread's queue is there
too, `multitask`). So a run reads and writes its own thread's documents only: its cost
does not grow with the user's other threads and runs. A thread id holds no "/"
(`plait.server.users.id_problem`), so no key of one thread is another's.

What lists the user's threads (`threads.search`, `count`, `runs.cancel_many` without a
thread) reads `<user>/ap/thread-list`, `{"threads": {thread id: created_at}}` in the order
they were made. A thread is listed before its record is written and unlisted after it is
deleted, so every thread is listed (a listed id without a record is skipped). The list is
written by group commit (`plait.stores.session_index.GroupIndex`): threads made at once
in one process are listed in one write.

Before, a user's threads and runs were two documents, `<user>/ap/threads` and
`<user>/ap/runs` (a record per thread, a record per run). The first time a process touches
a user's threads, it moves what those hold into the documents above, each written only if
it is not there yet, then deletes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any

from plait._util.joined import JoinedParts
from plait._util.per_object import PerObject
from plait.errors import SessionConflict
from plait.protocols.agent_protocol.documents import Document
from plait.server.caller import Caller
from plait.stores.base import GuardedStore, SessionRecord, Store
from plait.stores.session_index import GroupIndex

__all__ = ["list_thread", "runs_document", "thread_document", "thread_ids", "unlist_thread"]

_LIST = "thread-list"


@dataclass(slots=True)
class _Listed:
    """A thread list as this process last wrote (or read) it, with each entry's JSON text
    kept in joined blocks (`plait._util.joined`: a write encodes only the entries that
    changed, and joins again only their blocks)."""

    version: int
    threads: dict[str, str] = field(default_factory=dict)
    parts: JoinedParts = field(default_factory=JoinedParts)

    @classmethod
    def read(cls, found: SessionRecord | None) -> _Listed:
        listed = cls(0 if found is None else found.version)
        document: Any = {} if found is None else json.loads(found.data)
        threads = document.get("threads") if isinstance(document, dict) else None
        for thread_id, made in (threads if isinstance(threads, dict) else {}).items():
            listed.threads[thread_id] = str(made)
            listed.parts.set(thread_id, _part(thread_id, str(made)))
        return listed

    def apply(self, changes: dict[str, str | None]) -> bool:
        changed = False
        for thread_id, made in changes.items():
            if made is None:
                if self.threads.pop(thread_id, None) is not None:
                    self.parts.pop(thread_id)
                    changed = True
            elif thread_id not in self.threads:
                self.threads[thread_id] = made
                self.parts.set(thread_id, _part(thread_id, made))
                changed = True
        return changed

    def encode(self) -> bytes:
        return b'{"threads": {' + self.parts.joined() + b"}}"


def _part(key: str, value: str) -> str:
    return f"{encode_basestring_ascii(key)}: {encode_basestring_ascii(value)}"


class _Kept:
    """What this process keeps per store: the writers of its thread lists (one per event
    loop, as their locks are), and the users whose old documents it has moved (or found
    none of)."""

    def __init__(self) -> None:
        self._lists: dict[int, GroupIndex[str]] = {}
        self.moved: set[str] = set()

    @property
    def lists(self) -> GroupIndex[str]:
        """Return the thread lists' writer of the running event loop."""
        loop = id(asyncio.get_running_loop())
        found = self._lists.get(loop)
        if found is None:
            found = self._lists[loop] = GroupIndex(_Listed.read, "thread")
        return found


_kept: PerObject[Store, _Kept] = PerObject(_Kept)  # what this process keeps of each store


class _ThreadDocument(Document):
    """A document of one thread (its record, or its runs'); the user's old documents are
    moved out first."""

    def __init__(self, who: Caller, kind: str) -> None:
        super().__init__(who, kind)
        self._user = who.user
        # (a user's old documents, once moved, are never back)
        self._moved = who.user in _kept(self._raw).moved

    async def _ready(self) -> None:
        if self._user not in _kept(self._raw).moved:
            await _move(self._raw, self._user)
        self._moved = True


def thread_document(who: Caller, thread_id: str) -> Document:
    """Return the document of the caller's thread `thread_id` (`{}`: no such thread)."""
    return _ThreadDocument(who, f"thread/{thread_id}")


def runs_document(who: Caller, thread_id: str) -> Document:
    """Return the document of the runs of the caller's thread `thread_id` (run id ->
    record)."""
    return _ThreadDocument(who, f"runs/{thread_id}")


async def list_thread(who: Caller, thread_id: str, created_at: str) -> None:
    """List the caller's thread `thread_id` (made at `created_at`) if it is not yet."""
    store = who.server.store
    await _kept(store).lists.update(
        GuardedStore(store), f"{who.user}/ap/{_LIST}", thread_id, created_at
    )


async def unlist_thread(who: Caller, thread_id: str) -> None:
    """Take the caller's thread `thread_id` off the list."""
    store = who.server.store
    await _kept(store).lists.update(GuardedStore(store), f"{who.user}/ap/{_LIST}", thread_id, None)


async def thread_ids(who: Caller) -> list[str]:
    """Return the ids of the caller's listed threads, in the order they were made."""
    store = who.server.store
    if who.user not in _kept(store).moved:
        await _move(store, who.user)
    found = await GuardedStore(store).get_session_record(f"{who.user}/ap/{_LIST}")
    return list(_Listed.read(found).threads)


#: A lock per user while a process moves the user's old documents.
_MOVING: weakref.WeakValueDictionary[tuple[int, str], asyncio.Lock] = weakref.WeakValueDictionary()


async def _move(raw: Store, user: str) -> None:
    """Move the user's old `threads` and `runs` documents into a document per thread (each
    written only if it is not there yet), list the threads, then delete the old ones."""
    at = (id(raw), user)
    lock = _MOVING.get(at)
    if lock is None:
        lock = _MOVING[at] = asyncio.Lock()
    async with lock:
        kept = _kept(raw)
        if user in kept.moved:
            return
        store = GuardedStore(raw)
        old_threads, old_runs = f"{user}/ap/threads", f"{user}/ap/runs"
        threads = _old(await store.get_session(old_threads))
        runs = _old(await store.get_session(old_runs))
        by_thread: dict[str, dict[str, Any]] = {}
        for run_id, record in runs.items():
            by_thread.setdefault(str(record.get("thread_id")), {})[run_id] = record
        for thread_id, records in by_thread.items():
            await _put_new(store, f"{user}/ap/runs/{thread_id}", records)
        listing = f"{user}/ap/{_LIST}"
        for thread_id, record in threads.items():
            made = str(record.get("created_at", ""))
            await kept.lists.update(store, listing, thread_id, made)
            await _put_new(store, f"{user}/ap/thread/{thread_id}", record)
        for key in (old_threads, old_runs) if threads or runs else ():
            await store.delete_session(key)
        kept.moved.add(user)


def _old(found: bytes | None) -> dict[str, Any]:
    data: Any = {} if found is None else json.loads(found)
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


async def _put_new(store: GuardedStore, key: str, document: dict[str, Any]) -> None:
    """Write `document` under `key` unless something is there already."""
    with contextlib.suppress(SessionConflict):  # moved already, and maybe changed since
        await store.put_session(key, json.dumps(document).encode(), expected_version=0)
