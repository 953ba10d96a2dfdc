"""Double texting (`multitask_strategy`), cancel with rollback, re-attaching to a run's
stream (`join_stream`, `Last-Event-ID`) and `on_disconnect`, through the official
langgraph-sdk client."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

import httpx

from tests.protocols.agent_protocol.support import WORKING, Served

#: The `worker` agent's stopped turn as the thread keeps it: its input (its tool call,
#: stopped before a result, is left out).
_WORKED = [("human", "go")]


def _texts(values: dict) -> list[tuple[str, str]]:
    return [(m["type"], m["content"]) for m in values["messages"]]


def _ask(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


async def _start_worker(served: Served) -> tuple[str, str]:
    """Start a run that works until cancelled on a new thread; return the thread and run."""
    WORKING.clear()
    key = (await served.ann.threads.create())["thread_id"]
    run = await served.ann.runs.create(key, "worker", input=_ask("go"))
    assert await asyncio.to_thread(WORKING.wait, 10)
    return key, run["run_id"]


async def _texted_at_once(served: Served, strategy: str, count: int) -> tuple[str, list[str]]:
    """Start `count` echo runs at once with `strategy` on a thread whose run works; wait
    for all; return the thread and the texts sent."""
    key, worker = await _start_worker(served)
    sent = [f"m{i}" for i in range(count)]
    runs = await asyncio.gather(
        *(
            served.ann.runs.create(
                key, "echo", input=_ask(text), multitask_strategy=strategy, metadata={"text": text}
            )
            for text in sent
        )
    )
    if strategy == "enqueue":
        await served.ann.runs.cancel(key, worker)
    for run in [{"run_id": worker}, *runs]:
        await asyncio.wait_for(served.ann.runs.join(key, run["run_id"]), 30)
    return key, sent


def _pairs(values: dict) -> list[tuple[str, str]]:
    """Return each (human text, the echo that follows it) of the thread."""
    texts = [t for t in _texts(values) if t[0] in ("human", "ai") and t[1]]
    return [(a[1], b[1]) for a, b in itertools.pairwise(texts) if a[0] == "human" and b[0] == "ai"]


async def test_enqueued_runs_all_run_in_order_once_each(served: Served) -> None:
    key, sent = await _texted_at_once(served, "enqueue", 4)
    values = await served.ann.threads.get_state(key)
    humans = [c for t, c in _texts(values["values"]) if t == "human"]
    # the cancelled worker's turn is kept, once, as the thread goes on
    assert Counter(humans) == Counter(["go", *sent])
    assert _texts(values["values"])[:1] == _WORKED
    runs = list(reversed(await served.ann.runs.list(key)))  # oldest first
    assert [r["status"] for r in runs] == ["interrupted", *["success"] * 4]
    order = [r["metadata"]["text"] for r in runs[1:]]
    assert _pairs(values["values"]) == [(text, f"echo: {text}") for text in order]


async def test_interrupt_stops_the_running_run_keeping_its_work(served: Served) -> None:
    key, worker = await _start_worker(served)
    values = await served.ann.runs.wait(
        key, "echo", input=_ask("next"), multitask_strategy="interrupt"
    )
    assert _texts(values) == [*_WORKED, ("human", "next"), ("ai", "echo: next")]
    assert (await served.ann.runs.get(key, worker))["status"] == "interrupted"


async def test_runs_interrupting_at_once_lose_and_double_no_message(served: Served) -> None:
    key, sent = await _texted_at_once(served, "interrupt", 4)
    values = (await served.ann.threads.get_state(key))["values"]
    humans = [c for t, c in _texts(values) if t == "human"]
    assert Counter(humans) == Counter(["go", *sent])
    assert _texts(values)[:1] == _WORKED
    echoes = [c for t, c in _texts(values) if t == "ai" and c]
    assert len(echoes) == len(set(echoes))
    assert all(echo[len("echo: ") :] in sent for echo in echoes)


async def test_a_cancelled_runs_turn_is_kept_once_the_thread_goes_on(served: Served) -> None:
    WORKING.clear()
    key = (await served.ann.threads.create())["thread_id"]
    headers = {"x-api-key": "key-ann"}
    async with httpx.AsyncClient(base_url=served.url, headers=headers, timeout=30) as http:
        body = {"assistant_id": "worker", "input": _ask("go")}
        created = await http.post(f"/threads/{key}/runs", json=body)
        run, checkpoint = created.json()["run_id"], created.headers["x-plait-checkpoint-id"]
        assert await asyncio.to_thread(WORKING.wait, 10)
        await served.ann.runs.cancel(key, run, wait=True)
        assert _texts((await served.ann.threads.get_state(key))["values"]) == []
        values = await served.ann.runs.wait(key, "echo", input=_ask("next"))
        assert _texts(values) == [*_WORKED, ("human", "next"), ("ai", "echo: next")]
        # the thread went on with the stopped run's turn: resuming the run would double it
        resumed = await http.post(f"/v1/runs/{checkpoint}/resume", json={"value": None})
        assert resumed.status_code == 409
    values = await served.ann.runs.wait(key, "echo", input=_ask("last"))
    assert _texts(values)[:3] == [*_WORKED, ("human", "next"), ("ai", "echo: next")]
    assert Counter(c for t, c in _texts(values) if t == "human") == Counter(["go", "next", "last"])


async def test_rollback_removes_the_running_runs_turn(served: Served) -> None:
    key, worker = await _start_worker(served)
    values = await served.ann.runs.wait(
        key, "echo", input=_ask("instead"), multitask_strategy="rollback"
    )
    assert _texts(values) == [("human", "instead"), ("ai", "echo: instead")]
    assert (await served.ann.runs.get(key, worker))["status"] == "interrupted"


async def test_runs_rolling_back_at_once_keep_whole_turns_once(served: Served) -> None:
    key, sent = await _texted_at_once(served, "rollback", 4)
    values = (await served.ann.threads.get_state(key))["values"]
    humans = [c for t, c in _texts(values) if t == "human"]
    assert "go" not in humans
    assert len(humans) == len(set(humans)) and set(humans) <= set(sent)
    assert _pairs(values) == [(text, f"echo: {text}") for text in humans]


async def test_cancel_with_rollback_removes_the_runs_turn(served: Served) -> None:
    key = (await served.ann.threads.create())["thread_id"]
    await served.ann.runs.wait(key, "echo", input=_ask("first"))
    WORKING.clear()
    run = await served.ann.runs.create(key, "worker", input=_ask("go"))
    assert await asyncio.to_thread(WORKING.wait, 10)
    await served.ann.runs.cancel(key, run["run_id"], wait=True, action="rollback")
    state = await served.ann.threads.get_state(key)
    assert _texts(state["values"]) == [("human", "first"), ("ai", "echo: first")]
    assert (await served.ann.runs.get(key, run["run_id"]))["status"] == "interrupted"
    assert (await served.ann.threads.get(key))["status"] == "idle"


async def test_join_stream_follows_a_run_and_replays_after_last_event_id(served: Served) -> None:
    key, worker = await _start_worker(served)

    async def joined(last: str | None = None) -> list:
        stream = served.ann.runs.join_stream(key, worker, last_event_id=last)
        return [part async for part in stream]

    following = asyncio.ensure_future(joined())
    await served.ann.runs.cancel(key, worker)
    parts = await asyncio.wait_for(following, 30)
    assert parts[0].event == "metadata" and parts[0].data["run_id"] == worker
    assert parts[-1].event == "end"
    assert [p.id for p in parts] == [str(i) for i in range(len(parts))]
    again = await joined(last="0")
    assert [(p.event, p.data, p.id) for p in again] == [(p.event, p.data, p.id) for p in parts[1:]]


async def test_a_queued_streamed_run_streams_once_it_starts(served: Served) -> None:
    key, worker = await _start_worker(served)

    async def streamed() -> list:
        stream = served.ann.runs.stream(
            key, "echo", input=_ask("later"), multitask_strategy="enqueue"
        )
        return [part async for part in stream]

    waiting = asyncio.ensure_future(streamed())
    runs = await served.ann.runs.list(key)
    while len(runs) < 2:  # the stream's run is queued behind the worker's
        runs = await served.ann.runs.list(key)
    assert runs[0]["status"] == "pending"
    await served.ann.runs.cancel(key, worker)
    parts = await asyncio.wait_for(waiting, 30)
    assert parts[0].event == "metadata" and parts[-1].event == "end"
    assert _texts(parts[-2].data)[-1] == ("ai", "echo: later")


async def test_on_disconnect_cancel_stops_a_streamed_run(served: Served) -> None:
    WORKING.clear()
    key = (await served.ann.threads.create())["thread_id"]
    stream = served.ann.runs.stream(key, "worker", input=_ask("go"), on_disconnect="cancel")
    first = await anext(stream)
    assert first.event == "metadata"
    assert await asyncio.to_thread(WORKING.wait, 10)
    await stream.aclose()  # the client leaves
    await asyncio.wait_for(served.ann.runs.join(key, first.data["run_id"]), 30)
    assert (await served.ann.runs.get(key, first.data["run_id"]))["status"] == "interrupted"
