"""Indexes of sessions, written by group commit.

A store keeps sessions by id but cannot list them, so an index is kept beside them: one
session record, `{"sessions": {session id: ISO time of its last write}}`, updated by
compare-and-set (`runner.sessions.list()` and `GET /v1/sessions` read it). The entries are
in write order: a session written again moves to the end. Every turn of every session listed
in one index changes it, so concurrent turns would all retry against each other. In one
process they do not: the changes that arrive while the index is being written wait, and the
next write takes all of them at once. Processes sharing the store still retry against each
other's writes, a few at a time. A process remembers the indexes it wrote last (its 64 most
recent): the next write starts from there, and reads the index again only when another
process wrote it since (its compare-and-set then fails). It also keeps each entry's JSON
text, so that a write encodes only the entries that changed.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import OrderedDict
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any

from plait.errors import SessionConflict, StoreError
from plait.stores.base import SessionRecord, SessionStore

__all__ = ["SessionIndex", "decode_index"]

_ATTEMPTS = 50
_KNOWN = 64  # indexes remembered


@dataclass(slots=True)
class _Batch:
    """Index changes written together: session id -> ISO time, or None to remove it."""

    changes: dict[str, str | None] = field(default_factory=dict)
    written: bool = False
    error: StoreError | None = None


@dataclass(slots=True)
class _Known:
    """An index as this process last wrote (or read) it: its version, its entries and
    each entry's JSON text (`"<session id>": "<time>"`), in the same order."""

    version: int
    entries: dict[str, str]
    parts: dict[str, str]

    @classmethod
    def read(cls, found: SessionRecord | None) -> _Known:
        """Return the known index of a stored one (None: no index yet)."""
        entries = decode_index(found)
        parts = {sid: f"{json.dumps(sid)}: {json.dumps(at)}" for sid, at in entries.items()}
        return cls(0 if found is None else found.version, entries, parts)

    def apply(self, changes: dict[str, str | None]) -> bool:
        """Apply `changes` to the entries and their JSON (a written session moves to the
        end); return whether anything changed."""
        entries, parts = self.entries, self.parts
        changed = False
        for session_id, stamp in changes.items():
            if stamp is None:
                if entries.pop(session_id, None) is not None:
                    del parts[session_id]
                    changed = True
            elif entries.get(session_id) != stamp or next(reversed(entries)) != session_id:
                entries.pop(session_id, None)
                parts.pop(session_id, None)
                entries[session_id] = stamp
                parts[session_id] = _part(session_id, stamp)
                changed = True
        return changed

    def encode(self) -> bytes:
        """Return the index's JSON, as `json.dumps({"sessions": entries})` writes it."""
        return ('{"sessions": {' + ", ".join(self.parts.values()) + "}}").encode()


def _part(session_id: str, stamp: str) -> str:
    return f"{encode_basestring_ascii(session_id)}: {encode_basestring_ascii(stamp)}"


@dataclass(slots=True)
class _Pending:
    """One index in this process: the lock of its writer and the batch it fills."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    batch: _Batch = field(default_factory=_Batch)
    waiting: int = 0


class SessionIndex:
    """Session indexes written by this process, each a session record of a store (see the
    module's docstring); share one among the writers of the same indexes."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}
        # each index as this process last wrote it, by key (the most recent only): the next
        # write starts from it instead of reading the index again
        self._known: OrderedDict[str, _Known] = OrderedDict()

    async def update(
        self, store: SessionStore, key: str, session_id: str, stamp: str | None
    ) -> None:
        """List `session_id` in the index kept under `key` as written at `stamp` (None:
        unlist it); return once a write that holds the change is stored.

        Raises:
            StoreError: The store failed, or the index kept changing under this process.
        """
        index = self._pending.get(key)
        if index is None:
            index = self._pending[key] = _Pending()
        batch = index.batch
        batch.changes[session_id] = stamp
        index.waiting += 1
        try:
            async with index.lock:
                if batch.written:
                    return
                if batch.error is not None:
                    raise StoreError(batch.error.message, operation=batch.error.operation)
                if index.batch is batch:
                    index.batch = _Batch()  # what arrives from now on is written next
                try:
                    await self._write(store, key, batch.changes)
                except StoreError as exc:
                    batch.error = exc
                    raise
                batch.written = True
        finally:
            index.waiting -= 1
            if index.waiting == 0 and self._pending.get(key) is index:
                del self._pending[key]

    async def _write(self, store: SessionStore, key: str, changes: dict[str, str | None]) -> None:
        """Apply `changes` to the stored index: compare-and-set, retried on conflict."""
        known = self._known.pop(key, None)
        for attempt in range(_ATTEMPTS):
            if known is None:
                known = _Known.read(await store.get_session_record(key))
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
            f"the session index '{key}' kept changing; session {listed}"
            f"{', ...' if len(changes) > 3 else ''} was saved but is not listed yet (it will "
            "be after its next turn)",
            operation="writing the session index",
        )

    def _remember(self, key: str, known: _Known) -> None:
        self._known[key] = known
        if len(self._known) > _KNOWN:
            self._known.popitem(last=False)


def decode_index(found: SessionRecord | None) -> dict[str, str]:
    """Return the index's {session id: ISO time of the last write}, in write order."""
    if found is None:
        return {}
    document: Any = json.loads(found.data)
    sessions = document.get("sessions") if isinstance(document, dict) else None
    return dict(sessions) if isinstance(sessions, dict) else {}
