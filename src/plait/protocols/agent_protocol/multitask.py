"""Double texting: what a new run on a busy thread does (`multitask_strategy`), with the
thread's queue of runs kept in its runs document
(`plait.protocols.agent_protocol.thread_records`).

A run *holds* its thread from its reservation to its end: its record is `pending` or
`running`, not queued, and not released (`plait.protocols.agent_protocol.workers`: its
server run has ended, or the worker that reserved or runs it lost its lease). Every
change below is one compare-and-set of the document, so runs started at once, by any
processes sharing the store, see each other:
- `reject`: a run on a held thread (or one with queued runs) is refused (`409`);
- `enqueue`: the run's record joins the queue (`pending`, with its request) and starts
  when the thread is free, in the order the runs were queued (`claim_next`);
- `interrupt`: queued too, and each run holding the thread is marked `stop` and
  cancelled: it stops at its next safe point keeping its work (status `interrupted`);
- `rollback`: as `interrupt`, and when the stopped run ends the thread's session is put
  back as it was before the run started (its turn, messages and values, goes).
A run stopped by `interrupt` (a double text, a cancel, or its worker's end) keeps its
turn in its resumable checkpoint until the thread goes on: as the thread's next run
starts, `keep_stopped_turns` claims that checkpoint (it is then done: resuming it is
refused) and appends the turn it holds (the run's input and what it said before the
stop) to the thread's session, once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from plait.core.checkpoint import Checkpoint
from plait.errors import CheckpointNotFound
from plait.protocols.agent_protocol.documents import now
from plait.protocols.agent_protocol.thread_records import runs_document
from plait.run.sessions import SessionTurn
from plait.server.caller import Caller
from plait.server.limits import ApiError

__all__ = [
    "Stop",
    "active",
    "age",
    "claim_next",
    "finish",
    "keep_stopped_turns",
    "mark_stop",
    "reserve",
    "rewind",
    "stop_runs",
    "stopped_turns",
]

_ACTIVE = ("pending", "running")
#: A run to stop: its protocol id and the server's checkpoint id it runs under (None: not
#: started yet; it is stopped as it starts).
Stop = tuple[str, str | None]


def age(record: dict[str, Any]) -> float:
    """Return the seconds since run `record` was reserved (or created)."""
    since = datetime.fromisoformat(record.get("reserved_at") or record["created_at"])
    return (datetime.now(UTC) - since).total_seconds()


def active(record: dict[str, Any], thread_id: str) -> bool:
    """Whether `record` is a run of the thread that has not ended (queued ones too)."""
    return record.get("thread_id") == thread_id and record.get("status") in _ACTIVE


def _holds(key: str, record: dict[str, Any], thread_id: str, released: set[str]) -> bool:
    """Whether run `key` holds the thread: reserved or running, and not released."""
    if not active(record, thread_id) or record.get("queued"):
        return False
    return key not in released


def reserve(
    stored: dict[str, Any],
    thread_id: str,
    run_id: str,
    record: dict[str, Any],
    strategy: str,
    released: set[str],
    request: Callable[[], dict[str, Any]],
) -> list[Stop] | None:
    """Add `record` as the thread's run `run_id`: reserved to start now (None) when the
    thread is free (its runs all ended or `released`), else queued with its `request()`
    (what starts it later), marking what `strategy` stops (returned).

    Raises:
        ApiError: `409`, the thread is busy and the strategy is `reject`.
    """
    others = {key: other for key, other in stored.items() if key != run_id}  # not a delayed
    held = [key for key, other in others.items() if _holds(key, other, thread_id, released)]
    waiting = [o for o in others.values() if active(o, thread_id) and o.get("queued")]
    if not held and not waiting:
        stored[run_id] = record
        return None
    if strategy == "reject":
        raise ApiError(409, f"thread '{thread_id}' is busy; its run must end first")
    stored[run_id] = {**record, "queued": True, "request": request()}
    if strategy not in ("interrupt", "rollback"):
        return []
    for key in held:
        stored[key] = {**stored[key], "stop": strategy, "updated_at": now()}
    return [(key, stored[key].get("checkpoint")) for key in held]


def claim_next(
    stored: dict[str, Any], thread_id: str, released: set[str], worker: str
) -> tuple[str, dict[str, Any]] | None:
    """Reserve the thread's first queued run for `worker` if the thread is free; return it
    and its request."""
    if any(_holds(key, other, thread_id, released) for key, other in stored.items()):
        return None
    for key, record in stored.items():
        if active(record, thread_id) and record.get("queued"):
            request = record["request"]
            kept = {k: v for k, v in record.items() if k not in ("queued", "request")}
            stored[key] = {**kept, "reserved_at": now(), "updated_at": now(), "worker": worker}
            return key, request
    return None


async def stop_runs(who: Caller, runs: list[Stop]) -> None:
    """Cancel the started ones of `runs` (the others are stopped as they start)."""
    for _, checkpoint in runs:
        if checkpoint is not None:
            with contextlib.suppress(CheckpointNotFound):  # it ended meanwhile
                await who.server.runs.cancel(who.store, checkpoint)


def mark_stop(stored: dict[str, Any], run_id: str, action: str) -> str | None:
    """Mark run `run_id` to be stopped with `action` ("interrupt" or "rollback"); a queued
    one leaves the queue as `interrupted`. Return the checkpoint to cancel, if any."""
    found = stored.get(run_id)
    if found is None or found.get("status") not in _ACTIVE:
        return None
    if found.get("queued"):
        kept = {k: v for k, v in found.items() if k not in ("queued", "request")}
        stored[run_id] = {**kept, "status": "interrupted", "updated_at": now()}
        return None
    stored[run_id] = {**found, "stop": action, "updated_at": now()}
    return found.get("checkpoint")  # type: ignore[no-any-return]


def finish(
    stored: dict[str, Any], run_id: str, status: str, stopped_at: str | None = None
) -> dict[str, Any] | None:
    """Record that run `run_id` ended with `status` (`interrupted` when rolled back;
    `stopped_at`: the checkpoint a cancelled run stopped with); return its record."""
    found = stored.get(run_id)
    if found is None:
        return None
    final = "interrupted" if found.get("stop") == "rollback" else status
    kept = {"stopped_at": stopped_at} if stopped_at is not None else {}
    stored[run_id] = {**found, "status": final, **kept, "updated_at": now()}
    return dict(stored[run_id])


def finish_run(
    stored: dict[str, Any], thread_id: str, run_id: str, status: str, at: str | None
) -> tuple[dict[str, Any] | None, bool]:
    """`finish` run `run_id` of the thread; return its record and whether the thread has
    queued runs (None of them can be queued later without seeing this run ended)."""
    return finish(stored, run_id, status, at), has_queue(stored, thread_id)


def has_queue(stored: dict[str, Any], thread_id: str) -> bool:
    """Whether the thread has queued runs in its runs document `stored`."""
    # (`queued` first: most runs are not)
    return any(record.get("queued") and active(record, thread_id) for record in stored.values())


async def rewind(who: Caller, thread_id: str, before: bytes | None) -> None:
    """Put the thread's session back as it was (`before`: its stored bytes; None: none)."""
    if before is None:
        await who.sessions.delete(thread_id)
    else:
        await who.store.put_session(thread_id, before)


def stopped_turns(stored: dict[str, Any], thread_id: str) -> dict[str, str]:
    """Return the thread's runs stopped keeping their work whose turn the thread has not
    taken yet: run id -> the checkpoint each stopped with."""
    return {
        key: record["stopped_at"]
        for key, record in stored.items()
        if record.get("thread_id") == thread_id
        and record.get("stopped_at") is not None
        and record.get("stop") != "rollback"
    }


async def _keep_turn(who: Caller, thread_id: str, checkpoint_id: str) -> None:
    """Claim `checkpoint_id`, a stopped run's, if it is still to resume, and append the
    turn it holds to the thread's session (a run resumed instead adds its turn as it
    ends)."""
    record = await who.store.get_checkpoint(checkpoint_id)
    if record is None or record.status != "pending":
        return
    if not await who.store.claim_checkpoint(checkpoint_id, record.version):
        return  # a resume took it
    checkpoint = Checkpoint.decode(record.data, checkpoint_id)
    await who.store.put_checkpoint(checkpoint_id, record.data, status="done")
    turn = SessionTurn(thread_id, [], {}, [], checkpoint.session_turn)
    await turn.settle_failed()  # a tool call that got no result is left out
    stamp = datetime.now(UTC)
    values = checkpoint.snapshot().session_values
    await turn.save(who.store, values, checkpoint.handoffs, None, stamp=stamp)
    await who.store.session_catalog().touch(thread_id, stamp, checkpoint.agent)


async def keep_stopped_turns(
    who: Caller, thread_id: str, stopped: dict[str, str] | None = None
) -> None:
    """Append the turns of the thread's runs stopped by `interrupt` to its session, as the
    thread goes on with another run (call it while that run holds the thread); their
    checkpoints are then done, so no turn is added twice. `stopped`: those runs, as the
    reservation of the run going on found them (`stopped_turns`; None: read here)."""
    document = runs_document(who, thread_id)
    if stopped is None:
        stopped = stopped_turns(await document.read(), thread_id)
    for key, checkpoint_id in stopped.items():
        await _keep_turn(who, thread_id, checkpoint_id)

        def kept(stored: dict[str, Any], key: str = key) -> None:
            if key in stored:
                stored[key] = {k: v for k, v in stored[key].items() if k != "stopped_at"}

        await document.change(kept)
