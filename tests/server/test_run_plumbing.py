"""The plumbing under a live run: its records' JSON, new ids, its queue, its stream's headers,
the index entries and ledger days it writes — each the same as the general way makes them."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from starlette.responses import Response

from plait.server.bodies import RunRecord, RunSummary
from plait.server.caller import CHECKPOINT_HEADER
from plait.server.ledger import _row_day, day_of
from plait.server.run_index import _entry_part, _part
from plait.server.run_queue import RunQueue
from plait.server.run_records import (
    NO_USAGE,
    encode_record,
    new_run_id,
    record_head,
    running_record,
)
from plait.server.runs import Relay
from plait.server.sse import EventStream

ODD = ["plain", 'a"b\\c', "é\u2028x\x00\x1f\x7f", "s\n\t\U0001f4a5"]


@pytest.mark.parametrize("text", ODD)
def test_a_running_record_is_the_record_of_the_running_summary(text: str) -> None:
    head = record_head(text, datetime(2026, 1, 2, 3, 4, 5, 6, UTC))
    summary = RunSummary.model_construct(
        status="running",
        checkpoint_id=f"c-{text}",
        final_output=None,
        interrupts=[],
        error=None,
        usage=NO_USAGE,
        handoffs=[],
        agent=f"a-{text}",
        session_id=f"s-{text}",
        metadata={},
    )
    made = running_record(f"c-{text}", f"a-{text}", f"s-{text}", head, "w1")
    expected = encode_record(summary, head, "w1")
    cut = made.index(b'"updated_at"')
    assert made[:cut] == expected[:cut]  # (the times differ)
    record = RunRecord.model_validate_json(made)
    assert (record.run_id, record.worker, record.session_id) == (text, "w1", f"s-{text}")
    no_session = running_record("c", "a", None, head, "w1")
    assert json.loads(no_session)["session_id"] is None


def test_new_run_ids_are_uuid4_hex() -> None:
    ids = {new_run_id() for _ in range(200)}
    assert len(ids) == 200
    for found in ids:
        parsed = uuid.UUID(hex=found)
        assert (parsed.hex, parsed.version, parsed.variant) == (found, 4, uuid.RFC_4122)


async def test_a_run_queue_wakes_its_reader_and_keeps_the_order() -> None:
    queue: RunQueue[int] = RunQueue()
    reader = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait(1)
    queue.put_nowait(2)
    assert await reader == 1
    assert (queue.qsize(), queue.empty(), queue.get_nowait(), queue.empty()) == (1, False, 2, True)
    with pytest.raises(asyncio.QueueEmpty):
        queue.get_nowait()
    cancelled = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    again = asyncio.ensure_future(queue.get())  # a reader that left makes room for the next
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError):
        await queue.get()  # one reader at a time
    queue.put_nowait(3)
    assert await again == 3


async def test_a_held_run_queue_wakes_its_reader_only_once_released() -> None:
    queue: RunQueue[int] = RunQueue()
    reader = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.hold()
    queue.put_nowait(1)
    queue.put_nowait(2)
    for _ in range(10):
        await asyncio.sleep(0)
    assert not reader.done()  # queued, not woken
    queue.release()
    assert await reader == 1
    queue.put_nowait(3)  # released: as before
    assert [queue.get_nowait(), await queue.get()] == [2, 3]
    queue.release()  # (not held: nothing to do)
    queue.hold()
    queue.put_nowait(4)
    assert await queue.get() == 4  # a reader that comes finds what is queued


class _Feed:
    def __init__(self) -> None:
        self.queue: RunQueue[Any] = RunQueue()
        self.relay = Relay()

    def nudge(self, nudge: Any) -> None:
        self.queue.put_nowait(nudge)


def _by_starlette(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    response = Response.__new__(EventStream)
    response.init_headers(
        {"cache-control": "no-store", "connection": "keep-alive", "x-accel-buffering": "no"}
        | headers
    )
    return response.raw_headers


@pytest.mark.parametrize(
    "headers",
    [{}, {CHECKPOINT_HEADER: "abc"}, {"X-Other": "1", "Cache-Control": "max-age=1"}],
)
def test_a_stream_has_the_headers_starlette_would_give_it(headers: dict[str, str]) -> None:
    assert EventStream(_Feed(), headers).raw_headers == _by_starlette(headers)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "entry", [[0, 17, "running", "assistant"], [3, 5, 'a"é', "b\u2028"], [True, 1.5, None, [1]]]
)
def test_an_index_entry_is_written_as_json_dumps_writes_it(entry: list[Any]) -> None:
    assert _entry_part("run-é", entry) == _part("run-é", entry)
    assert json.loads("{" + _entry_part("r", entry) + "}") == {"r": entry}


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 3, 4, 23, 59, 59, 999999, UTC),
        datetime(2026, 3, 4, 0, 0, tzinfo=UTC),
        datetime(2026, 3, 4, 23, 30, tzinfo=timezone(timedelta(hours=-3))),
        datetime(2026, 3, 4, 0, 30, tzinfo=timezone(timedelta(hours=5))),
    ],
)
def test_a_rows_day_is_its_utc_day(moment: datetime) -> None:
    assert _row_day(moment.isoformat()) == day_of(moment)


async def test_the_streams_of_a_loop_share_one_ping_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    from plait.server import sse

    monkeypatch.setattr(sse, "PING_INTERVAL", 30.0)
    pings = sse._Timers(asyncio.get_running_loop())
    got: dict[str, asyncio.Queue[Any]] = {"slow": asyncio.Queue(), "a": asyncio.Queue()}
    slow = pings.add(got["slow"].put_nowait)
    monkeypatch.setattr(sse, "PING_INTERVAL", 0.01)  # a later stream waits less: first
    first = pings.add(got["a"].put_nowait)
    for _ in range(3):
        assert await asyncio.wait_for(got["a"].get(), 10) is sse.Nudge.PING
    first[1] = slow[1] = None  # both streams ended
    await asyncio.sleep(0.05)
    assert got["slow"].empty()
    while not got["a"].empty():  # (pings sent before the end)
        got["a"].get_nowait()
    await asyncio.sleep(0.05)
    assert got["a"].empty()
    assert pings.timer is None or not pings.due or all(e[1] is None for e in pings.due)
    if pings.timer is not None:
        pings.timer.cancel()


async def test_a_streams_head_waits_once_on_the_loops_one_timer_for_heads() -> None:
    from plait.server import sse

    holds = sse._Timers(asyncio.get_running_loop(), sse.Nudge.OPEN, lambda: 0.01, repeat=False)
    got: dict[str, asyncio.Queue[Any]] = {k: asyncio.Queue() for k in ("a", "b", "gone", "z")}
    for key in ("a", "b"):
        holds.add(got[key].put_nowait)
    holds.add(got["gone"].put_nowait)[1] = None  # its head went out with its first event
    holds.add(got["z"].put_nowait)  # nudged last: the others were looked at before it
    for key in ("a", "b", "z"):
        assert await asyncio.wait_for(got[key].get(), 10) is sse.Nudge.OPEN
    assert not holds.due  # nobody is put back: each is nudged once
    assert all(queue.empty() for queue in got.values())  # and none for the gone one
