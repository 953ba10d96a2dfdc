"""What plait does not serve of the Agent Protocol answers 501 with a message naming it,
through the official langgraph-sdk client; threads.create's supersteps and runs.cancel_many
are served."""

from __future__ import annotations

import asyncio

import pytest
from langgraph_sdk.errors import APIStatusError, NotFoundError, UnprocessableEntityError

from tests.protocols.agent_protocol.support import WORKING, Served

_HI = {"type": "human", "content": "hi"}
_HELLO = {"type": "ai", "content": "hello"}


def _message(refused: pytest.ExceptionInfo[APIStatusError]) -> str:
    assert refused.value.status_code == 501
    return str(refused.value.response.json()["error"]["message"])


async def test_interrupt_before_and_after_answer_501_naming_them(served: Served) -> None:
    key = (await served.ann.threads.create())["thread_id"]
    for option in ("interrupt_before", "interrupt_after"):
        with pytest.raises(APIStatusError) as refused:
            await served.ann.runs.create(key, "echo", input={"messages": []}, **{option: ["echo"]})
        assert _message(refused).startswith(f"{option} is not served by plait yet")
        assert "interrupt()" in _message(refused)
    assert await served.ann.runs.list(key) == []
    with pytest.raises(APIStatusError) as refused:
        await served.ann.crons.create("echo", schedule="* * * * *", interrupt_after=["echo"])
    assert _message(refused).startswith("interrupt_after is not served by plait yet")
    cron = await served.ann.crons.create_for_thread(key, "echo", schedule="* * * * *")
    with pytest.raises(APIStatusError) as refused:
        await served.ann.crons.update(cron["cron_id"], interrupt_before=["echo"])
    assert _message(refused).startswith("interrupt_before is not served by plait yet")
    assert await served.ann.crons.count() == 1


async def test_routes_not_served_answer_501_naming_them(served: Served) -> None:
    key = (await served.ann.threads.create())["thread_id"]
    with pytest.raises(APIStatusError) as refused:
        await served.ann.assistants.get_subgraphs("echo")
    assert "assistants.get_subgraphs" in _message(refused)
    with pytest.raises(APIStatusError) as refused:
        await served.ann.assistants.get_subgraphs("echo", namespace="a")
    assert "assistants.get_subgraphs" in _message(refused)
    with pytest.raises(APIStatusError) as refused:
        async for _ in await served.ann.threads.join_stream(key):
            pass
    assert "threads.join_stream" in _message(refused)
    with pytest.raises(APIStatusError) as refused:
        await served.ann.threads.create(ttl=60)
    assert "threads.create with ttl" in _message(refused)
    with pytest.raises(APIStatusError) as refused:
        await served.ann.threads.update(key, metadata={}, ttl=60)
    assert "threads.update with ttl" in _message(refused)
    made = await served.ann.assistants.create("echo")
    with pytest.raises(APIStatusError) as refused:
        await served.ann.assistants.delete(made["assistant_id"], delete_threads=True)
    assert "delete_threads" in _message(refused)
    assert (await served.ann.assistants.get(made["assistant_id"]))["graph_id"] == "echo"
    with pytest.raises(APIStatusError) as refused:
        await served.ann.threads.get_history(key, checkpoint={"checkpoint_ns": "inner"})
    assert "checkpoint_ns" in _message(refused)


async def test_a_thread_is_created_with_supersteps_of_updates(served: Served) -> None:
    made = await served.ann.threads.create(
        graph_id="echo",
        supersteps=[
            {"updates": [{"values": {"messages": [_HI]}, "as_node": None}]},
            {
                "updates": [
                    {"values": {"messages": [_HELLO]}, "as_node": "echo"},
                    {"values": {"mood": "calm"}, "as_node": None},
                ]
            },
        ],
    )
    assert made["metadata"] == {"graph_id": "echo"}
    values = made["values"]
    assert [(m["type"], m["content"], m["name"]) for m in values["messages"]] == [
        ("human", "hi", None),
        ("ai", "hello", "echo"),
    ]
    assert values["mood"] == "calm"
    again = await served.ann.threads.create(
        thread_id=made["thread_id"],
        if_exists="do_nothing",
        supersteps=[{"updates": [{"values": {"messages": [_HI]}, "as_node": None}]}],
    )
    assert again["values"] == values  # an existing thread is left as it is
    with pytest.raises(APIStatusError) as refused:
        await served.ann.threads.create(
            supersteps=[{"updates": [{"values": None, "command": {"goto": "x"}, "as_node": None}]}]
        )
    assert "command" in _message(refused)
    with pytest.raises(UnprocessableEntityError):  # checked before the thread is made
        await served.ann.threads.create(
            thread_id="t-bad",
            supersteps=[{"updates": [{"values": {"messages": [{"type": "x"}]}, "as_node": None}]}],
        )
    with pytest.raises(NotFoundError):
        await served.ann.threads.get("t-bad")


async def test_cancel_many_by_ids_and_by_status(served: Served) -> None:
    ask = {"messages": [{"role": "user", "content": "go"}]}
    runs = []
    for _ in range(2):
        WORKING.clear()
        key = (await served.ann.threads.create())["thread_id"]
        runs.append((key, (await served.ann.runs.create(key, "worker", input=ask))["run_id"]))
        assert await asyncio.to_thread(WORKING.wait, 10)
    (first, one), (second, two) = runs
    with pytest.raises(NotFoundError):  # bob has no such runs: nothing is cancelled
        await served.bob.runs.cancel_many(thread_id=first, run_ids=[one])
    await served.bob.runs.cancel_many(status="running")
    assert (await served.ann.runs.get(first, one))["status"] == "running"
    await served.ann.runs.cancel_many(thread_id=first, run_ids=[one])
    await served.ann.runs.join(first, one)
    assert (await served.ann.runs.get(first, one))["status"] == "interrupted"
    assert (await served.ann.runs.get(second, two))["status"] == "running"
    await served.ann.runs.cancel_many(status="all", action="rollback")
    await served.ann.runs.join(second, two)
    assert (await served.ann.runs.get(second, two))["status"] == "interrupted"
    assert (await served.ann.threads.get_state(second))["values"]["messages"] == []
    with pytest.raises(UnprocessableEntityError):
        await served.ann.runs.cancel_many()
