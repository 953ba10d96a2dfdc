"""A document change that starts from a snapshot the caller has: it stands only if it
writes the document still at that version; otherwise the edit is applied again to the
document as stored, so no change made in between is lost or decided on."""

from __future__ import annotations

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
