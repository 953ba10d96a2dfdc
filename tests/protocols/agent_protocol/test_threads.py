"""Threads through the official langgraph-sdk client: plait sessions with metadata, state
and history, each user's own."""

from __future__ import annotations

import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from tests.protocols.agent_protocol.support import Served


async def test_create_get_update_and_delete(served: Served) -> None:
    made = await served.ann.threads.create(metadata={"topic": "bills"})
    assert made["status"] == "idle"
    assert made["values"] == {"messages": []}
    key = made["thread_id"]
    found = await served.ann.threads.get(key)
    assert found["metadata"] == {"topic": "bills"}
    changed = await served.ann.threads.update(key, metadata={"urgent": True})
    assert changed["metadata"] == {"topic": "bills", "urgent": True}
    await served.ann.threads.delete(key)
    with pytest.raises(NotFoundError):
        await served.ann.threads.get(key)


async def test_if_exists(served: Served) -> None:
    await served.ann.threads.create(thread_id="t-1", metadata={"n": 1})
    with pytest.raises(ConflictError):
        await served.ann.threads.create(thread_id="t-1")
    same = await served.ann.threads.create(thread_id="t-1", if_exists="do_nothing")
    assert same["metadata"] == {"n": 1}
    with pytest.raises(UnprocessableEntityError):
        await served.ann.threads.create(thread_id="a/b")


async def test_search_and_count(served: Served) -> None:
    for n in range(3):
        await served.ann.threads.create(thread_id=f"t-{n}", metadata={"even": n % 2 == 0})
    await served.ann.threads.update_state("t-2", {"mood": "calm"})
    assert await served.ann.threads.count() == 3
    assert await served.ann.threads.count(metadata={"even": True}) == 2
    found = await served.ann.threads.search(values={"mood": "calm"})
    assert [t["thread_id"] for t in found] == ["t-2"]
    page = await served.ann.threads.search(limit=2, offset=1, sort_by="thread_id", sort_order="asc")
    assert [t["thread_id"] for t in page] == ["t-1", "t-2"]
    assert await served.ann.threads.count(status="idle") == 3
    assert await served.ann.threads.count(status="busy") == 0


async def test_state_update_copy_and_history(served: Served) -> None:
    made = await served.ann.threads.create()
    key = made["thread_id"]
    await served.ann.threads.update_state(
        key,
        {"messages": [{"role": "user", "content": "hi"}, {"type": "ai", "content": "hello"}]},
        as_node="echo",
    )
    await served.ann.threads.update_state(
        key, {"messages": [{"type": "human", "content": "again"}], "mood": "calm"}
    )
    state = await served.ann.threads.get_state(key)
    messages = state["values"]["messages"]
    assert [(m["type"], m["content"]) for m in messages] == [
        ("human", "hi"),
        ("ai", "hello"),
        ("human", "again"),
    ]
    assert messages[1]["name"] == "echo"
    assert state["values"]["mood"] == "calm"
    [now] = await served.ann.threads.get_history(key)  # no run kept a step: the state now
    assert now == state
    assert now["metadata"]["source"] == "update"
    copied = await served.ann.threads.copy(key)
    assert [m["content"] for m in copied["values"]["messages"]] == ["hi", "hello", "again"]
    assert copied["thread_id"] != key


async def test_a_bad_message_is_refused(served: Served) -> None:
    made = await served.ann.threads.create()
    with pytest.raises(UnprocessableEntityError):
        await served.ann.threads.update_state(
            made["thread_id"], {"messages": [{"type": "robot", "content": "beep"}]}
        )


async def test_another_users_thread_is_not_found(served: Served) -> None:
    made = await served.ann.threads.create(metadata={"owner": "ann"})
    key = made["thread_id"]
    for call in (
        served.bob.threads.get(key),
        served.bob.threads.get_state(key),
        served.bob.threads.update(key, metadata={}),
        served.bob.threads.update_state(key, {"x": 1}),
        served.bob.threads.copy(key),
        served.bob.threads.get_history(key),
        served.bob.threads.delete(key),
    ):
        with pytest.raises(NotFoundError):
            await call
    assert await served.bob.threads.count() == 0
    assert (await served.ann.threads.get(key))["metadata"] == {"owner": "ann"}
