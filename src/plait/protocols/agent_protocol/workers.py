"""What the workers sharing a store do for each other's threads: tell which runs still
hold a thread, end the records of runs whose worker is gone, start queued runs.

A thread's run is *released* (it holds its thread no more, `multitask`) when its server
run has ended (its summary is not "running"; a run whose worker's lease ran out is taken
over and ended as a stop as its summary is read, `plait.server.leases`) or, reserved but
not started yet, when the worker that reserved it has lost its lease. A released record
that still says `pending` or `running` (its worker was killed, or stopped before it could
record the run's end) is ended here, once, as the run's own end would have: `interrupted`
keeping the checkpoint the run stopped with, so the thread goes on with its turn (a run
that saved no step leaves nothing to keep), and its webhook is sent. Runs are reserved
(`reserve_run`) and claimed from the queue (`start_next`) under the worker's lease, so no
worker takes a live worker's reservation for a dead one's.

A thread with queued runs is listed in the server-wide `queued` document: every worker's
scheduler (`crons.Scheduler`) starts the next queued run of each listed thread that is
free every `cron_poll` seconds (`sweep_queues`), so the queue of a worker that stopped or
was killed goes on on the others. A worker that is stopping starts no queued run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from plait.errors import CheckpointNotFound
from plait.protocols.agent_protocol.documents import Document, SharedDocument
from plait.protocols.agent_protocol.multitask import (
    Stop,
    active,
    age,
    claim_next,
    finish,
    has_queue,
    reserve,
    stopped_turns,
)
from plait.protocols.agent_protocol.records import run_ended
from plait.protocols.agent_protocol.stream import run_status
from plait.protocols.agent_protocol.thread_records import runs_document
from plait.server.caller import Caller, Server

__all__ = ["RESERVED_SECONDS", "released_runs", "reserve_run", "start_next", "sweep_queues"]

_log = logging.getLogger("plait.server")
_QUEUED = "queued"
#: How long the reservation of a server that names no worker holds its thread on its own.
RESERVED_SECONDS = 60.0
#: How a released run ended: its status, and the checkpoint it stopped with (if any).
Outcome = tuple[str, str | None]


async def _outcome(who: Caller, record: dict[str, Any]) -> Outcome | None:
    """Return how the thread's run `record` ended if it holds its thread no more."""
    checkpoint = record.get("checkpoint")
    if checkpoint is None:  # reserved, not started: its worker must still hold its lease
        worker = record.get("worker")
        if worker is None:
            gone = age(record) >= RESERVED_SECONDS
        else:
            gone = not await who.server.runs.leases.alive(worker)
        return ("interrupted", None) if gone else None
    try:
        summary = await who.server.runs.summary(who.store, checkpoint)
    except CheckpointNotFound:
        return "error", None
    if summary.status == "running":
        return None
    return run_status(summary), summary.checkpoint_id if summary.status == "cancelled" else None


def _end_released(
    stored: dict[str, Any], released: dict[str, tuple[str | None, Outcome]]
) -> list[tuple[str, str | None]]:
    """End the records of `released` (run id -> the checkpoint seen, how it ended) that
    still say they run; return those (with each one's webhook)."""
    ended = []
    for key, (seen, (status, stopped_at)) in released.items():
        found = stored.get(key)
        if found is None or found.get("queued") or found.get("checkpoint") != seen:
            continue
        if found.get("status") in ("pending", "running"):
            finish(stored, key, status, stopped_at)
            ended.append((key, found.get("webhook")))
    return ended


async def released_runs(
    who: Caller, thread_id: str, records: dict[str, Any] | None = None
) -> set[str]:
    """Return the thread's reserved or started runs that hold it no more, ending the
    records of those that still say they run (`records`: the thread's runs document as
    just read; None: it is read here)."""
    released: dict[str, tuple[str | None, Outcome]] = {}
    document = runs_document(who, thread_id)
    for key, record in (await document.read() if records is None else records).items():
        if active(record, thread_id) and not record.get("queued"):
            outcome = await _outcome(who, record)
            if outcome is not None:
                released[key] = (record.get("checkpoint"), outcome)
    if released:
        edit = partial(_end_released, released=released)
        for key, webhook in await document.change(edit):
            await run_ended(who, thread_id, key, webhook)
    return set(released)


async def reserve_run(
    who: Caller,
    thread_id: str,
    run_id: str,
    record: dict[str, Any],
    strategy: str,
    request: Callable[[], dict[str, Any]],
    document: Document,
    fresh: bool = False,
) -> tuple[list[Stop] | None, dict[str, str]]:
    """Reserve run `run_id` (`record`) on the thread for this worker, or queue it (with
    its `request()`) as `strategy` says (`multitask.reserve`), in the thread's runs
    `document`; return the runs it stops (None: it starts now) and, when it starts now, the
    thread's runs whose turns it is to keep (`multitask.stopped_turns`). The thread's runs
    are read once: the reservation is written from that read unless a released run's
    record was ended in between. `fresh`: the thread was just made, so its runs document
    is most likely not written yet; the reservation is then first tried as its first
    write, without reading it (a thread with no runs is free, and has no stopped turn).

    Raises:
        ApiError: `409`, the thread is busy and the strategy is `reject`.
    """
    leases = who.server.runs.leases
    await leases.hold()
    mine = {**record, "worker": leases.worker}
    if fresh and await document.create({run_id: mine}):
        return None, {}
    seen = await document.snapshot()
    released = await released_runs(who, thread_id, seen.value())

    def edit(stored: dict[str, Any]) -> tuple[list[Stop] | None, dict[str, str]]:
        stop = reserve(stored, thread_id, run_id, mine, strategy, released, request)
        return stop, {} if stop is not None else stopped_turns(stored, thread_id)

    stop, stopped = await document.change(edit, None if released else seen)
    if stop is not None:
        await _list_queue(who, thread_id)
    return stop, stopped


async def start_next(
    who: Caller,
    thread_id: str,
    launch: Callable[[str, dict[str, Any]], Awaitable[object]],
) -> None:
    """Start the thread's next queued run if the thread is free (`launch(run id,
    request)`); a run that cannot start ends as `error` and the next one is tried."""
    runs = who.server.runs
    document = runs_document(who, thread_id)
    while not runs.stopping:
        await runs.leases.hold()
        released = await released_runs(who, thread_id)
        claim = partial(
            claim_next, thread_id=thread_id, released=released, worker=runs.leases.worker
        )
        claimed = await document.change(claim)
        if claimed is None:
            return
        run_id, request = claimed
        try:
            await launch(run_id, request)
            return
        except Exception as exc:
            _log.warning("queued run %s of thread %s did not start: %s", run_id, thread_id, exc)
            await document.change(partial(finish, run_id=run_id, status="error"))


async def _has_queue(who: Caller, thread_id: str) -> bool:
    return has_queue(await runs_document(who, thread_id).read(), thread_id)


async def _list_queue(who: Caller, thread_id: str) -> None:
    """List the thread in the server-wide `queued` document (if it is not yet)."""
    shared = SharedDocument(who.server.store, _QUEUED)
    key = f"{who.user}/{thread_id}"
    if key not in await shared.read():
        entry = {"user": who.user, "thread_id": thread_id}
        await shared.change(lambda stored: stored.update({key: entry}))


def _unlist(stored: dict[str, Any], key: str) -> None:
    stored.pop(key, None)


async def sweep_queues(
    server: Server,
    caller: Callable[[str], Caller],
    start: Callable[[Caller, str], Awaitable[None]],
) -> None:
    """Start the next queued run of each listed thread that is free (`start(caller of its
    user, thread id)`); a thread whose queue is empty leaves the list."""
    shared = SharedDocument(server.store, _QUEUED)
    for key, entry in (await shared.read()).items():
        if server.runs.stopping:
            return
        who, thread_id = caller(entry["user"]), entry["thread_id"]
        try:
            await start(who, thread_id)
            if not await _has_queue(who, thread_id):
                await shared.change(partial(_unlist, key=key))
                if await _has_queue(who, thread_id):  # a run was queued meanwhile
                    await _list_queue(who, thread_id)
        except Exception:
            _log.exception("could not start the queued runs of thread %s", thread_id)
