"""Indexes of sessions (and of the server's runs), written by group commit.

A store keeps sessions by id but cannot list them, so an index is kept beside them: one
session record, `{"sessions": {session id: ISO time of its last write}, "agents": {session
id: the agent that wrote it}}`, updated by compare-and-set (`runner.sessions.list()` and
`GET /v1/sessions` read it). The entries are in write order: a session written again moves to
the end. Every turn of every session listed in one index changes it, so concurrent turns
would all retry against each other. In one process they do not: the changes that arrive
while the index is being written wait, and the next write takes all of them at once
(`GroupIndex`, which the server's index of runs uses too). Processes sharing the store still
retry against each other's writes, a few at a time. A process remembers the indexes it wrote
last (its 64 most recent): the next write starts from there, and reads the index again only
when another process wrote it since (its compare-and-set then fails). It also keeps each
entry's JSON text, in blocks with their joined text (`plait._util.joined`), so that a write
encodes only the entries that changed and joins again only their blocks.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any, Generic, Protocol, TypeVar

from plait._util.joined import JoinedParts
from plait.errors import SessionConflict, StoreError
from plait.stores.base import SessionRecord, SessionStore

__all__ = [
    "GroupIndex",
    "IndexDocument",
    "SessionEntry",
    "SessionIndex",
    "decode_agents",
    "decode_index",
]

_ATTEMPTS = 50
_KNOWN = 64  # indexes remembered

V = TypeVar("V")

#: A session's entry: the ISO time of its last write, and the agent that wrote it (or None).
SessionEntry = tuple[str, str | None]


class IndexDocument(Protocol[V]):
    """An index as a process last wrote (or read) it: its version, and how to change and
    encode it."""

    version: int

    def apply(self, changes: dict[str, V | None]) -> bool:
        """Apply `changes` (id -> entry, None: remove it); return whether anything changed."""
        ...

    def encode(self) -> bytes:
        """Return the stored bytes of the index."""
        ...


@dataclass(slots=True)
class _Batch(Generic[V]):
    """Index changes written together: id -> entry, or None to remove it; each caller's
    future in `waiting` is set once they are written (or failed: `error`)."""

    changes: dict[str, V | None] = field(default_factory=dict)
    waiting: list[asyncio.Future[None]] = field(default_factory=list)
    error: StoreError | None = None


@dataclass(slots=True)
class _Pending(Generic[V]):
    """One index in this process, written by a task of `loop`: the batch that fills while
    its writer is busy."""

    loop: asyncio.AbstractEventLoop
    batch: _Batch[V] = field(default_factory=_Batch)
    writer: asyncio.Future[None] | None = None


def _settle(batch: _Batch[V]) -> None:
    """Tell the callers waiting for `batch` that it was written, or raise in each the
    `StoreError` it failed with (`error`)."""
    error = batch.error
    for waiter in batch.waiting:
        if waiter.done():  # (cancelled: its caller left)
            continue
        if error is None:
            waiter.set_result(None)
        else:
            waiter.set_exception(StoreError(error.message, operation=error.operation))


class GroupIndex(Generic[V]):
    """Indexes kept as session records of a store, written by group commit with
    compare-and-set (see the module's docstring); share one among the writers of the same
    indexes in a process. `read` makes the document of a stored index (None: no index yet)."""

    def __init__(self, read: Callable[[SessionRecord | None], IndexDocument[V]], what: str):
        self._read = read
        self._what = what
        self._pending: dict[str, _Pending[V]] = {}
        # each index as this process last wrote it, by key (the most recent only): the next
        # write starts from it instead of reading the index again
        self._known: OrderedDict[str, IndexDocument[V]] = OrderedDict()

    async def update(self, store: SessionStore, key: str, item_id: str, entry: V | None) -> None:
        """Set the entry of `item_id` in the index kept under `key` (None: remove it);
        return once a write that holds the change is stored.

        The index's writer is a task of its own: it starts on the loop's next turn, so the
        changes made in this turn (by every run the loop is serving) are written together,
        and a caller that is cancelled while it waits leaves the others' changes to be
        written.

        Raises:
            StoreError: The store failed, or the index kept changing under this process.
        """
        await self.change(store, key, item_id, entry)

    def change(
        self, store: SessionStore, key: str, item_id: str, entry: V | None
    ) -> Awaitable[None]:
        """Make the change `update` makes, now; return what to await for its write (see
        `update`): the caller can do other work before it waits."""
        loop = asyncio.get_running_loop()
        index = self._pending.get(key)
        if index is None or index.loop is not loop:
            index = self._pending[key] = _Pending(loop)  # (one left by a loop that was closed)
        batch = index.batch
        batch.changes[item_id] = entry
        # the caller's own future, which only its caller's cancelling cancels
        waiter = loop.create_future()
        batch.waiting.append(waiter)
        if index.writer is None:
            index.writer = asyncio.ensure_future(self._flush(store, key, index))
        return waiter

    async def _flush(self, store: SessionStore, key: str, index: _Pending[V]) -> None:
        """Write the index's batches, one after the other, until none is waiting; if the
        writer is cancelled (its loop is closing), what it holds fails with a `StoreError`."""
        batch: _Batch[V] | None = None
        try:
            while index.batch.changes:
                batch, index.batch = index.batch, _Batch()
                try:
                    await self._write(store, key, batch.changes)
                except StoreError as exc:
                    batch.error = exc
                except Exception as exc:  # the waiting callers hear of it as a StoreError
                    batch.error = self._failed(key, f"{type(exc).__name__}: {exc}")
                _settle(batch)
                batch = None
        finally:
            for left in (batch, index.batch):  # none, unless the writer was cancelled
                if left is not None and left.changes:
                    left.error = left.error or self._failed(key, "its writer was cancelled")
                    _settle(left)
            index.writer = None
            if self._pending.get(key) is index:
                del self._pending[key]

    def _failed(self, key: str, why: str) -> StoreError:
        return StoreError(
            f"writing the {self._what} index '{key}' failed: {why}",
            operation=f"writing the {self._what} index",
        )

    async def _write(self, store: SessionStore, key: str, changes: dict[str, V | None]) -> None:
        """Apply `changes` to the stored index: compare-and-set, retried on conflict."""
        known = self._known.pop(key, None)
        for attempt in range(_ATTEMPTS):
            if known is None:
                known = self._read(await store.get_session_record(key))
            if not known.apply(changes):
                self._remember(key, known)
                return
            try:
                version = await store.put_session(
                    key, known.encode(), expected_version=known.version
                )
            except SessionConflict:  # written by another process (or app): read it again
                known = None
                await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                continue
            known.version = version
            self._remember(key, known)
            return
        listed = ", ".join(f"'{s}'" for s in list(changes)[:3])
        raise StoreError(
            f"the {self._what} index '{key}' kept changing; {self._what} {listed}"
            f"{', ...' if len(changes) > 3 else ''} was saved but is not listed yet (it will "
            "be after its next write)",
            operation=f"writing the {self._what} index",
        )

    def _remember(self, key: str, known: IndexDocument[V]) -> None:
        self._known[key] = known
        if len(self._known) > _KNOWN:
            self._known.popitem(last=False)


@dataclass(slots=True)
class _Sessions:
    """A session index: its version, its entries (session id -> time) and agents (session
    id -> agent), and each entry's JSON text, in the same order."""

    version: int
    entries: dict[str, str]
    agents: dict[str, str]
    parts: JoinedParts
    agent_parts: JoinedParts

    @classmethod
    def read(cls, found: SessionRecord | None) -> _Sessions:
        """Return the known index of a stored one (None: no index yet)."""
        document = _document(found)
        entries, agents = _map(document, "sessions"), _map(document, "agents")
        return cls(
            0 if found is None else found.version,
            entries,
            agents,
            _joined(entries),
            _joined(agents),
        )

    def apply(self, changes: dict[str, SessionEntry | None]) -> bool:
        """Apply `changes` to the entries and their JSON (a written session moves to the
        end); return whether anything changed."""
        entries, parts = self.entries, self.parts
        changed = False
        for session_id, entry in changes.items():
            if entry is None:
                if entries.pop(session_id, None) is not None:
                    parts.pop(session_id)
                    changed = True
                if self.agents.pop(session_id, None) is not None:
                    self.agent_parts.pop(session_id)
                continue
            stamp, agent = entry
            if entries.get(session_id) != stamp or next(reversed(entries)) != session_id:
                entries.pop(session_id, None)
                entries[session_id] = stamp
                parts.set(session_id, _part(session_id, stamp), last=True)
                changed = True
            if agent is not None and self.agents.get(session_id) != agent:
                self.agents[session_id] = agent
                self.agent_parts.set(session_id, _part(session_id, agent))
                changed = True
        return changed

    def encode(self) -> bytes:
        """Return the index's JSON, as `json.dumps({"sessions": ..., "agents": ...})`
        writes it."""
        sessions, agents = self.parts.joined(), self.agent_parts.joined()
        return b"".join((b'{"sessions": {', sessions, b'}, "agents": {', agents, b"}}"))


def _joined(entries: dict[str, str]) -> JoinedParts:
    parts = JoinedParts()
    for key, value in entries.items():
        parts.set(key, _part(key, value))
    return parts


def _part(key: str, value: str) -> str:
    return f"{encode_basestring_ascii(key)}: {encode_basestring_ascii(value)}"


class SessionIndex(GroupIndex[SessionEntry]):
    """Session indexes written by this process (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__(_Sessions.read, "session")


def _document(found: SessionRecord | None) -> dict[str, Any]:
    if found is None:
        return {}
    document: Any = json.loads(found.data)
    return document if isinstance(document, dict) else {}


def _map(document: dict[str, Any], name: str) -> dict[str, str]:
    found = document.get(name)
    return dict(found) if isinstance(found, dict) else {}


def decode_index(found: SessionRecord | None) -> dict[str, str]:
    """Return the index's {session id: ISO time of the last write}, in write order."""
    return _map(_document(found), "sessions")


def decode_agents(found: SessionRecord | None) -> dict[str, str]:
    """Return the index's {session id: the agent that last wrote it} (sessions written by a
    plait that did not say are left out)."""
    return _map(_document(found), "agents")
