"""The server's runs: each runs in a task of its own, apart from the request that started it.

A run's events go into a queue its response reads; a client that leaves does not stop the
run, which finishes (or pauses) and writes its summary to the store. Everything a run leaves
behind is in the store: a "running" summary when it starts, the final summary when it ends,
and cancel requests, which one watcher polls for every running run, so a cancel sent to any
process that shares the store stops it. Only the live runs themselves are kept in memory.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from plait.agents.options import RunOption
from plait.core.agent import Agent, AgentInput
from plait.core.agent_context import AgentContext
from plait.core.hooks import Hooks
from plait.errors import (
    CheckpointAlreadyResumed,
    CheckpointNotFound,
    PlaitError,
    ResumeError,
    RunCancelled,
)
from plait.events import AgentEvent, RunResult
from plait.messages import Message
from plait.run.runner import Runner, RunStream
from plait.server.bodies import RunRecord, RunSummary
from plait.server.budget import ledger_hooks
from plait.server.leases import WorkerLease, take_over
from plait.server.quotas import Tenants, Ticket
from plait.server.run_index import RunIndex
from plait.server.run_queue import RunQueue
from plait.server.run_records import (
    NO_USAGE,
    encode_record,
    new_run_id,
    record_head,
    running_record,
)
from plait.server.summary import encode_event, summarize
from plait.server.users import UserStore

__all__ = ["LiveRun", "Relay", "Runs"]

_log = logging.getLogger("plait.server")
_RECORD_ONLY = {"run_id", "started_at", "updated_at", "worker"}


class Nudge(enum.Enum):
    """What else wakes the reader of a run's queue: time to ping, the client left, or
    the stream's head has waited long enough for the run's first event."""

    PING = "ping"
    STOP = "stop"
    OPEN = "open"


#: What a run's queue carries: an event's JSON text (or bytes the response sends as they
#: are, or an event's JSON text with the bytes the response sends for it), then the run
#: summary last (and nudges to its reader at any time).
Item = str | bytes | tuple[str, bytes] | RunSummary | Nudge


class Relay(Hooks):
    """How a live run's events reach its response: by default each event's JSON text.

    A protocol served on the same runs subclasses it to send its own events (as `bytes`,
    sent as they are) and to end the stream its own way (`closing`). It is one of the run's
    hooks, so it sees the run's seams too.
    """

    put: Callable[[Item], None]
    """Queue an item for the response (set by the `LiveRun` the relay serves)."""

    opening = 0
    """How many items `attach` queues before the run's events (they may wait for the run's
    first event, to go out in one write with it and the response's head)."""

    def attach(self, run: LiveRun) -> None:
        """Serve `run`: queue into its queue."""
        self.put = run.queue.put_nowait

    async def relay(self, event: AgentEvent) -> None:
        """Queue what the response sends for `event`."""
        self.put(await encode_event(event))

    def closing(self, summary: RunSummary) -> bytes | None:
        """Return the last bytes of the stream for `summary` (None: the `run_end` event)."""
        return None


class _Accepted(Hooks):
    """Tell a live run that its resume (or fork) was accepted: the checkpoint is claimed
    (or the step to fork from was read)."""

    def __init__(self, live: LiveRun) -> None:
        self._live = live

    async def on_resume(self, ctx: AgentContext, checkpoint_id: str) -> None:
        """The resume claimed its checkpoint: the response can start."""
        self._live.accept()

    async def before_run(self, ctx: AgentContext, input: AgentInput) -> None:
        """The run starts (a fork's step was found): the response can start."""
        self._live.accept()


class LiveRun:
    """One run in this process: its task and the queue of what it yields."""

    def __init__(
        self,
        runs: Runs,
        store: UserStore,
        agent: str,
        checkpoint_id: str,
        session_id: str | None,
        *,
        resumed: bool,
        relay: Relay | None = None,
        previous: RunRecord | None = None,
    ) -> None:
        self.runs = runs
        self.store = store
        self.agent = agent
        self.checkpoint_id = checkpoint_id
        self.session_id = session_id
        # the run this is part of (a resume goes on with the run that paused), and its start
        self.run_id = (previous and previous.run_id) or checkpoint_id
        self.started_at = (previous and previous.started_at) or datetime.now(UTC)
        self.queue: RunQueue[Item] = RunQueue()
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.runner: Runner | None = None
        self.result: RunResult | None = None  # the run's result, once it has ended
        self.task: asyncio.Task[None] | None = None  # the task that runs it (`Runs`)
        self._cancel_seen: bytes | None = None
        self._resumed = resumed
        self.registered_at = 0.0
        self._running: asyncio.Future[None] | None = None
        # what every record and index entry of the run says of its id and start
        self._started = int(self.started_at.timestamp() * 1_000_000)
        self._head = record_head(self.run_id, self.started_at)
        self._index_key = store.runs_key
        #: (user, checkpoint id): how the registry knows this run.
        self.key = (store.user, checkpoint_id)
        self.relay = relay if relay is not None else Relay()
        self.relay.attach(self)
        self.ticket: Ticket | None = None  # its place under the user's max_concurrent_runs

    def running_summary(self) -> RunSummary:
        """Return the summary of this run while it runs (made from checked values)."""
        return RunSummary.model_construct(  # every field given: no default is copied
            status="running",
            checkpoint_id=self.checkpoint_id,
            final_output=None,
            interrupts=[],
            error=None,
            usage=NO_USAGE,
            handoffs=[],
            agent=self.agent,
            session_id=self.session_id,
            metadata={},
        )

    def accept(self) -> None:
        """The run has started (its resume, if any, was accepted): the response can start."""
        if self.ready.done():
            return
        self.runs.register(self)
        if self._resumed:  # a resumed run is recorded as running once its claim is made
            self._running = asyncio.ensure_future(self._record_running_quietly())
        self.ready.set_result(None)

    async def record_running(self) -> None:
        """Write the "running" summary of this run (also under its run id), and list it."""
        data = self._running_record()
        listed = self._list("running")  # written by the index's writer meanwhile
        try:
            await self.store.put_record("r", self.checkpoint_id, data)
            if self.run_id != self.checkpoint_id:
                await self.store.put_record("r", self.run_id, data)
        finally:
            await listed

    def _list(self, status: str) -> Awaitable[None]:
        """Set this run's status in the user's index of runs; return what to await for
        its write."""
        entry = (self._started, status, self.agent)
        return self.runs.index.change(self.store.store, self._index_key, self.run_id, entry)

    async def _record_running_quietly(self) -> None:
        try:
            await self.record_running()
        except Exception as exc:  # the run goes on; its final summary is written at its end
            _log.warning("could not record run %s as running: %s", self.checkpoint_id, exc)

    async def started(self) -> None:
        """Wait until the run has started and is recorded as running.

        Raises:
            PlaitError: The resume was refused (the run never started).
        """
        await asyncio.shield(self.ready)
        if self._running is not None:
            await asyncio.shield(self._running)

    def nudge(self, nudge: Nudge) -> None:
        """Wake the reader of this run's queue with `nudge`, also while the run's last event
        waits for its end (the client left, the head has waited `HEAD_HOLD`, a ping is due:
        what is queued goes out, or is dropped, now)."""
        self.queue.put_nowait(nudge)
        self.queue.release()

    async def outcome(self) -> tuple[RunSummary, list[str]]:
        """Wait for the end of the run; return its summary and the JSON of its events."""
        events: list[str] = []
        while True:
            item = await self.queue.get()
            if isinstance(item, RunSummary):
                return item, events
            if isinstance(item, str):
                events.append(item)
            elif type(item) is tuple:  # an event's text with its frame
                events.append(item[0])

    async def run(self, stream: RunStream) -> None:
        """Drive the run: queue its events, then write its summary."""
        try:
            try:
                relay = self.relay.relay
                async for event in stream:
                    if not self.ready.done():
                        self.accept()
                    if stream.ended:  # its last event goes out with its end, in one write
                        self.queue.hold()
                    await relay(event)
                result = await stream.collect()
            except asyncio.CancelledError:
                self._stopped()
                await stream.aclose()
                raise
            except Exception as exc:
                if not self.ready.done():  # a refused resume: the response reports it
                    self.ready.set_exception(exc)
                    return
                if not isinstance(exc, PlaitError):
                    _log.exception("run %s failed", self.checkpoint_id)
                    exc = PlaitError(f"the run failed: {type(exc).__name__}: {exc}")
                result = RunResult(error=exc)
            self.accept()
            await self._finish(result)
        finally:
            self.queue.release()  # (the end is queued, or the run's task was cancelled)
            self.runs.unregister(self)
            try:
                await self._free_place()
            finally:  # its last step: the runs no longer wait for it
                if self.task is not None:
                    self.runs._tasks.discard(self.task)

    async def _free_place(self) -> None:
        """Free the run's place under its user's `max_concurrent_runs` (once)."""
        ticket, self.ticket = self.ticket, None
        if ticket is not None:
            await ticket.release()

    def _stopped(self) -> None:
        """The run's task was cancelled (the server is stopping): end the response."""
        if not self.ready.done():
            self.ready.cancel()
            return
        error = RunCancelled("the server stopped before the run ended")
        self.result = RunResult(error=error)
        summary = summarize(self.result, agent=self.agent, session_id=self.session_id)
        self.queue.put_nowait(summary.model_copy(update={"checkpoint_id": None}))

    async def _finish(self, result: RunResult) -> None:
        """Write the run's summary (also under a new pause's id), then queue it."""
        self.result = result
        summary = summarize(result, agent=self.agent, session_id=self.session_id)
        data = self._encode(summary)
        try:
            if self._running is not None:
                await self._running  # the "running" record must not land after this one
            await self.store.put_record("r", self.checkpoint_id, data)
            paused = summary.checkpoint_id  # (a new pause's id, or this run's, or None)
            if paused is not None and paused != self.checkpoint_id:
                await self.store.put_record("r", paused, data)
            if self.run_id not in (self.checkpoint_id, paused):
                await self.store.put_record("r", self.run_id, data)
            await self._list(summary.status)
        except PlaitError as exc:  # the client still gets the summary
            _log.warning("could not save the summary of run %s: %s", self.checkpoint_id, exc)
        except Exception:
            _log.exception("could not save the summary of run %s", self.checkpoint_id)
        await self._free_place()  # before the client hears of the end
        self.queue.put_nowait(summary)
        self.queue.release()

    async def note_cancel_baseline(self) -> None:
        """Remember the cancel request stored before this run started (it is not for it)."""
        self._cancel_seen = await self.store.get_record("x", self.checkpoint_id)

    async def check_cancel(self) -> None:
        """Look in the store for a new cancel request of this run; pass it to the runner."""
        try:
            found = await self.store.get_record("x", self.checkpoint_id)
        except Exception as exc:
            _log.warning("could not read cancel requests of run %s: %s", self.key, exc)
            return
        if found is not None and found != self._cancel_seen and self.runner is not None:
            self._cancel_seen = found
            self.runner.cancel(self.checkpoint_id)

    def _running_record(self) -> bytes:
        """Return the stored record of this run's `running_summary`."""
        worker = self.runs.leases.worker
        return running_record(self.checkpoint_id, self.agent, self.session_id, self._head, worker)

    def _encode(self, summary: RunSummary) -> bytes:
        """Return the stored record of `summary` (a `RunRecord`): with the run's id, start
        and this time (and this worker, while it runs)."""
        return encode_record(summary, self._head, self.runs.leases.worker)


class Runs:
    """The runs of one app: starts them, resumes them, cancels them, reads their summaries
    (a run whose worker's lease ran out is taken over as it is read: `leases`)."""

    def __init__(
        self, agents: Mapping[str, Agent], *, cancel_poll: float, leases: WorkerLease
    ) -> None:
        self.agents = agents
        self.cancel_poll = cancel_poll
        self.leases = leases
        self.stopping = False  # set once the app stops: it starts no more queued runs
        self._tasks: set[asyncio.Task[None]] = set()
        self._live: dict[tuple[str, str], LiveRun] = {}
        self._watcher: asyncio.Future[None] | None = None
        self.index = RunIndex()  # the users' indexes of runs (`plait.server.run_index`)
        self.tenants: Tenants | None = None  # the users' quotas and ledger (set by the app)

    def register(self, run: LiveRun) -> None:
        """Know `run` as live in this process (a cancel then reaches it at once, and the
        cancel watcher looks for requests made elsewhere)."""
        loop = run.ready.get_loop()
        run.registered_at = loop.time()
        self._live[run.key] = run
        watcher = self._watcher
        if watcher is None or watcher.done() or watcher.get_loop() is not loop:
            self._watcher = asyncio.ensure_future(self._watch_cancels())

    async def _watch_cancels(self) -> None:
        """Every `cancel_poll` seconds, look for cancel requests of the live runs that have
        run that long (one task for all of them) and renew this worker's lease; stop when
        no run is left."""
        loop = asyncio.get_running_loop()
        while self._live:
            await asyncio.sleep(self.cancel_poll)
            since = loop.time() - self.cancel_poll
            due = [run for run in list(self._live.values()) if run.registered_at <= since]
            await asyncio.gather(*(run.check_cancel() for run in due))
            try:
                await self.leases.hold()
            except Exception as exc:  # tried again at the next look
                _log.warning("could not renew the lease of worker %s: %s", self.leases.worker, exc)

    def unregister(self, run: LiveRun) -> None:
        """Forget `run` (only if it is the one registered under its key)."""
        if self._live.get(run.key) is run:
            del self._live[run.key]

    def _check_served(self, checkpoint_id: str, agent: str) -> None:
        """Refuse to go on with a run whose agent this server does not run."""
        if agent not in self.agents:
            raise ResumeError(
                f"run '{checkpoint_id}' belongs to agent '{agent}', which this server does not run"
            )

    def _runner(self, run: LiveRun, hooks: list[Hooks], *, streaming: bool = False) -> Runner:
        """Return a runner of `run`'s agent on its user's store, saving every step (and
        keeping its model calls in the ledger, within the user's daily budgets)."""
        if self.tenants is not None:
            ledger = ledger_hooks(self.tenants, run.store.user, run.agent, run_id=run.run_id)
            hooks = [*hooks, ledger]
        return Runner(
            self.agents[run.agent],
            store=run.store,
            enable_streaming=streaming,
            hooks=hooks,
            durability="step",
            user=run.store.user,
        )

    async def _admit(self, run: LiveRun, *, queue: bool = False) -> None:
        """Let `run` start under its user's quotas (its place is freed as it ends; `queue`:
        wait for a place, see `Tenants.admit`).

        Raises:
            QuotaExceeded: A quota refuses it.
        """
        if self.tenants is not None:
            run.ticket = await self.tenants.admit(run.store.user, queue=queue)

    def _launch(self, run: LiveRun, runner: Runner, stream: RunStream) -> None:
        run.runner = runner
        run.task = task = asyncio.get_running_loop().create_task(run.run(stream))
        self._tasks.add(task)  # the run takes it out as it ends (`LiveRun.run`)

    async def start(
        self,
        store: UserStore,
        name: str,
        messages: list[Message],
        *,
        session_id: str | None,
        session_values: dict[str, Any] | None,
        streaming: bool = False,
        relay: Relay | None = None,
        options: Sequence[RunOption] = (),
        queue: bool = False,
    ) -> LiveRun:
        """Start a run of agent `name` (`streaming`: its models stream, `relay` sends its
        events, `options` are its per-run options; `queue`: wait for a place the user's
        quota gives); it is recorded as running before this returns.

        Raises:
            StoreError: The store failed before the run started.
        """
        await self.leases.hold()
        store = store.for_agent(name)
        run = LiveRun(self, store, name, new_run_id(), session_id, resumed=False, relay=relay)
        await self._admit(run, queue=queue)
        try:
            # a new id has no cancel request yet: none can be made before its summary exists
            await run.record_running()  # a store that fails here fails the request, not a run
        except BaseException:
            if run.ticket is not None:
                await run.ticket.release()
            raise
        runner = self._runner(run, [run.relay], streaming=streaming)
        stream = runner.run(
            messages,
            session_id=session_id,
            checkpoint_id=run.checkpoint_id,
            session_values=session_values,
            options=options,
        )
        run.accept()
        self._launch(run, runner, stream)
        return run

    async def resume(
        self,
        store: UserStore,
        checkpoint_id: str,
        targets: dict[str, Any] | None,
        answer: tuple[Any] | None = None,
        *,
        relay: Relay | None = None,
        options: Sequence[RunOption] = (),
    ) -> LiveRun:
        """Resume a paused run with `targets`, or `answer` (the one-tuple of the `value` for
        its one interrupt); return once the resume is accepted (`relay` sends its events,
        `options` are given to the resume).

        Raises:
            CheckpointNotFound: No such run of this user.
            CheckpointAlreadyResumed: It was resumed before, or is being resumed now.
            ResumeError: The answers do not fit its interrupts, or its agent is not served.
        """
        await self.leases.hold()
        previous = await self.record(store, checkpoint_id)
        if previous.status == "running":
            raise CheckpointAlreadyResumed(
                f"run '{checkpoint_id}' is running; it can be resumed once it pauses"
            )
        self._check_served(checkpoint_id, previous.agent)
        store = store.for_agent(previous.agent)
        run = LiveRun(
            self,
            store,
            previous.agent,
            checkpoint_id,
            previous.session_id,
            resumed=True,
            relay=relay,
            previous=previous,
        )
        await run.note_cancel_baseline()
        await self._admit(run)
        runner = self._runner(run, [_Accepted(run), run.relay])
        if answer is None:
            stream = runner.resume(checkpoint_id, targets, approver=store.user, options=options)
        else:
            stream = runner.resume(
                checkpoint_id, targets, value=answer[0], approver=store.user, options=options
            )
        self._launch(run, runner, stream)
        await run.started()  # a lost claim race is the runner's CheckpointAlreadyResumed
        return run

    async def fork(
        self,
        store: UserStore,
        checkpoint_id: str,
        step: int,
        session_values: dict[str, Any] | None,
        *,
        relay: Relay | None = None,
    ) -> LiveRun:
        """Start a new run from step `step` of the run `checkpoint_id` (with
        `session_values` over the step's; `relay` sends its events); return once it has
        started.

        Raises:
            CheckpointNotFound: No such run of this user, or it keeps no such step.
            ResumeError: Its agent is not served.
        """
        await self.leases.hold()
        previous = await self.summary(store, checkpoint_id)
        self._check_served(checkpoint_id, previous.agent)
        store = store.for_agent(previous.agent)
        run = LiveRun(self, store, previous.agent, new_run_id(), None, resumed=True, relay=relay)
        await self._admit(run)
        runner = self._runner(run, [_Accepted(run), run.relay])
        stream = runner.fork(checkpoint_id, step, run.checkpoint_id, session_values)
        self._launch(run, runner, stream)
        await run.started()  # an unknown step is the runner's CheckpointNotFound
        return run

    async def summary(self, store: UserStore, checkpoint_id: str) -> RunSummary:
        """Return the latest summary of a run.

        Raises:
            CheckpointNotFound: The user has no run with this id.
        """
        found = await self.record(store, checkpoint_id)
        return RunSummary.model_validate(found.model_dump(exclude=_RECORD_ONLY))

    async def record(self, store: UserStore, checkpoint_id: str) -> RunRecord:
        """Return the latest stored record of a run (its summary, run id and times); a
        running one whose worker's lease ran out is taken over first (`leases.take_over`).

        Raises:
            CheckpointNotFound: The user has no run with this id.
        """
        data = await store.get_record("r", checkpoint_id)
        if data is None:
            raise CheckpointNotFound(f"no run '{checkpoint_id}'")
        found = RunRecord.model_validate_json(data)
        if found.status == "running" and found.worker is not None:
            if not await self.leases.alive(found.worker):
                return await take_over(store, found, self.leases, self.index)
        return found

    async def cancel(self, store: UserStore, checkpoint_id: str) -> RunSummary:
        """Record a cancel request for a run (any process running it stops it at its next
        safe point); return the run's summary as it was.

        Raises:
            CheckpointNotFound: The user has no run with this id.
        """
        summary = await self.summary(store, checkpoint_id)
        if summary.status == "running" and summary.checkpoint_id:
            checkpoint_id = summary.checkpoint_id  # a run id whose resume runs under another
        await store.put_record("x", checkpoint_id, new_run_id().encode())
        live = self._live.get((store.user, checkpoint_id))
        if live is not None and live.runner is not None:
            live.runner.cancel(checkpoint_id)
        return summary

    async def shutdown(self, grace: float) -> None:
        """Ask every live run to stop at its next safe point (each leaves a resumable
        checkpoint); after `grace` seconds cancel what is left; then give this worker's
        lease up, so the other workers take over what is left at once."""
        self.stopping = True
        for live in list(self._live.values()):
            if live.runner is not None:
                live.runner.cancel(live.checkpoint_id)
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._watcher is not None:
            self._watcher.cancel()
        try:
            await self.leases.release()
        except Exception as exc:  # the lease then runs out by itself
            _log.warning("could not give up the lease of worker %s: %s", self.leases.worker, exc)
