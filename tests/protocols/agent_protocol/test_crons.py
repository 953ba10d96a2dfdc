"""Crons through the official langgraph-sdk client: created, searched, counted, changed and
deleted per user; fired when due by the app's clock (a fake one the test moves), a missed
firing once, and each firing once however many workers share the store."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.errors import APIStatusError, NotFoundError

from plait.errors import UsageError
from plait.server import create_app
from tests.protocols.agent_protocol.receiver import receiving
from tests.protocols.agent_protocol.support import Served, make_agents, serve
from tests.server.support import WAIT

HI = {"messages": [{"role": "user", "content": "tick"}]}
START = datetime(2026, 1, 5, 12, 0, 30, tzinfo=UTC)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.at = START

    def __call__(self) -> datetime:
        return self.at

    def set(self, hour: int, minute: int, second: int = 0) -> None:
        self.at = START.replace(hour=hour, minute=minute, second=second)


async def _until(check: Callable[[], Awaitable[Any]]) -> Any:
    """Wait until `check()` gives something true; return it."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while not (found := await check()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("it did not happen in time")
        await asyncio.sleep(0.02)
    return found


def _at(hour: int, minute: int) -> str:
    return START.replace(hour=hour, minute=minute, second=0).isoformat()


async def test_crons_are_created_searched_changed_and_deleted(tmp_path: Path) -> None:
    async with serve(tmp_path, clock=Clock()) as served:
        thread = await served.ann.threads.create()
        key = thread["thread_id"]
        cron = await served.ann.crons.create_for_thread(
            key, "echo", schedule="*/5 * * * *", input=HI, metadata={"team": "a"}
        )
        assert cron["thread_id"] == key
        assert cron["schedule"] == "*/5 * * * *"
        assert cron["next_run_date"] == _at(12, 5)
        assert cron["enabled"] is True
        other = await served.ann.crons.create("echo", schedule="0 * * * *", input=HI)
        assert other["thread_id"] is None
        assert await served.ann.crons.count() == 2
        assert await served.ann.crons.count(thread_id=key) == 1
        found = await served.ann.crons.search(metadata={"team": "a"})
        assert [c["cron_id"] for c in found] == [cron["cron_id"]]
        changed = await served.ann.crons.update(cron["cron_id"], enabled=False)
        assert changed["enabled"] is False
        off = await served.ann.crons.search(enabled=False)
        assert [c["cron_id"] for c in off] == [cron["cron_id"]]
        assert await served.bob.crons.count() == 0
        with pytest.raises(NotFoundError):
            await served.bob.crons.delete(cron["cron_id"])
        await served.ann.crons.delete(cron["cron_id"])
        assert [c["cron_id"] for c in await served.ann.crons.search()] == [other["cron_id"]]
        with pytest.raises(NotFoundError):
            await served.ann.crons.update(cron["cron_id"], enabled=True)
        with pytest.raises(APIStatusError) as refused:
            await served.ann.crons.update(other["cron_id"], schedule="soon")
        assert refused.value.response.status_code == 422
        moved = await served.ann.crons.update(other["cron_id"], schedule="30 * * * *")
        assert moved["next_run_date"] == _at(12, 30)


@pytest.mark.parametrize(
    ("schedule", "options"),
    [
        ("every minute", {}),
        ("* * * *", {}),
        ("61 * * * *", {}),
        ("* * * * *", {"timezone": "Mars/Olympus"}),
        ("* * * * *", {"webhook": "http://example.com/hook"}),
        ("* * * * *", {"context": {"no_such_option": 1}}),
    ],
)
async def test_a_bad_cron_is_refused(served: Served, schedule: str, options: dict) -> None:
    with pytest.raises(APIStatusError) as refused:
        await served.ann.crons.create("echo", schedule=schedule, **options)
    assert refused.value.response.status_code == 422
    assert await served.ann.crons.count() == 0


async def test_a_cron_of_an_unknown_assistant_or_thread_is_not_found(served: Served) -> None:
    with pytest.raises(NotFoundError):
        await served.ann.crons.create("nobody", schedule="* * * * *")
    with pytest.raises(NotFoundError):
        await served.ann.crons.create_for_thread("no-thread", "echo", schedule="* * * * *")


async def test_the_schedule_is_read_in_its_timezone_up_to_its_end_time(tmp_path: Path) -> None:
    async with serve(tmp_path, clock=Clock()) as served:
        # 9:00 in New York, in January, is 14:00 UTC
        cron = await served.ann.crons.create(
            "echo", schedule="0 9 * * *", timezone="America/New_York"
        )
        assert cron["next_run_date"] == _at(14, 0)
        ending = await served.ann.crons.create(
            "echo", schedule="0 9 * * *", end_time=START + timedelta(hours=1)
        )
        assert ending["next_run_date"] is None


async def test_a_due_cron_runs_and_missed_firings_run_once(tmp_path: Path) -> None:
    clock = Clock()
    async with serve(tmp_path, clock=clock, cron_poll=0.02) as served:
        thread = await served.ann.threads.create()
        key = thread["thread_id"]
        cron = await served.ann.crons.create_for_thread(key, "echo", schedule="* * * * *", input=HI)
        idle = await served.ann.crons.create("echo", schedule="* * * * *", input=HI)
        await served.ann.crons.update(idle["cron_id"], enabled=False)

        async def runs(count: int) -> list[dict[str, Any]] | None:
            found = await served.ann.runs.list(key)
            done = len(found) == count and all(r["status"] == "success" for r in found)
            return found if done else None

        clock.set(12, 1, 5)
        await _until(lambda: runs(1))
        clock.set(12, 5, 30)  # the firings of 12:02 to 12:05 were missed
        await _until(lambda: runs(2))

        async def moved_on() -> bool:
            [found] = await served.ann.crons.search(thread_id=key)
            return bool(found["next_run_date"] == _at(12, 6))

        await _until(moved_on)
        assert len(await served.ann.runs.list(key)) == 2
        values = (await served.ann.threads.get_state(key))["values"]
        assert [m["content"] for m in values["messages"]][-1] == "echo: tick"
        assert cron["cron_id"] != idle["cron_id"]
        # the disabled cron started nothing: no thread of its own
        assert await served.ann.threads.count(metadata={"cron_id": idle["cron_id"]}) == 0


async def test_each_firing_runs_once_across_workers_sharing_a_store(tmp_path: Path) -> None:
    clock = Clock()
    async with (
        serve(tmp_path, clock=clock, cron_poll=0.01) as one,
        serve(tmp_path, clock=clock, cron_poll=0.01) as two,
    ):
        cron = await one.ann.crons.create("echo", schedule="* * * * *", input=HI)
        mine = {"cron_id": cron["cron_id"]}
        for minute in (1, 2, 3):
            clock.set(12, minute, 1)

            async def fired(count: int = minute) -> bool:
                return bool(await two.ann.threads.count(metadata=mine) >= count)

            await _until(fired)

        async def moved_on() -> bool:
            [found] = await one.ann.crons.search()
            return bool(found["next_run_date"] == _at(12, 4))

        await _until(moved_on)
        threads = await one.ann.threads.search(metadata=mine, limit=100)
        assert len(threads) == 3
        for thread in threads:
            values = await _until(lambda t=thread: _answered(one, t["thread_id"]))
            assert values[-1] == "echo: tick"


async def _answered(served: Served, thread_id: str) -> list[str] | None:
    messages = (await served.ann.threads.get_state(thread_id))["values"]["messages"]
    return [m["content"] for m in messages] if len(messages) == 2 else None


async def test_a_cron_run_posts_its_end_to_the_cron_webhook(tmp_path: Path) -> None:
    clock = Clock()
    with receiving() as receiver:
        options = {"clock": clock, "cron_poll": 0.02, "webhook_allow": ["127.0.0.1"]}
        async with serve(tmp_path, **options) as served:
            cron = await served.ann.crons.create(
                "echo", schedule="* * * * *", input=HI, webhook=receiver.url
            )
            clock.set(12, 1, 1)
            [got] = await asyncio.to_thread(receiver.wait_for, 1)
            [thread] = await served.ann.threads.search(metadata={"cron_id": cron["cron_id"]})
    assert got.json["thread_id"] == thread["thread_id"]
    assert got.json["status"] == "success"


def test_cron_poll_must_be_positive() -> None:
    with pytest.raises(UsageError, match="cron_poll"):
        create_app(make_agents(), cron_poll=0)
