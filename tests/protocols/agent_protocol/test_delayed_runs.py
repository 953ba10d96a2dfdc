"""Delayed runs (`after_seconds`) through the official langgraph-sdk client: `pending`
until the app's clock (a fake one the test moves) reaches their start, then run once;
cancelled before, they never start."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.errors import APIStatusError, NotFoundError

from tests.protocols.agent_protocol.support import Served, serve
from tests.server.support import WAIT

HI = {"messages": [{"role": "user", "content": "later"}]}


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.at = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.at


async def _until(check: Callable[[], Awaitable[Any]]) -> Any:
    """Wait until `check()` gives something true; return it."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while not (found := await check()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("it did not happen in time")
        await asyncio.sleep(0.02)
    return found


async def _status(served: Served, thread_id: str, run_id: str) -> str:
    return str((await served.ann.runs.get(thread_id, run_id))["status"])


async def test_a_delayed_run_is_pending_until_its_start(tmp_path: Path) -> None:
    clock = Clock()
    async with serve(tmp_path, clock=clock, cron_poll=0.02) as served:
        thread = await served.ann.threads.create()
        key = thread["thread_id"]
        run = await served.ann.runs.create(key, "echo", input=HI, after_seconds=120)
        assert run["status"] == "pending"
        witness = await served.ann.crons.create("echo", schedule="* * * * *")
        clock.at += timedelta(seconds=65)  # not due yet: the cron of 12:01 shows a look passed
        await _until(lambda: served.ann.threads.count(metadata={"cron_id": witness["cron_id"]}))
        assert await _status(served, key, run["run_id"]) == "pending"
        assert (await served.ann.threads.get_state(key))["values"]["messages"] == []
        clock.at += timedelta(seconds=60)
        await _until(lambda: _finished(served, key, run["run_id"]))
        values = (await served.ann.threads.get_state(key))["values"]
        assert [m["content"] for m in values["messages"]] == ["later", "echo: later"]
        assert [r["run_id"] for r in await served.ann.runs.list(key)] == [run["run_id"]]


async def _finished(served: Served, thread_id: str, run_id: str) -> bool:
    return await _status(served, thread_id, run_id) == "success"


async def test_wait_with_a_delay_answers_once_the_run_ran(tmp_path: Path) -> None:
    clock = Clock()
    async with serve(tmp_path, clock=clock, cron_poll=0.02) as served:
        thread = await served.ann.threads.create()
        waiting = asyncio.ensure_future(
            served.ann.runs.wait(thread["thread_id"], "echo", input=HI, after_seconds=5)
        )
        await _until(lambda: served.ann.runs.list(thread["thread_id"]))
        assert not waiting.done()
        clock.at += timedelta(seconds=6)
        values = await asyncio.wait_for(waiting, WAIT)
        assert values["messages"][-1]["content"] == "echo: later"


async def test_a_delayed_run_cancelled_before_its_start_never_starts(tmp_path: Path) -> None:
    clock = Clock()
    async with serve(tmp_path, clock=clock, cron_poll=0.02) as served:
        thread = await served.ann.threads.create()
        key = thread["thread_id"]
        run = await served.ann.runs.create(key, "echo", input=HI, after_seconds=60)
        with pytest.raises(NotFoundError):
            await served.bob.runs.cancel(key, run["run_id"])
        cancelled = await served.ann.runs.cancel(key, run["run_id"])
        assert cancelled["status"] == "interrupted"
        clock.at += timedelta(seconds=61)
        witness = await served.ann.crons.create("echo", schedule="* * * * *")
        clock.at += timedelta(minutes=1)
        await _until(lambda: served.ann.threads.count(metadata={"cron_id": witness["cron_id"]}))
        assert await _status(served, key, run["run_id"]) == "interrupted"
        assert (await served.ann.threads.get_state(key))["values"]["messages"] == []


async def test_a_delayed_run_is_checked_when_created(served: Served) -> None:
    thread = await served.ann.threads.create()
    with pytest.raises(NotFoundError):
        await served.ann.runs.create(thread["thread_id"], "nobody", input=HI, after_seconds=5)
    with pytest.raises(APIStatusError) as refused:
        await served.ann.runs.create(
            thread["thread_id"], "echo", input=HI, after_seconds=5, webhook="http://x.test/"
        )
    assert refused.value.response.status_code == 422
    assert await served.ann.runs.list(thread["thread_id"]) == []
