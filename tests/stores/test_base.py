"""The store wrapper the runner uses: failures become `StoreError`s, conflicts pass through."""

from __future__ import annotations

from typing import Any

import pytest

from plait.errors import SessionConflict, StoreError, UsageError
from plait.stores import MemoryStore, SessionRecord, base, memory
from plait.stores.base import CheckpointWrite, GuardedStore, StoreView, check_id


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


class OneByOneStore:
    """A checkpoint store with no batch write: a batch reaches it one checkpoint at a time."""

    def __init__(self) -> None:
        self.store = MemoryStore()
        self.written: list[str] = []

    async def put_checkpoint(self, checkpoint_id: str, data: bytes, **kwargs: Any) -> int:
        self.written.append(checkpoint_id)
        return await self.store.put_checkpoint(checkpoint_id, data, **kwargs)


async def test_a_batch_through_a_guarded_store_is_checked_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked: list[list[str]] = []
    check = base.check_writes

    def counted(writes: Any) -> None:
        checked.append([checkpoint_id for checkpoint_id, _, _ in writes])
        check(writes)

    monkeypatch.setattr(base, "check_writes", counted)
    monkeypatch.setattr(memory, "check_writes", counted)  # the memory store checks its own
    store = MemoryStore()
    writes: list[CheckpointWrite] = [("a", b"1", "pending"), ("a.step-1", b"1", "done")]
    assert await GuardedStore(StoreView(store)).put_checkpoints(writes) == [1, 1]
    assert checked == [["a", "a.step-1"]]  # by the memory store: the views pass the same ids
    assert (await store.get_checkpoint("a.step-1")) is not None


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("x\ny", "checkpoint_id 'x\\ny' has U+000A at index 1"),
        ("", "checkpoint_id is empty"),
        (7, "checkpoint_id must be a str, got int 7"),
        ("x" * 513, "is longer than 512 characters"),
        ("a", "at most 100 distinct checkpoint ids"),
    ],
)
async def test_a_bad_batch_is_refused_before_any_write_by_every_store(bad: Any, says: str) -> None:
    writes = [("a", b"1", "pending"), (bad, b"2", "done")]
    memory = MemoryStore()
    one_by_one = OneByOneStore()
    for store in (memory, StoreView(memory), GuardedStore(memory), GuardedStore(one_by_one)):
        with pytest.raises(UsageError) as refused:
            await store.put_checkpoints(writes)  # type: ignore[attr-defined]
        assert says in str(refused.value)
    assert await memory.get_checkpoint("a") is None
    assert one_by_one.written == []


def test_ids_are_checked_together_as_one_by_one() -> None:
    good = ["a", "run.step-1", "é 🙂 ü", "x" * 512]
    base.check_writes([(checkpoint_id, b"", "done") for checkpoint_id in good])
    for bad in ["", "x" * 513, "tab\there", "\u2028", "\ud800", b"bytes", None]:
        with pytest.raises(UsageError) as together:
            base.check_writes([("a", b"", "done"), (bad, b"", "done")])  # type: ignore[list-item]
        with pytest.raises(UsageError) as alone:
            check_id(bad, "checkpoint_id")
        assert str(together.value) == str(alone.value)
