"""An index written whole at every change (`plait.stores.session_index`) keeps each entry's
JSON in blocks (`plait._util.joined`): what it writes is what `json.dumps` of its entries
writes, in write order, however many entries change, move or go."""

from __future__ import annotations

import asyncio
import json
import random

from plait._util.joined import BLOCK, JoinedParts
from plait.errors import StoreError
from plait.stores import MemoryStore
from plait.stores.base import GuardedStore
from plait.stores.session_index import SessionIndex, decode_agents, decode_index


def test_joined_parts_join_as_a_dict_of_the_same_changes_would() -> None:
    rng = random.Random(7)
    for _ in range(50):
        parts, model = JoinedParts(), {}
        for _ in range(rng.randint(0, 8 * BLOCK)):
            key, text = str(rng.randint(0, 3 * BLOCK)), str(rng.random())
            roll = rng.random()
            if roll < 0.2:
                assert parts.pop(key) == (key in model)
                model.pop(key, None)
            elif roll < 0.6:  # written again: moves last
                parts.set(key, text, last=True)
                model.pop(key, None)
                model[key] = text
            else:  # changed in place
                parts.set(key, text)
                model[key] = text
            if rng.random() < 0.2:
                assert parts.joined() == ", ".join(model.values()).encode()
        assert parts.joined() == ", ".join(model.values()).encode()
        assert list(parts) == list(model) and len(parts) == len(model)


async def test_a_long_session_index_is_written_as_json_dumps_writes_it() -> None:
    store = GuardedStore(MemoryStore())
    index, rng = SessionIndex(), random.Random(3)
    sessions: dict[str, str] = {}
    agents: dict[str, str] = {}
    for step in range(6 * BLOCK):
        session_id = f"s{rng.randint(0, 4 * BLOCK)}"
        if rng.random() < 0.15:
            await index.update(store, "u/index", session_id, None)
            sessions.pop(session_id, None)
            agents.pop(session_id, None)
            continue
        stamp, agent = f"2026-01-01T00:00:{step:05d}", f"agent-{rng.randint(0, 3)}"
        await index.update(store, "u/index", session_id, (stamp, agent))
        sessions.pop(session_id, None)
        sessions[session_id] = stamp
        agents[session_id] = agent
    found = await store.get_session_record("u/index")
    assert found is not None
    assert decode_index(found) == sessions and list(decode_index(found)) == list(sessions)
    assert decode_agents(found) == agents
    assert found.data == json.dumps({"sessions": sessions, "agents": agents}).encode()


class _Counted(MemoryStore):
    """A memory store that counts its session writes, and can hold them until `go` is set
    or fail them."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.writing = asyncio.Event()
        self.go: asyncio.Event | None = None
        self.fail = False

    async def _put_session(
        self, session_id: str, data: bytes, ttl: float | None, expected_version: int | None
    ) -> int:
        self.writes += 1
        self.writing.set()
        if self.go is not None:
            await self.go.wait()
        if self.fail:
            raise OSError("the disk is gone")
        return await super()._put_session(session_id, data, ttl, expected_version)


def _entry(n: int) -> tuple[str, str]:
    return (f"2026-01-01T00:00:{n:05d}", "assistant")


async def test_changes_made_in_one_turn_of_the_loop_are_written_in_one_write() -> None:
    inner = _Counted()
    store, index = GuardedStore(inner), SessionIndex()
    await asyncio.gather(*(index.update(store, "u/index", f"s{n}", _entry(n)) for n in range(50)))
    assert inner.writes == 1
    found = await store.get_session_record("u/index")
    assert found is not None and list(decode_index(found)) == [f"s{n}" for n in range(50)]


async def test_changes_made_while_the_index_is_written_go_in_the_next_write() -> None:
    inner = _Counted()
    inner.go = asyncio.Event()
    store, index = GuardedStore(inner), SessionIndex()
    first = asyncio.ensure_future(index.update(store, "u/index", "s0", _entry(0)))
    await inner.writing.wait()
    later = [
        asyncio.ensure_future(index.update(store, "u/index", f"s{n}", _entry(n))) for n in (1, 2)
    ]
    inner.go.set()
    await asyncio.gather(first, *later)
    assert inner.writes == 2
    found = await store.get_session_record("u/index")
    assert found is not None and list(decode_index(found)) == ["s0", "s1", "s2"]


async def test_a_caller_cancelled_while_it_waits_leaves_the_others_changes_written() -> None:
    inner = _Counted()
    inner.go = asyncio.Event()
    store, index = GuardedStore(inner), SessionIndex()
    callers = [
        asyncio.ensure_future(index.update(store, "u/index", f"s{n}", _entry(n))) for n in range(3)
    ]
    await inner.writing.wait()
    callers[0].cancel()
    inner.go.set()
    await asyncio.gather(*callers[1:])
    assert callers[0].cancelled()
    found = await store.get_session_record("u/index")
    assert found is not None and list(decode_index(found)) == ["s0", "s1", "s2"]


async def test_a_failed_write_fails_every_change_it_held_and_the_next_write_is_tried() -> None:
    inner = _Counted()
    inner.fail = True
    store, index = GuardedStore(inner), SessionIndex()
    results = await asyncio.gather(
        *(index.update(store, "u/index", f"s{n}", _entry(n)) for n in range(3)),
        return_exceptions=True,
    )
    assert all(
        isinstance(r, StoreError) and "the disk is gone" in str(r.__cause__ or r) for r in results
    ), results
    inner.fail = False
    await index.update(store, "u/index", "s3", _entry(3))
    found = await store.get_session_record("u/index")
    assert found is not None and list(decode_index(found)) == ["s3"]


def test_an_index_whose_loop_closed_mid_write_is_written_from_the_next_loop() -> None:
    inner = _Counted()
    store, index = GuardedStore(inner), SessionIndex()

    async def closed_mid_write() -> None:
        inner.go = asyncio.Event()  # never set: the first write is under way as the loop ends
        callers = [asyncio.ensure_future(index.update(store, "u/index", "s0", _entry(0)))]
        await inner.writing.wait()
        callers.append(asyncio.ensure_future(index.update(store, "u/index", "s1", _entry(1))))
        await asyncio.sleep(0)  # the second change waits for the first write
        assert not any(caller.done() for caller in callers)

    asyncio.run(closed_mid_write())  # ends by cancelling the writer and both callers
    inner.go = None

    async def next_loop() -> list[str]:
        await asyncio.wait_for(index.update(store, "u/index", "s2", _entry(2)), 30)
        found = await store.get_session_record("u/index")
        assert found is not None
        return list(decode_index(found))

    assert asyncio.run(next_loop()) == ["s2"]
