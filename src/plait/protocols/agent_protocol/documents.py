"""The Agent Protocol's own records: JSON documents of the user's, in the server's store,
changed by compare-and-set.

A store cannot list its records, so what the protocol lists (assistants, store items) is
kept in documents a user reads whole: `<user>/ap/<kind>` session records of the server's
store, beside the user's runs and sessions (`plait.server.caller`). A thread and its runs
have documents of their own (`plait.protocols.agent_protocol.thread_records`), so a run
reads and writes only its thread's. Each change reads the document, edits it and writes
it back (as compact JSON) only if nobody wrote it in between (else it reads it again), so
processes sharing the store keep one document; an edit that changes nothing writes
nothing. A change may start from a `Snapshot` of the document the caller has (`seen`,
such as `last`, what that `Document` last read or wrote): its first attempt then reads
nothing, and stands only if it writes, at that version; else the edit is applied again
to the document as stored. Within a process, changes of one document wait for each
other, so many requests at once do not wear out each other's attempts. What the server's
workers share whatever the user (the crons they fire) is a `SharedDocument`, whose key
no user's can be (a user id has no `#`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import pydantic_core

from plait.errors import SessionConflict
from plait.server.caller import Caller
from plait.stores.base import GuardedStore, Store

__all__ = ["Document", "SharedDocument", "Snapshot", "now"]

_T = TypeVar("_T")
_ATTEMPTS = 20  # writes tried when other processes keep changing the same document first


@dataclass(slots=True)
class _Turns:
    """The changes of one document under way in one event loop: the lock they take turns
    with, and how many of them hold or wait for it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    changes: int = 0


#: The changes under way per event loop, store and document (kept while there are any).
_TURNS: dict[tuple[int, int, str], _Turns] = {}


def now() -> str:
    """Return this moment as the protocol writes times: ISO 8601, UTC."""
    return datetime.now(UTC).isoformat()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A document as read: its stored bytes and version (`b"{}"` and 0: never written)."""

    stored: bytes
    version: int

    def value(self) -> dict[str, Any]:
        """Return the document read (a new object at each call)."""
        return dict(pydantic_core.from_json(self.stored))


class Document:
    """The document `kind` of the caller's user (a JSON object; `{}` before any write)."""

    def __init__(self, who: Caller, kind: str) -> None:
        self._raw: Store = who.server.store
        self._store = GuardedStore(self._raw)
        self._key = f"{who.user}/ap/{kind}"
        self.last: Snapshot | None = None
        """The document as this object last read (`snapshot`) or wrote it (`change`)."""

    async def _ready(self) -> None:
        """Make the document readable (a kind kept elsewhere before moves here first)."""

    async def read(self) -> dict[str, Any]:
        """Return the document as stored."""
        await self._ready()
        found = await self._store.get_session(self._key)
        return {} if found is None else dict(pydantic_core.from_json(found))

    async def snapshot(self) -> Snapshot:
        """Return the document as stored, with its version (to start a `change` from)."""
        await self._ready()
        return await self._snapshot()

    async def _snapshot(self) -> Snapshot:
        record = await self._store.get_session_record(self._key)
        found = (
            Snapshot(b"{}", 0) if record is None else Snapshot(bytes(record.data), record.version)
        )
        self.last = found
        return found

    async def delete(self) -> None:
        """Delete the document (a read then finds `{}`)."""
        await self._ready()
        await self._store.delete_session(self._key)

    async def change(
        self, edit: Callable[[dict[str, Any]], _T], seen: Snapshot | None = None
    ) -> _T:
        """Apply `edit` to the document (in place) and write it; return what `edit` returns.
        `seen`: the document as the caller has it, the first attempt's start, which stands
        only if it writes the document still at that version (an edit that raises or
        changes nothing there is applied again to the document as stored).

        An `edit` that raises leaves the document as it was.

        Raises:
            SessionConflict: Others kept changing the document first, every time.
        """
        await self._ready()
        at = (id(asyncio.get_running_loop()), id(self._raw), self._key)
        turns = _TURNS.get(at)
        if turns is None:
            turns = _TURNS[at] = _Turns()
        turns.changes += 1
        try:
            async with turns.lock:
                return await self._change(edit, seen)
        finally:
            turns.changes -= 1
            if not turns.changes:
                del _TURNS[at]

    async def _change(self, edit: Callable[[dict[str, Any]], _T], seen: Snapshot | None) -> _T:
        last: SessionConflict | None = None
        for _ in range(_ATTEMPTS):
            given, seen = seen, None
            found = given if given is not None else await self._snapshot()
            data = found.value()
            try:
                result = edit(data)
            except Exception:
                if given is None:
                    raise
                continue  # decided on the snapshot given: decide on the document as stored
            written = pydantic_core.to_json(data)
            if written == found.stored:  # nothing changed: as if edited just as it was read
                if given is None:
                    return result
                continue  # likewise
            try:
                version = await self._store.put_session(
                    self._key, written, expected_version=found.version
                )
            except SessionConflict as conflict:
                last = conflict
                continue
            self.last = Snapshot(written, version)
            return result
        assert last is not None
        raise last


class SharedDocument(Document):
    """The server-wide document `kind` (`#ap/<kind>`) of `store`, changed as a `Document`."""

    def __init__(self, store: Store, kind: str) -> None:
        self._raw = store
        self._store = GuardedStore(store)
        self._key = f"#ap/{kind}"
