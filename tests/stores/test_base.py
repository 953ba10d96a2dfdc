"""The store wrapper the runner uses: failures become `StoreError`s, conflicts pass through."""

from __future__ import annotations

from typing import Any

import pytest

from plait.errors import SessionConflict, StoreError
from plait.stores import MemoryStore, SessionRecord
from plait.stores.base import GuardedStore


class UnreachableStore(MemoryStore):
    """A store whose server cannot be reached: every session call fails."""

    async def get_session_record(self, *args: Any, **kwargs: Any) -> SessionRecord | None:
        raise ConnectionError("connection refused")

    async def put_session(self, *args: Any, **kwargs: Any) -> int:
        raise ConnectionError("connection refused")


async def test_guarded_store_passes_session_versions_and_conflicts_through() -> None:
    guarded = GuardedStore(MemoryStore())
    assert await guarded.put_session("s", b"first", expected_version=0) == 1
    assert await guarded.get_session_record("s") == SessionRecord(
        session_id="s", data=b"first", version=1
    )
    with pytest.raises(SessionConflict) as caught:
        await guarded.put_session("s", b"second", expected_version=0)
    assert (caught.value.session_id, caught.value.version) == ("s", 1)
    assert await guarded.put_session("s", b"second", expected_version=1) == 2


async def test_guarded_store_names_failed_session_operations() -> None:
    guarded = GuardedStore(UnreachableStore())
    with pytest.raises(StoreError) as reading:
        await guarded.get_session_record("s")
    assert reading.value.operation == "reading a session"
    with pytest.raises(StoreError) as writing:
        await guarded.put_session("s", b"x", expected_version=3)
    assert writing.value.operation == "writing a session"
    assert "ConnectionError: connection refused" in str(writing.value)
