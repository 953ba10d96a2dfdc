"""The conformance suite every store backend passes.

Each check is an async function taking a fresh, empty store; `CHECKS` lists them. Run them
with any test runner, e.g. `@pytest.mark.parametrize("check", CHECKS)`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

from plait.stores.base import Store

__all__ = ["CHECKS"]

Check = Callable[[Store], Awaitable[None]]


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


async def missing_records_are_none(store: Store) -> None:
    """Unknown ids read as None; deleting them is not an error."""
    assert await store.get_checkpoint(_id("cp")) is None
    assert await store.get_session(_id("s")) is None
    await store.delete_checkpoint(_id("cp"))
    await store.delete_session(_id("s"))


async def checkpoints_round_trip_with_growing_versions(store: Store) -> None:
    """A write is read back exactly, pending, and each write raises the version."""
    cp = _id("cp")
    data = b'{"v": 1, "bytes": "\\u00e9"}\x00\xff'
    v1 = await store.put_checkpoint(cp, data)
    record = await store.get_checkpoint(cp)
    assert record is not None
    assert (record.checkpoint_id, record.data, record.version, record.status) == (
        cp,
        data,
        v1,
        "pending",
    )
    v2 = await store.put_checkpoint(cp, b"second", status="done")
    assert v2 > v1
    again = await store.get_checkpoint(cp)
    assert again is not None and (again.data, again.version, again.status) == (
        b"second",
        v2,
        "done",
    )


async def claiming_is_compare_and_set(store: Store) -> None:
    """Only pending at the current version can be claimed, and only once."""
    cp = _id("cp")
    version = await store.put_checkpoint(cp, b"x")
    assert not await store.claim_checkpoint(cp, version + 1)
    assert await store.claim_checkpoint(cp, version)
    assert not await store.claim_checkpoint(cp, version)
    record = await store.get_checkpoint(cp)
    assert record is not None and record.status == "claimed"
    assert not await store.claim_checkpoint(_id("missing"), 1)
    fresh = await store.put_checkpoint(cp, b"paused again")
    assert fresh > version
    assert await store.claim_checkpoint(cp, fresh)


async def concurrent_claims_have_one_winner(store: Store) -> None:
    """Of many concurrent claims of the same version, exactly one succeeds."""
    cp = _id("cp")
    version = await store.put_checkpoint(cp, b"x")
    results = await asyncio.gather(*(store.claim_checkpoint(cp, version) for _ in range(12)))
    assert sum(results) == 1


async def done_checkpoints_cannot_be_claimed(store: Store) -> None:
    """A finished checkpoint stays readable but cannot be resumed."""
    cp = _id("cp")
    version = await store.put_checkpoint(cp, b"x", status="done")
    assert not await store.claim_checkpoint(cp, version)


async def deleting_removes_records(store: Store) -> None:
    """Deleted checkpoints and sessions read as None."""
    cp, s = _id("cp"), _id("s")
    await store.put_checkpoint(cp, b"x")
    await store.put_session(s, b"y")
    await store.delete_checkpoint(cp)
    await store.delete_session(s)
    assert await store.get_checkpoint(cp) is None
    assert await store.get_session(s) is None


async def records_expire_after_their_ttl(store: Store) -> None:
    """A record written with `ttl` is gone once it has passed; others stay."""
    cp, s, keep = _id("cp"), _id("s"), _id("keep")
    await store.put_checkpoint(cp, b"x", ttl=0.3)
    await store.put_session(s, b"y", ttl=0.3)
    await store.put_session(keep, b"z")
    assert await store.get_checkpoint(cp) is not None
    await asyncio.sleep(0.7)
    assert await store.get_checkpoint(cp) is None
    assert await store.get_session(s) is None
    assert await store.get_session(keep) == b"z"


async def sessions_round_trip_and_overwrite(store: Store) -> None:
    """A session write replaces the previous one; large values survive."""
    s = _id("s")
    await store.put_session(s, b"first")
    big = b"x" * (2 * 1024 * 1024)
    await store.put_session(s, big)
    assert await store.get_session(s) == big


async def ids_are_independent(store: Store) -> None:
    """A checkpoint and a session may share an id; ids with odd characters work."""
    shared = _id("same") + "/ 'quoted' ; -- %"
    await store.put_checkpoint(shared, b"checkpoint")
    await store.put_session(shared, b"session")
    record = await store.get_checkpoint(shared)
    assert record is not None and record.data == b"checkpoint"
    assert await store.get_session(shared) == b"session"


CHECKS: list[Check] = [
    missing_records_are_none,
    checkpoints_round_trip_with_growing_versions,
    claiming_is_compare_and_set,
    concurrent_claims_have_one_winner,
    done_checkpoints_cannot_be_claimed,
    deleting_removes_records,
    records_expire_after_their_ttl,
    sessions_round_trip_and_overwrite,
    ids_are_independent,
]
