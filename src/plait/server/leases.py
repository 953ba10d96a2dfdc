"""Worker leases: how the processes sharing a store tell each other their runs still run.

Each app (a worker) has an id of its own and, while it reserves or runs runs, a lease in
the store: the record `#lease/<worker id>`, `{"until": <Unix time>}`, written before its
first run starts and renewed by `Runs`' watcher every third of `seconds` while it has
runs. A run's "running" summary names the worker that runs it (`RunRecord.worker`). A
"running" summary whose worker's lease ran out is a run nobody runs any more: its worker
was killed, or lost the store for longer than a lease. The first process that reads it
takes it over (`take_over`, from `Runs.record`): it claims the summary for itself in one
compare-and-set (so one process does this), makes the run's last step checkpoint
resumable by any process, and ends the run as a stop would, "cancelled" with that
checkpoint (or "paused" again, when it died resuming a pause before its first step), so
`resume` goes on from its last step and no finished tool call runs again. A worker that
stops gives its lease up once its runs have stopped, so whatever it left running is taken
over without waiting for the lease to run out (what a worker read of another's lease is
trusted for a third of a lease at most).

Workers compare lease times by their own clocks: keep the clocks of the machines that
share a store in step (NTP) well within a lease. A worker that stalls for longer than its
lease has its runs taken over while it may still run them: pick a lease well above the
longest stall expected.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from datetime import UTC, datetime

from plait.core.checkpoint import Checkpoint
from plait.errors import CheckpointCorrupt, RunCancelled, SessionConflict
from plait.events import RunResult
from plait.server.bodies import RunRecord, RunSummary
from plait.server.run_index import RunIndex
from plait.server.summary import summarize
from plait.server.users import UserStore
from plait.stores.base import MAX_TTL, GuardedStore, Store

__all__ = ["DEFAULT_LEASE", "WorkerLease", "take_over"]

_log = logging.getLogger("plait.server")
#: Seconds a worker's lease lasts unless renewed (`create_app(run_lease=...)`).
DEFAULT_LEASE = 30.0
#: How many other workers' leases are remembered before those that ran out are forgotten.
_REMEMBERED = 1024


class WorkerLease:
    """This worker's lease in `store` (`seconds` long) and what it read of the others'."""

    def __init__(self, store: Store, seconds: float) -> None:
        self.worker = uuid.uuid4().hex
        self.seconds = seconds
        self._store = GuardedStore(store)
        self._until = 0.0  # until when this worker's lease holds, as last written
        # until when each other worker's lease held, and when that was read
        self._seen: dict[str, tuple[float, float]] = {}

    @staticmethod
    def _key(worker: str) -> str:
        return f"#lease/{worker}"

    async def _write(self, until: float) -> None:
        data = json.dumps({"until": until}).encode()
        ttl = min(self.seconds * 10, MAX_TTL)  # the record of a worker gone goes in time
        await self._store.put_session(self._key(self.worker), data, ttl=ttl)
        self._until = until

    async def hold(self) -> None:
        """Write this worker's lease anew when a third of it has passed (call it before a
        run is reserved or started, and while runs run)."""
        now = time.time()
        if self._until - now < self.seconds * 2 / 3:
            await self._write(now + self.seconds)

    async def release(self) -> None:
        """Give the lease up (the worker stops): what it left running is taken over at once."""
        if self._until:
            await self._write(0.0)

    async def alive(self, worker: str) -> bool:
        """Whether `worker`'s lease holds (this worker's always does); what was read is
        trusted for a third of a lease at most (a lease given up shows soon)."""
        now = time.time()
        until, read_at = self._seen.get(worker, (0.0, 0.0))
        if worker == self.worker or now < min(until, read_at + self.seconds / 3):
            return True
        data = await self._store.get_session(self._key(worker))
        until = float(json.loads(data)["until"]) if data is not None else 0.0
        if len(self._seen) >= _REMEMBERED:  # forget the workers long gone
            self._seen = {k: seen for k, seen in self._seen.items() if seen[0] > now}
        self._seen[worker] = (until, now)
        return until > now


async def take_over(
    store: UserStore, found: RunRecord, leases: WorkerLease, index: RunIndex
) -> RunRecord:
    """End the run of `found`, a "running" summary whose worker's lease ran out, as a stop
    would (one process does it: the others read what it wrote); return its summary now."""
    checkpoint_id = found.checkpoint_id
    if checkpoint_id is None:
        return found
    await leases.hold()
    current = await store.get_record_version("r", checkpoint_id)
    if current is None:
        return found
    stored = RunRecord.model_validate_json(current.data)
    if stored.status != "running" or stored.worker != found.worker:
        return stored
    claimed = stored.model_copy(update={"worker": leases.worker})
    try:  # now this worker's: no resume starts, and no one else takes it over
        await store.put_record(
            "r", checkpoint_id, claimed.model_dump_json().encode(), expected_version=current.version
        )
    except SessionConflict:
        again = await store.get_record("r", checkpoint_id)
        return stored if again is None else RunRecord.model_validate_json(again)
    _log.warning("run %s: its worker's lease ran out; it is ended as stopped", checkpoint_id)
    summary = await _stopped(store, checkpoint_id, stored)
    ended = RunRecord(
        **summary.model_dump(),
        run_id=stored.run_id,
        started_at=stored.started_at,
        updated_at=datetime.now(UTC),
    )
    data = ended.model_dump_json().encode()
    for key in {checkpoint_id, stored.run_id or checkpoint_id}:
        await store.put_record("r", key, data)
    started = stored.started_at or datetime.now(UTC)
    entry = (int(started.timestamp() * 1_000_000), summary.status, summary.agent)
    await index.update(store.store, store.runs_key, stored.run_id or checkpoint_id, entry)
    return ended


async def _stopped(store: UserStore, checkpoint_id: str, run: RunRecord) -> RunSummary:
    """Make the run's last checkpoint resumable by any process, if it saved one; return
    its summary as a stopped (or paused) run's."""
    record = await store.get_checkpoint(checkpoint_id)
    checkpoint = None
    if record is not None and record.status in ("pending", "claimed"):
        try:
            checkpoint = Checkpoint.decode(record.data, checkpoint_id)
        except CheckpointCorrupt:
            checkpoint = None
    if checkpoint is None:
        error = RunCancelled("its worker stopped before the run saved a step; run it again")
        return summarize(RunResult(error=error), agent=run.agent, session_id=run.session_id)
    assert record is not None
    if checkpoint.running or record.status == "claimed":
        await store.put_checkpoint(
            checkpoint_id, checkpoint.stopped() if checkpoint.running else record.data
        )
    if checkpoint.interrupts and not checkpoint.running:  # it died resuming this pause
        result = RunResult(checkpoint_id=checkpoint_id, interrupts=checkpoint.interrupts)
    else:
        error = RunCancelled(
            f"its worker stopped; resume checkpoint '{checkpoint_id}' to go on from its last step"
        )
        result = RunResult(error=error, checkpoint_id=checkpoint_id)
    return summarize(result, agent=run.agent, session_id=run.session_id)
