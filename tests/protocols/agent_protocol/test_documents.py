"""A document change that starts from a snapshot the caller has: it stands only if it
writes the document still at that version; otherwise the edit is applied again to the
document as stored, so no change made in between is lost or decided on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from plait.protocols.agent_protocol.documents import Document
from plait.server.limits import ApiError
from plait.stores.memory import MemoryStore
from tests.protocols.agent_protocol.support import CountingStore


def _documents() -> tuple[Document, Document]:
    """Return two objects of one user's document `notes`, as two requests have it."""
    who: Any = SimpleNamespace(server=SimpleNamespace(store=MemoryStore()), user="ann")
    return Document(who, "notes"), Document(who, "notes")


async def test_a_change_from_a_stale_snapshot_is_made_on_the_document_as_stored() -> None:
    mine, theirs = _documents()
    await mine.change(lambda stored: stored.update(a=1))
    seen = mine.last
    await theirs.change(lambda stored: stored.update(b=2))  # written in between
    await mine.change(lambda stored: stored.update(c=3), seen)
    assert await mine.read() == {"a": 1, "b": 2, "c": 3}
    assert mine.last is not None and mine.last.value() == {"a": 1, "b": 2, "c": 3}


async def test_what_a_stale_snapshot_decides_is_decided_again_on_the_document() -> None:
    mine, theirs = _documents()
    seen = await mine.snapshot()  # no "free" yet

    def take(stored: dict[str, Any]) -> str:
        if "free" not in stored:
            raise ApiError(409, "not free")
        return str(stored["free"])

    await theirs.change(lambda stored: stored.update(free="yes"))
    assert await mine.change(take, seen) == "yes"  # refused on the snapshot, not as stored
    await theirs.change(lambda stored: stored.update(free="no"))
    assert await mine.change(take, mine.last) == "no"  # unchanged there: read again
    with pytest.raises(ApiError):
        await mine.change(lambda stored: take({}), None)


async def test_a_change_from_the_last_write_reads_nothing() -> None:
    store = CountingStore()
    who: Any = SimpleNamespace(server=SimpleNamespace(store=store), user="ann")
    mine = Document(who, "notes")
    await mine.change(lambda stored: stored.update(n=1))
    await mine.change(lambda stored: stored.update(n=stored["n"] + 1), mine.last)
    assert (store.reads["ann/ap/notes"], store.writes["ann/ap/notes"]) == (1, 2)
    assert await mine.read() == {"n": 2}


async def test_changes_at_once_in_one_process_take_turns_and_all_stand() -> None:
    store = CountingStore()
    who: Any = SimpleNamespace(server=SimpleNamespace(store=store), user="ann")

    async def add(n: int) -> None:
        await Document(who, "notes").change(lambda stored: stored.update({str(n): n}))

    await asyncio.gather(*(add(n) for n in range(20)))
    assert await Document(who, "notes").read() == {str(n): n for n in range(20)}
    assert store.writes["ann/ap/notes"] == 20  # each in its turn: no write met another


class _HeldStore(MemoryStore):
    """A memory store whose session writes wait until `go_on` is set (and call `then`
    soon after the first one, if set)."""

    def __init__(self) -> None:
        super().__init__()
        self.writing, self.go_on = asyncio.Event(), asyncio.Event()
        self.then: Callable[[], object] | None = None

    async def _put_session(
        self, session_id: str, data: bytes, ttl: float | None, expected_version: int | None
    ) -> int:
        self.writing.set()
        await self.go_on.wait()
        then, self.then = self.then, None
        if then is not None:  # before the writer's next waiter wakes
            asyncio.get_running_loop().call_soon(then)
        return await super()._put_session(session_id, data, ttl, expected_version)


async def test_a_change_cancelled_while_it_waits_leaves_the_turns_to_the_others() -> None:
    store = _HeldStore()
    who: Any = SimpleNamespace(server=SimpleNamespace(store=store), user="ann")
    document = Document(who, "notes")
    holder = asyncio.ensure_future(document.change(lambda stored: stored.update(held=1)))
    await store.writing.wait()  # the holder has its turn, and waits in its write
    waiter = asyncio.ensure_future(document.change(lambda stored: stored.update(cancelled=1)))
    later = asyncio.ensure_future(document.change(lambda stored: stored.update(later=1)))
    await asyncio.sleep(0)
    waiter.cancel()
    store.go_on.set()
    await asyncio.gather(holder, later)
    assert waiter.cancelled()
    assert await document.read() == {"held": 1, "later": 1}
    await document.change(lambda stored: stored.update(again=1))  # no turn is left held
    assert await document.read() == {"held": 1, "later": 1, "again": 1}


async def test_a_change_cancelled_as_it_is_given_its_turn_passes_it_on() -> None:
    store = _HeldStore()
    who: Any = SimpleNamespace(server=SimpleNamespace(store=store), user="ann")
    document = Document(who, "notes")
    holder = asyncio.ensure_future(document.change(lambda stored: stored.update(held=1)))
    await store.writing.wait()
    waiter = asyncio.ensure_future(document.change(lambda stored: stored.update(cancelled=1)))
    later = asyncio.ensure_future(document.change(lambda stored: stored.update(later=1)))
    await asyncio.sleep(0)
    store.then = waiter.cancel  # the waiter is given its turn, and cancelled before it takes it
    store.go_on.set()
    await asyncio.gather(holder, later)
    assert waiter.cancelled()
    assert await document.read() == {"held": 1, "later": 1}
