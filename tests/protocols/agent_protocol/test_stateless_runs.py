"""Stateless runs (`thread_id=None`) through the official langgraph-sdk client: each runs
on a temporary thread, deleted when the run ends unless `on_completion="keep"`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import APIStatusError, NotFoundError

from tests.protocols.agent_protocol.support import Served

WAIT = 30.0
HI = {"messages": [{"role": "user", "content": "hi"}]}


def _texts(values: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["type"], m["content"]) for m in values["messages"]]


async def _until(check: Callable[[], Awaitable[Any]]) -> Any:
    """Wait until `check()` gives something true; return it."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while not (found := await check()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("it did not happen in time")
        await asyncio.sleep(0.02)
    return found


async def _no_threads(served: Served) -> bool:
    return await served.ann.threads.search() == []


async def test_a_stateless_wait_answers_the_values_and_leaves_no_thread(served: Served) -> None:
    values = await served.ann.runs.wait(None, "echo", input=HI)
    assert _texts(values) == [("human", "hi"), ("ai", "echo: hi")]
    assert await served.ann.threads.search() == []


async def test_a_stateless_stream_sends_its_events_then_its_thread_goes(served: Served) -> None:
    parts = [
        part
        async for part in served.ann.runs.stream(
            None, "echo", input=HI, stream_mode=["values", "updates"]
        )
    ]
    events = [part.event for part in parts]
    assert events[0] == "metadata"
    assert events[-1] == "end"
    assert "updates" in events
    last_values = [p.data for p in parts if p.event == "values"][-1]
    assert _texts(last_values) == [("human", "hi"), ("ai", "echo: hi")]
    await _until(lambda: _no_threads(served))


async def test_a_stateless_background_run_deletes_its_thread_and_record(served: Served) -> None:
    run = await served.ann.runs.create(None, "echo", input=HI)
    key = run["thread_id"]
    assert run["status"] in ("pending", "running", "success")
    await _until(lambda: _no_threads(served))
    with pytest.raises(NotFoundError):
        await served.ann.runs.get(key, run["run_id"])


async def test_on_completion_keep_keeps_the_thread_to_run_on(served: Served) -> None:
    run = await served.ann.runs.create(None, "echo", input=HI, on_completion="keep")
    key = run["thread_id"]
    values = await served.ann.runs.join(key, run["run_id"])
    assert _texts(values) == [("human", "hi"), ("ai", "echo: hi")]
    assert (await served.ann.runs.get(key, run["run_id"]))["status"] == "success"
    more = {"messages": [{"role": "user", "content": "more"}]}
    again = await served.ann.runs.wait(key, "echo", input=more)
    assert len(again["messages"]) == 4
    kept = await served.ann.runs.wait(None, "echo", input=HI, on_completion="keep")
    assert _texts(kept)[-1] == ("ai", "echo: hi")
    assert len(await served.ann.threads.search()) == 2
    assert await served.bob.threads.search() == []  # each user's own


async def test_a_batch_starts_a_run_on_a_thread_of_its_own_each(served: Served) -> None:
    words = ["one", "two"]
    payloads: list[Any] = [
        {
            "assistant_id": "echo",
            "input": {"messages": [{"role": "user", "content": word}]},
            "on_completion": "keep",
        }
        for word in words
    ]
    runs = await served.ann.runs.create_batch(payloads)
    assert len({run["thread_id"] for run in runs}) == 2
    for word, run in zip(words, runs, strict=True):
        values = await served.ann.runs.join(run["thread_id"], run["run_id"])
        assert _texts(values)[-1] == ("ai", f"echo: {word}")


async def test_a_stateless_run_that_cannot_start_leaves_no_thread(served: Served) -> None:
    with pytest.raises(httpx.HTTPStatusError) as refused:  # wait raises httpx's own
        await served.ann.runs.wait(None, "no-such-assistant", input=HI)
    assert refused.value.response.status_code == 404
    assert await served.ann.threads.search() == []


async def test_a_stateless_resume_and_an_oversized_batch_are_refused(served: Served) -> None:
    with pytest.raises(APIStatusError) as resume:
        await served.ann.runs.create(None, "echo", command={"resume": "yes"})
    assert resume.value.status_code == 422
    too_many: list[Any] = [{"assistant_id": "echo", "input": HI}] * 101
    with pytest.raises(APIStatusError) as batch:
        await served.ann.runs.create_batch(too_many)
    assert batch.value.status_code == 422
    assert await served.ann.threads.search() == []


async def test_many_stateless_runs_at_once_all_answer(served: Served) -> None:
    # each makes, runs on and deletes a thread of its own: one document of the user's
    # threads (and one of their runs) changed by all of them at once
    waiting = [served.ann.runs.wait(None, "echo", input=HI) for _ in range(30)]
    answers = await asyncio.gather(*waiting)
    assert all(_texts(values)[-1] == ("ai", "echo: hi") for values in answers)
    assert await served.ann.threads.search() == []
