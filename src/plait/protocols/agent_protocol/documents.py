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
from typing import Any, NamedTuple, TypeVar

import pydantic_core

from plait._util.clock import iso_now
from plait._util.json import plain_json
from plait.errors import SessionConflict
from plait.server.caller import Caller
from plait.stores.base import GuardedStore, Store

__all__ = ["Document", "SharedDocument", "Snapshot", "now", "read_document"]

_T = TypeVar("_T")
_ATTEMPTS = 20  # writes tried when other processes keep changing the same document first


#: The changes of one document under way per event loop, store and document (kept while
#: there are any): the futures of those waiting for their turn, in order (the first change
#: has its turn at once, without waiting).
_TURNS: dict[tuple[asyncio.AbstractEventLoop, int, str], list[asyncio.Future[None]]] = {}


def now() -> str:
    """Return this moment as the protocol writes times: ISO 8601, UTC."""
    return iso_now()


class Snapshot(NamedTuple):
    """A document as read: its stored bytes and version (`b"{}"` and 0: never written)."""

    stored: bytes
    version: int

    def value(self) -> dict[str, Any]:
        """Return the document read (a new object at each call)."""
        return dict(pydantic_core.from_json(self.stored))


async def read_document(who: Caller, kind: str) -> dict[str, Any]:
    """Return the document `kind` of the caller's user as stored: `Document(who,
    kind).read()` (of a kind that is not kept elsewhere first), without the object."""
    found = await GuardedStore(who.server.store).get_session(f"{who.user}/ap/{kind}")
    return {} if found is None else dict(pydantic_core.from_json(found))


class Document:
    """The document `kind` of the caller's user (a JSON object; `{}` before any write)."""

    _moved = True  # readable as it is (False: `_ready` may have something to do first)

    def __init__(self, who: Caller, kind: str) -> None:
        self._raw: Store = who.server.store
        self._store = GuardedStore(self._raw)
        self._key = f"{who.user}/ap/{kind}"
        self.last: Snapshot | None = None
        """The document as this object last read (`snapshot`) or wrote it (`change`)."""

    async def _ready(self) -> None:
        """Make the document readable (a kind kept elsewhere before moves here first), and
        set `_moved` once it is: it then stays readable."""

    async def read(self) -> dict[str, Any]:
        """Return the document as stored."""
        if not self._moved:
            await self._ready()
        found = await self._store.get_session(self._key)
        return {} if found is None else dict(pydantic_core.from_json(found))

    async def snapshot(self) -> Snapshot:
        """Return the document as stored, with its version (to start a `change` from)."""
        if not self._moved:
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
        if not self._moved:
            await self._ready()
        await self._store.delete_session(self._key)

    async def create(self, value: dict[str, Any]) -> bool:
        """Write `value` as the document if it was never written (or was deleted), as a
        `change` of `{}` into `value` would; return whether it was (else nothing is
        written)."""
        if not self._moved:
            await self._ready()
        written = plain_json(value)
        try:
            version = await self._store.put_session(self._key, written, expected_version=0)
        except SessionConflict:
            return False
        self.last = Snapshot(written, version)
        return True

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
        if not self._moved:
            await self._ready()
        loop = asyncio.get_running_loop()
        at = (loop, id(self._raw), self._key)
        waiting = _TURNS.get(at)
        if waiting is None:  # nobody else changes it: the turn is this change's at once
            _TURNS[at] = waiting = []
        else:
            await _wait_turn(loop, at, waiting)
        try:
            last: SessionConflict | None = None
            for _ in range(_ATTEMPTS):
                given, seen = seen, None
                found = given if given is not None else await self._snapshot()
                data = dict(pydantic_core.from_json(found.stored))  # (`found.value()`)
                try:
                    result = edit(data)
                except Exception:
                    if given is None:
                        raise
                    continue  # decided on the snapshot given: decide on the document as stored
                written = plain_json(data)
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
        finally:
            if waiting:
                _pass_turn(at, waiting)
            else:  # nobody waits: the document's entry goes
                del _TURNS[at]


async def _wait_turn(
    loop: asyncio.AbstractEventLoop,
    at: tuple[asyncio.AbstractEventLoop, int, str],
    waiting: list[asyncio.Future[None]],
) -> None:
    """Wait until the changes of document `at` before this one are done (`waiting`: the
    futures of those waiting; this one's is added last)."""
    turn: asyncio.Future[None] = loop.create_future()
    waiting.append(turn)
    try:
        await turn
    except BaseException:
        if turn.done() and not turn.cancelled():  # given the turn as it was cancelled
            _pass_turn(at, waiting)
        elif turn in waiting:
            waiting.remove(turn)
        raise


def _pass_turn(
    at: tuple[asyncio.AbstractEventLoop, int, str], waiting: list[asyncio.Future[None]]
) -> None:
    """End the turn of a change of document `at`: the first change still waiting has its
    turn, or, with none, the document's entry goes."""
    while waiting:
        turn = waiting.pop(0)
        if not turn.done():
            turn.set_result(None)
            return
    del _TURNS[at]


class SharedDocument(Document):
    """The server-wide document `kind` (`#ap/<kind>`) of `store`, changed as a `Document`."""

    def __init__(self, store: Store, kind: str) -> None:
        self._raw = store
        self._store = GuardedStore(store)
        self._key = f"#ap/{kind}"
