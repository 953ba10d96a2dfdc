"""What the store layer does on its quick paths is what it does on the others: subclasses
of `MemoryStore` that change a backend method, views with a `_call` of their own, ids
checked at lengths not seen before, and index writes that fail."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from plait.errors import SessionConflict, StoreError, UsageError
from plait.stores import MemoryStore, SessionRecord
from plait.stores.base import CheckpointStatus, GuardedStore, StoreView, check_id, check_ttl
from plait.stores.session_index import SessionIndex

_T = TypeVar("_T")


class _Through(MemoryStore):
    """A memory store that notes each backend call."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    async def _put_checkpoint(
        self, checkpoint_id: str, data: bytes, status: CheckpointStatus, ttl: float | None
    ) -> int:
        self.seen.append(f"put {checkpoint_id}")
        return await super()._put_checkpoint(checkpoint_id, data, status, ttl)

    async def _get_session_record(self, session_id: str) -> SessionRecord | None:
        self.seen.append(f"get {session_id}")
        return await super()._get_session_record(session_id)

    async def _put_session(
        self, session_id: str, data: bytes, ttl: float | None, expected_version: int | None
    ) -> int:
        self.seen.append(f"put {session_id}")
        return await super()._put_session(session_id, data, ttl, expected_version)


async def test_a_subclass_that_changes_a_backend_method_has_every_write_go_through_it() -> None:
    store = _Through()
    assert await store.put_checkpoints([("a", b"1", "pending"), ("b", b"2", "done")]) == [1, 1]
    assert await store.put_session("s", bytearray(b"x"), expected_version=0) == 1
    assert await store.get_session("s") == b"x"
    assert await store.get_session_record("s") == SessionRecord(
        session_id="s", data=b"x", version=1
    )
    assert store.seen == ["put a", "put b", "put s", "get s", "get s"]
    with pytest.raises(SessionConflict):
        await store.put_session("s", b"y", expected_version=0)
    with pytest.raises(UsageError, match="checkpoint_id"):
        await store.put_checkpoints([("a\n", b"1", "pending")])


async def test_a_batch_with_bad_data_writes_none_of_it() -> None:
    store = MemoryStore()
    with pytest.raises(TypeError):
        await store.put_checkpoints([("a", b"1", "pending"), ("b", "text", "pending")])  # type: ignore[list-item]
    assert await store.get_checkpoint("a") is None
    with pytest.raises(UsageError, match="checkpoint_id"):  # the ids are checked first
        await store.put_checkpoints([("a\x00", "text", "pending")])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="distinct"):
        await store.put_checkpoints([("a", b"1", "pending"), ("a", b"2", "pending")])


class _Counted(GuardedStore):
    """A guarded view with a `_call` of its own: every operation goes through it."""

    calls: list[str]

    async def _call(self, operation: str, coro: Awaitable[_T]) -> _T:
        self.calls.append(operation)
        return await super()._call(operation, coro)


class _Broken(MemoryStore):
    async def put_session(self, *args: Any, **kwargs: Any) -> int:
        raise ConnectionError("down")


async def test_a_view_with_its_own_call_sees_every_operation() -> None:
    view = _Counted(MemoryStore())
    view.calls = []
    await view.put_session("s", b"x")
    await view.get_session_record("s")
    await view.get_session("s")
    await view.put_checkpoints([("c", b"x", "pending")])
    await view.get_checkpoint("c")
    assert view.calls == [
        "writing a session",
        "reading a session",
        "reading a session",
        "writing a checkpoint",
        "reading a checkpoint",
    ]
    broken = _Counted(_Broken())
    broken.calls = []
    with pytest.raises(StoreError, match="writing a session failed") as caught:
        await broken.put_session("s", b"x")
    assert isinstance(caught.value.__cause__, ConnectionError)
    with pytest.raises(ConnectionError):  # a plain view passes failures through
        await StoreView(_Broken()).put_session("s", b"x")


def test_ids_are_checked_alike_at_every_length() -> None:
    class Named(str):
        pass

    name = Named("x" * 300)
    assert check_id(name, max_length=300) is name
    assert check_id(name, max_length=300) is name  # (a length seen before)
    for limit in (1, 299, 7, 5000):
        if limit < 300:
            with pytest.raises(UsageError, match=f"longer than {limit} characters"):
                check_id(name, max_length=limit)
    with pytest.raises(UsageError, match="has U\\+000A at index 1"):
        check_id("a\nb", max_length=40)
    with pytest.raises(UsageError, match="must be a str"):
        check_id(b"abc", max_length=40)
    with pytest.raises(UsageError, match="is empty"):
        check_id("", max_length=40)
    check_ttl(0.5)
    for bad in (True, 0, -1.0, float("nan"), float("inf"), 10**12):
        with pytest.raises(UsageError, match="ttl must be a number of seconds"):
            check_ttl(bad)


class _Refusing(MemoryStore):
    async def put_session(self, *args: Any, **kwargs: Any) -> int:
        raise ConnectionError("refused")


async def test_a_failed_index_write_fails_each_waiting_caller() -> None:
    index, store = SessionIndex(), GuardedStore(_Refusing())
    results = await asyncio.gather(
        *(index.update(store, "i", f"s{n}", ("t", None)) for n in range(3)),
        return_exceptions=True,
    )
    assert all(isinstance(r, StoreError) for r in results)
    assert len({id(r) for r in results}) == 3  # one error each
    assert all("ConnectionError: refused" in str(r) for r in results)


class _Both(MemoryStore):
    """A memory store that changes `put_session` and `_put_session` alike, and reads through
    its own `get_session_record`."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    async def put_session(self, session_id: str, data: bytes, **kwargs: Any) -> int:
        self.seen.append("put_session")
        return await super().put_session(session_id, data, **kwargs)

    async def _put_session(
        self, session_id: str, data: bytes, ttl: float | None, expected_version: int | None
    ) -> int:
        self.seen.append("_put_session")
        return await super()._put_session(session_id, data, ttl, expected_version)

    async def get_session_record(self, session_id: str) -> SessionRecord | None:
        self.seen.append("get_session_record")
        return await super().get_session_record(session_id)


async def test_a_subclass_reaches_its_backend_methods_through_super() -> None:
    store = _Both()
    assert await store.put_session("s", b"x", expected_version=0) == 1
    assert await store.get_session("s") == b"x"
    assert store.seen == ["put_session", "_put_session", "get_session_record"]
