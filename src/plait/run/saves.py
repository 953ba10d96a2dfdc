"""What a run stream saves as it goes, and the leases that keep a live run's checkpoint.

A run saves a checkpoint when it pauses (always under a new id) or at a safe point
(`durability="step"`: under the run's own id, held by a lease while the run lives, and kept
in the run's history; a stop asked for: as a pause), retires a resumed checkpoint for good
(or gives it back, as it was, when the resume is refused), and writes its session turn.
`RunSaves` holds these steps for `plait.run.stream.RunStream`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from plait._util.fast import built
from plait.core.checkpoint import Checkpoint, Lease
from plait.core.context import Frame
from plait.core.hooks import HookChain, notify
from plait.core.run_state import IdSource, SaveKind
from plait.errors import (
    CheckpointAlreadyResumed,
    CheckpointCorrupt,
    PlaitError,
    ResumeError,
    RunCancelled,
)
from plait.events import AgentAction, AgentEvent, HandoffLog, InterruptCtx, InterruptInfo
from plait.run.sessions import SessionCatalog, SessionTurn
from plait.run.time_travel import StepLog
from plait.stores.base import CheckpointWrite, GuardedStore

__all__ = ["RunSaves", "RunSetup", "check_lease", "end_lease", "lease_owner", "weak_saver"]

EventFilter = Callable[[AgentEvent], bool]

# Owners of the leases held by runs alive in this process ("host:pid:token").
_HOST = socket.gethostname()
_LIVE: set[str] = set()


@dataclasses.dataclass(slots=True)
class RunSetup:
    """What a runner gives each of its streams: where to save, and the run's options."""

    agent_name: str
    store: GuardedStore
    active: weakref.WeakValueDictionary[str, Any]  # the runner's live streams, by run id
    event_filter: EventFilter | None
    durability: str
    ids: IdSource
    hooks: HookChain
    max_transfers: int | None
    lease: float
    keep_steps: bool
    checkpoint_ttl: float | None
    session_ttl: float | None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    catalog: SessionCatalog | None = None  # where the store's sessions are listed
    keep_history: int = 0  # the last steps kept as the run's history (time travel)
    effects: Any = None  # what the gates of its tool calls use (`plait.effects.EffectRun`)


def lease_owner(ids: IdSource) -> str:
    """Return a new owner for the leases of a run's step checkpoints, alive in this process
    until `end_lease`."""
    owner = f"{_HOST}:{os.getpid()}:{ids.new_id()}"
    _LIVE.add(owner)
    return owner


def end_lease(owner: str) -> None:
    """The run holding leases as `owner` has ended: its step checkpoint may be resumed."""
    _LIVE.discard(owner)


def check_lease(checkpoint: Checkpoint) -> None:
    """Refuse to resume the step checkpoint of a run that is still alive: it is taken, as a
    resumed checkpoint is (`CheckpointAlreadyResumed`, a `ResumeError`)."""
    lease = checkpoint.lease
    if not checkpoint.running or lease is None or lease.until <= time.time():
        return
    host, _, rest = lease.owner.partition(":")
    pid = rest.partition(":")[0]
    if host == _HOST:
        if pid == str(os.getpid()):
            if lease.owner not in _LIVE:
                return  # this process's run has ended
        elif pid.isdigit() and not _pid_alive(int(pid)):
            return  # the process that ran it is gone
    raise CheckpointAlreadyResumed(  # taken by a live run, as a resume would take it
        f"checkpoint '{checkpoint.checkpoint_id}' is held by a run that is still going "
        f"({lease.owner}, lease for {lease.until - time.time():.0f} s more); resume it once "
        "that run has stopped"
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def weak_saver(stream: RunSaves) -> Callable[[SaveKind, Frame], Awaitable[Any]]:
    """The stream's safe-point saver, without a reference cycle between run and stream (so
    dropping an unfinished stream closes its run at once)."""
    ref = weakref.ref(stream)

    async def save(kind: SaveKind, ctx: Frame) -> AgentEvent | None:
        stream = ref()
        if stream is None:
            return None
        return await stream._save_at_safe_point(kind, ctx)

    return save


class RunSaves:
    """The saving half of a run stream: its checkpoints, step saves and session turn.

    `RunStream` sets these fields; the methods here write what the run keeps.
    """

    __slots__ = (
        "_checkpoint_id",
        "_claimed",
        "_ctx",
        "_earlier_handoffs",
        "_error",
        "_forked",
        "_handoffs",
        "_last_event",
        "_log",
        "_owner",
        "_pause_id",
        "_paused",
        "_resumed_from",
        "_saved",
        "_setup",
        "_steps",
        "_turn",
    )

    _setup: RunSetup
    _ctx: Frame | None
    _turn: SessionTurn | None
    _resumed_from: str | None
    _forked: bool
    _checkpoint_id: str | None  # the run's own id: its step saves go here
    _pause_id: str | None  # where it paused (a new id after a resume)
    _paused: bool
    _steps: int  # step checkpoints written
    _log: StepLog | None  # the run's history, made at its first step save
    _last_event: AgentEvent | None
    _error: PlaitError | None
    _earlier_handoffs: tuple[HandoffLog, ...]
    _handoffs: list[HandoffLog]
    _claimed: bytes | None  # a resumed checkpoint, as it was
    _owner: str  # who holds the lease of its step checkpoints
    _saved: tuple[str, bytes] | None  # its last step checkpoint, if nothing was written since

    @property
    def checkpoint_id(self) -> str:
        """Return the id this run is saved under: where it paused or was cancelled, else
        the id its step checkpoints (and a first pause) use (made on first use)."""
        if self._pause_id is not None:
            return self._pause_id
        if self._checkpoint_id is None:
            self._checkpoint_id = self._setup.ids.new_id()
            self._setup.active[self._checkpoint_id] = self
        return self._checkpoint_id

    async def _keep_failed_turn(self, error: PlaitError | None, ctx: Frame) -> None:
        """A failed run keeps its turn in its session (see `plait.session`), unless its
        resume was given back (the checkpoint, left as it was, still holds the turn)."""
        turn = self._turn
        if turn is None or isinstance(error, ResumeError | CheckpointCorrupt):
            return
        with contextlib.suppress(Exception):  # the run's own error is the one to report
            await turn.settle_failed()
            await self._save_turn(turn, ctx)

    async def _save_turn(self, turn: SessionTurn, ctx: Frame) -> None:
        """Append the turn to its session and list the session as written by this agent."""
        setup = self._setup
        stamp = ctx.run.ids.now()
        await turn.save(
            setup.store,
            ctx.session_values,
            [*self._earlier_handoffs, *self._handoffs],
            setup.session_ttl,
            ctx.state,
            ctx.run.local,
            stamp=stamp,
        )
        if setup.catalog is not None:
            await setup.catalog.touch(turn.session_id, stamp, setup.agent_name)

    async def _keep_records(self) -> None:
        ctx = self._ctx
        turn = self._turn
        if turn is not None and self._error is None and ctx is not None:
            await self._save_turn(turn, ctx)
        if self._resumed_from is not None or self._steps:
            await self._retire(self._checkpoint_id)

    async def _retire(self, checkpoint_id: str | None) -> None:
        """Mark a checkpoint done for good (it stays readable until its TTL)."""
        if checkpoint_id is None:
            return
        store = self._setup.store
        saved, self._saved = self._saved, None
        if saved is not None and saved[0] == checkpoint_id:  # its step checkpoint, pending
            done: list[CheckpointWrite] = [(checkpoint_id, saved[1], "done")]
            # committed as its steps were (a store may not wait for its disk): resumed
            # after a crash of the store's server that lost it, the run goes on from there
            await store.put_checkpoints(done, ttl=self._setup.checkpoint_ttl, flush=False)
            return
        record = await store.get_checkpoint(checkpoint_id)
        if record is not None and record.status != "done":
            await store.put_checkpoint(
                checkpoint_id, record.data, status="done", ttl=self._setup.checkpoint_ttl
            )

    async def _unclaim(self) -> None:
        """A resume the agents refused (they no longer match the checkpoint), or that met a
        damaged journal entry, leaves the checkpoint pending, as it was, so it can be
        resumed by the right agents, or once the entry is repaired."""
        claimed, self._claimed = self._claimed, None
        if claimed is None or self._resumed_from is None:
            return
        with contextlib.suppress(PlaitError):  # the run's error is the one to report
            await self._setup.store.put_checkpoint(
                self._resumed_from, claimed, ttl=self._setup.checkpoint_ttl
            )

    def _new_pause_id(self) -> str:
        """A pause after a resume is saved under a new id; a first pause under the run's."""
        if self._resumed_from is not None:
            self._pause_id = self._setup.ids.new_id()
        else:
            self._pause_id = self.checkpoint_id
        return self._pause_id

    async def _write(
        self, checkpoint_id: str, interrupts: tuple[InterruptCtx, ...], *, running: bool
    ) -> bytes:
        """Write a paused (or stopped) run's checkpoint, waiting for the store's disk."""
        data = await self._encode(interrupts, running=running)
        self._saved = None  # no longer the last step checkpoint as written
        await self._setup.store.put_checkpoint(checkpoint_id, data, ttl=self._setup.checkpoint_ttl)
        return data

    async def _encode(self, interrupts: tuple[InterruptCtx, ...], *, running: bool) -> bytes:
        """Return the run's checkpoint as it stands (its session turn settled first)."""
        setup, ctx, turn = self._setup, self._ctx, self._turn
        assert ctx is not None
        if turn is not None:
            await turn.settle()
        lease = None
        if running:
            until = setup.ids.now().timestamp() + setup.lease
            lease = built(Lease, {"owner": self._owner, "until": until})  # a str and a float
        return Checkpoint.encode(
            ctx.snapshot(),
            interrupts,
            agent_name=setup.agent_name,
            session_id=turn.session_id if turn is not None else None,
            session_turn=list(turn.turn) if turn is not None else None,
            running=running,
            lease=lease,
            handoffs=[*self._earlier_handoffs, *self._handoffs],
        )

    async def _save_step(self, ctx: Frame) -> None:
        """Write the step checkpoint under the run's id, and keep it in the run's history
        (`plait.time_travel`), in one write of the store."""
        setup = self._setup
        checkpoint_id = self.checkpoint_id
        data = await self._encode((), running=True)
        writes: list[CheckpointWrite] = [(checkpoint_id, data, "pending")]
        log = self._log
        if log is None:
            log = self._log = StepLog(
                setup.store,
                setup.keep_history,
                setup.checkpoint_ttl,
                carry_on=self._forked or self._resumed_from is not None,
                keep_all=setup.keep_steps,
            )
        dropped: list[str] = []
        if log.active:
            root = self._ctx
            assert root is not None
            kept, dropped = await log.step(
                checkpoint_id,
                data,
                ctx.agent_name,
                self._last_event,
                root.session_values,
                root.state,
            )
            writes += kept
        # the next step writes again: its checkpoint need not wait for the store's disk
        await setup.store.put_checkpoints(writes, ttl=setup.checkpoint_ttl, flush=False)
        self._saved = (checkpoint_id, data)
        self._steps += 1
        for old in dropped:  # no longer listed in the history
            await setup.store.delete_checkpoint(old)
        failure = await notify(ctx.run.hooks.on_step_saved, "on_step_saved", ctx, checkpoint_id)
        if failure is not None:
            raise failure

    async def _pause(self, event: AgentEvent, ctx: Frame) -> AgentEvent:
        """Save the checkpoint of a pause (a new one); return the event reporting it."""
        assert event.action is not None and event.action.interrupted is not None
        contexts = event.action.interrupted.contexts
        try:
            checkpoint_id = self._new_pause_id()
            await self._write(checkpoint_id, contexts, running=False)
            if self._resumed_from is not None:
                await self._retire(self._checkpoint_id)
            if (effects := self._setup.effects) is not None and effects.waiting:
                await effects.list_questions(contexts, checkpoint_id, ctx.run.ids.now())
        except PlaitError as exc:
            self._pause_id = None
            return ctx.event(error=exc)
        self._paused = True
        failure = await notify(ctx.run.hooks.on_pause, "on_pause", ctx, contexts, checkpoint_id)
        if failure is not None:
            return ctx.event(error=failure)
        info = InterruptInfo(contexts=contexts, checkpoint_id=checkpoint_id)
        return dataclasses.replace(
            event, action=dataclasses.replace(event.action, interrupted=info)
        )

    async def _save_at_safe_point(self, kind: SaveKind, ctx: Frame) -> AgentEvent | None:
        """Write a step checkpoint (the run goes on), or stop a cancelled run with one."""
        try:
            if kind == "step":
                await self._save_step(ctx)
                return None
            checkpoint_id = self._new_pause_id()
            await self._write(checkpoint_id, (), running=False)
            if self._resumed_from is not None:
                await self._retire(self._checkpoint_id)
        except PlaitError as exc:
            return ctx.event(error=exc)
        self._paused = True
        error = ctx.run.stop_error or RunCancelled(
            f"the run was cancelled at a safe point; resume checkpoint '{checkpoint_id}' "
            "to continue"
        )
        self._error = error  # the run's, even when an agent run as a tool stopped it
        info = InterruptInfo(contexts=(), checkpoint_id=checkpoint_id)
        return ctx.event(action=AgentAction(interrupted=info), error=error)
