"""The Agent Protocol served by two `plait serve` workers sharing one store (PostgreSQL,
Redis, and one SQLite file), driven by the official langgraph-sdk client on each worker: a thread
made on one runs on the other and is read, joined, streamed and cancelled from the first;
double texting with runs posted at once through both; a cron fired once per tick.
Workers killed mid-run are in `test_worker_loss.py`."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError

from plait.protocols.agent_protocol.documents import SharedDocument
from plait.stores import from_url
from tests.protocols.agent_protocol.test_double_texting import _ask, _pairs, _texts
from tests.protocols.agent_protocol.workers_support import Workers, serve_workers, until

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(params=["postgres", "sqlite", "redis"])
async def workers(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Workers]:
    """Workers A and B on PostgreSQL tables, Redis keys or a SQLite file of this test's own."""
    async with serve_workers(request.param, tmp_path) as found:
        yield found


async def _working(workers: Workers, count: int = 1) -> None:
    """Wait until `count` calls of the `worker` agent's tool have started."""

    async def started() -> bool:
        return len(workers.calls("work")) >= count

    await until(started, f"{count} work call(s)")


async def test_a_thread_made_on_one_worker_runs_on_the_other(workers: Workers) -> None:
    a, b = workers.a, workers.b
    key = (await a.ann.threads.create(metadata={"made": "on a"}))["thread_id"]
    values = await b.ann.runs.wait(key, "echo", input=_ask("hi"))
    assert _texts(values) == [("human", "hi"), ("ai", "echo: hi")]
    state = await a.ann.threads.get_state(key)
    assert _texts(state["values"]) == [("human", "hi"), ("ai", "echo: hi")]
    [run] = await a.ann.runs.list(key)
    assert run["status"] == "success"
    assert (await a.ann.threads.get(key))["status"] == "idle"
    assert [t["thread_id"] for t in await b.ann.threads.search(metadata={"made": "on a"})] == [key]
    with pytest.raises(NotFoundError):  # the other user's, on either worker
        await b.bob.threads.get(key)
    with pytest.raises(NotFoundError):
        await a.bob.runs.get(key, run["run_id"])


async def test_a_run_on_one_worker_is_joined_streamed_and_cancelled_from_the_other(
    workers: Workers,
) -> None:
    a, b = workers.a, workers.b
    key = (await a.ann.threads.create())["thread_id"]
    run = await b.ann.runs.create(key, "worker", input=_ask("go"))
    await _working(workers)
    assert (await a.ann.runs.get(key, run["run_id"]))["status"] == "running"
    assert (await a.ann.threads.get(key))["status"] == "busy"
    joined = asyncio.ensure_future(a.ann.runs.join(key, run["run_id"]))

    async def streamed() -> list[Any]:
        return [part async for part in a.ann.runs.join_stream(key, run["run_id"])]

    following = asyncio.ensure_future(streamed())
    await asyncio.sleep(0)  # both wait on A for a run B runs
    assert not joined.done() and not following.done()
    await a.ann.runs.cancel(key, run["run_id"])
    values = await asyncio.wait_for(joined, 60)
    parts = await asyncio.wait_for(following, 60)
    # on a worker that does not run it, the stream is the run's end: metadata, values, end
    assert [p.event for p in parts] == ["metadata", "values", "end"]
    assert parts[0].data["run_id"] == run["run_id"]
    assert parts[1].data == values
    assert (await a.ann.runs.get(key, run["run_id"]))["status"] == "interrupted"
    assert (await b.ann.threads.get(key))["status"] == "idle"
    after = await a.ann.runs.wait(key, "echo", input=_ask("next"))  # the stopped turn is kept
    assert _texts(after) == [("human", "go"), ("human", "next"), ("ai", "echo: next")]


async def _post_at_once(workers: Workers, key: str, strategy: str, texts: list[str]) -> list[Any]:
    """Post one echo run per text at once, through A and B in turn, with `strategy`."""
    clients = itertools.cycle([workers.a.ann, workers.b.ann])
    return await asyncio.gather(
        *(
            client.runs.create(
                key, "echo", input=_ask(text), multitask_strategy=strategy, metadata={"text": text}
            )
            for client, text in zip(clients, texts, strict=False)
        ),
        return_exceptions=True,
    )


async def _busy_thread(workers: Workers) -> tuple[str, str]:
    """Return a thread made on A and the run that works on it (on A) until cancelled."""
    key = (await workers.a.ann.threads.create())["thread_id"]
    run = await workers.a.ann.runs.create(key, "worker", input=_ask("go"))
    await _working(workers)
    return key, run["run_id"]


async def test_runs_rejected_at_once_on_both_workers_leave_one_running(workers: Workers) -> None:
    key = (await workers.a.ann.threads.create())["thread_id"]
    clients = [workers.a.ann, workers.b.ann] * 3
    answers = await asyncio.gather(
        *(c.runs.create(key, "worker", input=_ask("go")) for c in clients),
        return_exceptions=True,
    )
    started = [r for r in answers if isinstance(r, dict)]
    refused = [r for r in answers if isinstance(r, ConflictError)]
    assert len(started) == 1 and len(refused) == len(clients) - 1, answers
    await _working(workers)
    again = await _post_at_once(workers, key, "reject", ["late-a", "late-b"])
    assert all(isinstance(r, ConflictError) for r in again), again
    await workers.b.ann.runs.cancel(key, started[0]["run_id"], wait=True)
    assert len(workers.calls("work")) == 1
    state = await workers.a.ann.threads.get_state(key)
    assert _texts(state["values"]) == []  # the stopped turn waits for the thread to go on
    values = await workers.b.ann.runs.wait(key, "echo", input=_ask("next"))
    assert _texts(values) == [("human", "go"), ("human", "next"), ("ai", "echo: next")]


async def _join_all(workers: Workers, key: str, runs: list[str]) -> None:
    clients = itertools.cycle([workers.b.ann, workers.a.ann])
    for client, run_id in zip(clients, runs, strict=False):
        await asyncio.wait_for(client.runs.join(key, run_id), 60)


async def test_runs_enqueued_at_once_on_both_workers_run_in_order_once(workers: Workers) -> None:
    key, worker = await _busy_thread(workers)
    sent = [f"m{i}" for i in range(6)]
    runs = await _post_at_once(workers, key, "enqueue", sent)
    assert all(r["status"] == "pending" for r in runs), runs
    await workers.b.ann.runs.cancel(key, worker)
    await _join_all(workers, key, [worker, *(r["run_id"] for r in runs)])
    listed = list(reversed(await workers.a.ann.runs.list(key, limit=20)))  # oldest first
    assert [r["status"] for r in listed] == ["interrupted", *["success"] * len(sent)]
    order = [r["metadata"]["text"] for r in listed[1:]]
    assert sorted(order) == sorted(sent)
    values = (await workers.b.ann.threads.get_state(key))["values"]
    assert _texts(values)[:1] == [("human", "go")]
    assert _pairs(values) == [(text, f"echo: {text}") for text in order]
    assert Counter(c for t, c in _texts(values) if t == "human") == Counter(["go", *sent])


async def test_runs_interrupting_at_once_on_both_workers_lose_and_double_nothing(
    workers: Workers,
) -> None:
    key, worker = await _busy_thread(workers)
    sent = [f"m{i}" for i in range(6)]
    runs = await _post_at_once(workers, key, "interrupt", sent)
    await _join_all(workers, key, [worker, *(r["run_id"] for r in runs)])
    assert (await workers.a.ann.runs.get(key, worker))["status"] == "interrupted"
    statuses = [(await workers.b.ann.runs.get(key, r["run_id"]))["status"] for r in runs]
    assert set(statuses) <= {"success", "interrupted"} and "success" in statuses
    values = (await workers.a.ann.threads.get_state(key))["values"]
    assert _texts(values)[:1] == [("human", "go")]
    humans = [c for t, c in _texts(values) if t == "human"]
    assert Counter(humans) == Counter(["go", *sent])  # every input kept, once
    echoes = [c for t, c in _texts(values) if t == "ai" and c]
    assert len(echoes) == len(set(echoes)) and {e.removeprefix("echo: ") for e in echoes} <= set(
        sent
    )
    assert len(workers.calls("work")) == 1


async def test_runs_rolling_back_at_once_on_both_workers_keep_whole_turns_once(
    workers: Workers,
) -> None:
    key, worker = await _busy_thread(workers)
    sent = [f"m{i}" for i in range(6)]
    runs = await _post_at_once(workers, key, "rollback", sent)
    await _join_all(workers, key, [worker, *(r["run_id"] for r in runs)])
    assert (await workers.a.ann.runs.get(key, worker))["status"] == "interrupted"
    values = (await workers.b.ann.threads.get_state(key))["values"]
    humans = [c for t, c in _texts(values) if t == "human"]
    assert "go" not in humans  # the rolled-back run's turn is gone
    assert humans and len(humans) == len(set(humans)) and set(humans) <= set(sent)
    assert _pairs(values) == [(text, f"echo: {text}") for text in humans]
    assert len(_texts(values)) == 2 * len(humans)


#: A schedule that never comes by itself while the tests run (29 February only).
_SELDOM = "0 0 29 2 *"


async def _make_due(workers: Workers, cron_id: str) -> None:
    """Make the cron's next firing due now, as time passing would (a firing the test
    controls): its `next_run_date` moves into the past, in the store the workers share."""
    store = from_url(workers.store_url)

    def due(stored: dict[str, Any]) -> None:
        stored[cron_id] = {**stored[cron_id], "next_run_date": "2000-01-01T00:00:00+00:00"}

    try:
        await SharedDocument(store, "crons").change(due)
    finally:
        await store.close()


async def test_each_firing_of_a_cron_runs_once_on_two_workers(workers: Workers) -> None:
    a, b = workers.a, workers.b
    cron = await a.ann.crons.create("echo", schedule=_SELDOM, input=_ask("tick"))
    mine = {"cron_id": cron["cron_id"]}
    for firing in range(1, 4):
        await _make_due(workers, cron["cron_id"])

        async def claimed(firing: int = firing) -> bool:
            [found] = await b.ann.crons.search()
            moved = datetime.fromisoformat(found["next_run_date"]) > datetime.now(UTC)
            return moved and await a.ann.threads.count(metadata=mine) >= firing

        await until(claimed, f"firing {firing}")
        for thread in await b.ann.threads.search(metadata=mine, limit=20):

            async def answered(key: str = thread["thread_id"]) -> bool:
                runs = await a.ann.runs.list(key)
                return bool(runs) and all(r["status"] == "success" for r in runs)

            await until(answered, "the firing's run")
        # every firing so far ran once, on one thread, with one run
        threads = await a.ann.threads.search(metadata=mine, limit=20)
        assert len(threads) == firing
        for thread in threads:
            assert len(await b.ann.runs.list(thread["thread_id"])) == 1
            state = await b.ann.threads.get_state(thread["thread_id"])
            assert _texts(state["values"]) == [("human", "tick"), ("ai", "echo: tick")]
