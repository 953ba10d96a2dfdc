"""MemoryStore passes the conformance suite and drops expired records."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from plait import AgentEvent, AgentInput, Message, RunContext, Runner
from plait.stores import MemoryStore, SessionRecord
from plait.stores.conformance import CHECKS, Check


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_memory_store_conforms(check: Check) -> None:
    async with MemoryStore() as store:
        await check(store)


class Asker:
    """An agent that pauses at once."""

    name = "asker"
    description = ""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        answer = ctx.interrupt("may I?")
        yield ctx.event(message=Message.assistant(f"got {answer}"))


async def test_expired_pauses_are_dropped_so_memory_follows_live_records() -> None:
    store = MemoryStore()
    await store.put_session("kept", b"no ttl")
    await store.put_checkpoint("kept", b"long ttl", ttl=3600)
    runner = Runner(Asker(), store=store, checkpoint_ttl=0.001)
    for _ in range(500):
        paused = await runner.query("q").collect()
        assert paused.checkpoint_id is not None
    await asyncio.sleep(0.05)
    await store.put_session("next", b"x", ttl=60)  # a write drops every expired record
    assert len(store) == 3
    assert await store.get_session("kept") == b"no ttl"
    assert await store.get_checkpoint("kept") is not None


async def test_rewritten_and_claimed_records_keep_their_own_expiry() -> None:
    store = MemoryStore()
    version = await store.put_checkpoint("cp", b"short", ttl=0.01)
    assert await store.claim_checkpoint("cp", version)  # a claim keeps the expiry
    await store.put_session("s", b"short", ttl=0.01)
    await store.put_session("s", b"long", ttl=3600)  # the rewrite's expiry counts
    await asyncio.sleep(0.05)
    await store.put_session("other", b"x")
    assert await store.get_checkpoint("cp") is None
    assert await store.get_session("s") == b"long"
    assert len(store) == 2


async def test_expiry_still_drops_records_after_many_rewrites() -> None:
    store = MemoryStore()
    await store.put_checkpoint("short", b"x", ttl=0.01)
    for n in range(300):  # each rewrite leaves its previous expiry behind, to be cleared
        await store.put_session("s", str(n).encode(), ttl=3600)
    await asyncio.sleep(0.05)
    await store.put_session("s", b"last", ttl=3600)
    assert len(store) == 1
    assert await store.get_session_record("s") == SessionRecord(
        session_id="s", data=b"last", version=301
    )


def test_an_empty_store_is_still_true() -> None:
    store = MemoryStore()
    assert len(store) == 0 and bool(store)
