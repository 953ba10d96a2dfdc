"""`RunStream`: one run's events.

A stream starts its run (or resumes or forks it), passes its events on, and ends it: a pause
or an error closes the run, a session's last event waits for its turn to be written, and the
`after_run` hooks see the result. What the run saves as it goes (its checkpoints, step saves,
leases and session turn) is `plait.run.saves`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from plait._util.tasks import current_task
from plait.core.agent import Agent
from plait.core.context import Frame
from plait.core.handoff import input_for
from plait.core.hooks import HookChain, notify
from plait.core.kernel import run_agent
from plait.errors import CheckpointCorrupt, PlaitError, ResumeError, UsageError
from plait.events import AgentEvent, HandoffLog, InterruptCtx, RunResult
from plait.run.saves import RunSaves, RunSetup, end_lease, lease_owner, weak_saver
from plait.run.sessions import SessionTurn
from plait.run.time_travel import StepLog

__all__ = ["Prepared", "RunStream"]


@dataclasses.dataclass(slots=True)
class Prepared:
    """A run ready to go: its root agent, root context, session turn, the handoffs it made
    before it was saved, and (for a resume) the bytes of the checkpoint it claimed. The
    stream configures the context, then enters the agent (`run_agent`)."""

    agent: Agent
    ctx: Frame
    turn: SessionTurn | None = None
    handoffs: tuple[HandoffLog, ...] = ()
    claimed: bytes | None = None


Prepare = Callable[[], Awaitable[Prepared]]


class RunStream(RunSaves):
    """The events of one run, as an async iterator.

    Iterate it for the events; `await stream.collect()` drains what is left and returns the
    `RunResult`. Leaving the iteration early, `aclose()` or `async with` exit in the task
    that iterates cancel the run cleanly: tools in flight are cancelled and model streams
    closed. `cancel()` (from any task or thread), or `aclose()` from another task while a
    consumer iterates, is the stop button: the run stops promptly, is saved, and its
    consumer sees a last event with a `RunCancelled` error.
    """

    __slots__ = (
        "__weakref__",
        "_agent_events",
        "_busy",
        "_cancel",
        "_consumer",
        "_events",
        "_filter",
        "_finished",
        "_held",
        "_idle",
        "_interrupts",
        "_last_output",
        "_loop",
        "_prepare",
        "_result",
        "_upcoming",
    )

    def __init__(
        self,
        setup: RunSetup,
        checkpoint_id: str | None,
        prepare: Prepare | Prepared,
        *,
        resumed_from: str | None,
        forked: bool = False,
    ) -> None:
        self._setup = setup
        self._filter = setup.event_filter
        self._ctx: Frame | None = None
        self._agent_events: AsyncIterator[AgentEvent] | None = None
        self._prepare: Prepare | Prepared | None = prepare
        if isinstance(prepare, Prepared):
            self._ctx = prepare.ctx
        self._resumed_from = resumed_from
        self._turn: SessionTurn | None = None
        self._held: AgentEvent | None = None
        self._upcoming: AgentEvent | None = None  # a streamed message, passed on next
        self._events: list[AgentEvent] = []
        self._last_output: AgentEvent | None = None
        self._error: PlaitError | None = None
        self._interrupts: tuple[InterruptCtx, ...] = ()
        self._paused = False
        self._checkpoint_id = checkpoint_id  # the run's own id: its step saves go here
        self._pause_id: str | None = None  # where it paused (a new id after a resume)
        self._steps = 0  # step checkpoints written
        self._forked = forked  # a fork: a refused start raises, its history carries on
        self._log: StepLog | None = None  # the run's history, made at its first step save
        self._last_event: AgentEvent | None = None  # the last event the run emitted
        self._earlier_handoffs: tuple[HandoffLog, ...] = ()
        self._claimed: bytes | None = None  # a resumed checkpoint, as it was
        self._saved: tuple[str, bytes] | None = None  # its last step checkpoint
        self._handoffs: list[HandoffLog] = []
        self._finished = False
        self._cancel = False
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the run runs on
        self._consumer: asyncio.Task[Any] | None = None  # the task that iterates it
        self._busy = False  # the consumer is inside __anext__
        self._idle: asyncio.Event | None = None  # set when it leaves (for a waiting aclose)
        self._owner = ""  # who holds the lease of its step checkpoints (made when needed)
        self._result: RunResult | None = None  # made when the run ends, for `after_run`
        if checkpoint_id is not None:
            setup.active[checkpoint_id] = self

    @property
    def ended(self) -> bool:
        """Whether the run has given its last event: what follows is the stream's end.

        True as a run's last event is returned when that event is known to be the last: a
        run with a session (its last event waits for its turn to be written), an error or a
        pause that ends the run; for the last event of a run without a session, once the
        iteration has ended.
        """
        return self._finished and self._held is None and self._upcoming is None

    @property
    def context(self) -> Frame:
        """Return the run's root context (session values, usage so far)."""
        if self._ctx is None:
            raise UsageError("this run has no context until its first event")
        return self._ctx

    def cancel(self) -> None:
        """Stop the run promptly; call it from any task or thread.

        Tool calls in flight are stopped: an async tool is cancelled; a sync tool's thread,
        which cannot be killed, is abandoned (its `ctx.cancelled` turns true). A model call
        in flight is stopped too (its reply is dropped and asked for again on the resume).
        The run is then saved and ends with a `RunCancelled` error
        event; `Runner.resume` continues it, running the stopped tool calls again (but a
        stopped `"once"` call asks what became of it: docs/approvals.md). A run
        that had already finished is not affected.
        """
        self._cancel = True
        loop = self._loop
        if loop is not None and _running_loop() is not loop:
            with contextlib.suppress(RuntimeError):  # its loop has closed: the run is over
                loop.call_soon_threadsafe(self._stop)
            return
        self._stop()

    def _stop(self) -> None:
        if self._ctx is not None and not self._finished:
            self._ctx.run.request_cancel()

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> AgentEvent:
        keep = self._filter
        loop = self._loop
        self._consumer = asyncio.current_task() if loop is None else current_task(loop)
        self._busy = True
        try:
            while True:
                try:
                    if self._prepare is not None and not self._finished:
                        await self._start()
                    events = self._agent_events
                    if self._turn is None and not self._finished:
                        # under way, no session: `_next_event` inline (one frame less)
                        assert events is not None
                        try:
                            event = await anext(events)
                        except StopAsyncIteration:
                            event = await self._ended()
                        except BaseException:
                            self._finish()
                            raise
                        if event.action is None and event.error is None and not self._paused:
                            # `_after_event` of a plain event, `_note_output` inline
                            self._last_event = event
                            output = event.output
                            if (
                                output is not None
                                and event.depth == 0
                                and (output.message or output.custom is not None)
                            ):
                                self._last_output = event
                            if event.handoff is not None:
                                self._handoffs.append(event.handoff)
                        else:
                            event = await self._after_event(event)
                    elif self._upcoming is not None:
                        event, self._upcoming = self._upcoming, None
                    elif self._turn is not None:
                        event = await self._next_held()
                    else:
                        event = await self._next_event()
                except StopAsyncIteration:
                    if self._result is None and self._setup.hooks.after_run:
                        await self._after_run()
                    raise
                if keep is None or keep(event):
                    self._events.append(event)
                    return event
        finally:
            self._busy = False
            if self._idle is not None:  # an `aclose` from another task waits for this step
                self._idle.set()
                self._idle = None

    async def _next_held(self) -> AgentEvent:
        """With a session, hold one event back so the session is written before the last.

        A streamed message is passed on at once, so its text reaches the reader as the model
        writes it; when it is the run's last event, the session is written before the run's
        events end (before `StopAsyncIteration`)."""
        current = self._held
        if current is None:
            current = await self._next_event()
            if _streams(current):
                return current
        try:
            upcoming = await self._next_event()
        except StopAsyncIteration:
            self._held = None
            self._turn = None
            return current
        if _streams(upcoming):
            self._held = None
            self._upcoming = upcoming
        else:
            self._held = upcoming
        return current

    async def _start(self) -> None:
        prepare, self._prepare = self._prepare, None
        assert prepare is not None
        try:
            prepared = prepare if isinstance(prepare, Prepared) else await prepare()
        except PlaitError as exc:
            if self._resumed_from is not None or self._forked:
                self._finish()
                raise  # a rejected resume (or fork) raises, and leaves the checkpoint as it was
            self._fail_at_start(exc)
            return
        except BaseException:
            self._finish()
            raise
        self._ctx, self._turn = prepared.ctx, prepared.turn
        self._earlier_handoffs = prepared.handoffs
        self._claimed = prepared.claimed
        self._loop = asyncio.get_running_loop()
        self._ctx.configure(
            durability=self._setup.durability,
            ids=self._setup.ids,
            hooks=self._setup.hooks,
            max_transfers=self._setup.max_transfers,
            saver=weak_saver(self),
            session_id=None if self._turn is None else self._turn.session_id,
            checkpoint_id=self._checkpoint_id,
            metadata=copy.deepcopy(self._setup.metadata) if self._setup.metadata else None,
            effects=self._setup.effects,
        )
        self._agent_events = run_agent(prepared.agent, self._ctx)  # the one door, configured
        if self._setup.effects is not None:
            ref = weakref.ref(self)
            self._setup.effects.checkpoint = lambda: (
                None if (s := ref()) is None else s.checkpoint_id
            )
        if self._setup.durability == "step":
            self._owner = lease_owner(self._setup.ids)
        if self._cancel:
            self._ctx.run.request_cancel()
        hooks = self._setup.hooks
        if hooks.before_run or hooks.on_resume:
            await self._before_run(hooks, self._ctx)

    async def _before_run(self, hooks: HookChain, ctx: Frame) -> None:
        """Run the `on_resume` and `before_run` hooks; one that refuses ends the run with its
        error (a resumed checkpoint is left as it was)."""
        failure = None
        if self._resumed_from is not None:
            failure = await notify(hooks.on_resume, "on_resume", ctx, self._resumed_from)
        if failure is None:
            failure = await notify(
                hooks.before_run, "before_run", ctx, input_for(ctx, self._setup.agent_name)
            )
        if failure is None:
            return
        if self._claimed is not None:
            await self._unclaim()
        events, self._agent_events = self._agent_events, _failed(ctx, failure)
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()

    def _fail_at_start(self, exc: PlaitError) -> None:
        """A run that could not start (its session could not be read) ends with the error."""
        ctx = Frame.root(self._setup.agent_name, ())
        self._ctx = ctx

        async def failed() -> AsyncIterator[AgentEvent]:
            yield ctx.event(error=exc)

        self._agent_events = failed()

    def _finish(self) -> None:
        self._finished = True
        if self._owner:
            end_lease(self._owner)
        if self._checkpoint_id is not None:
            self._setup.active.pop(self._checkpoint_id, None)

    async def _next_event(self) -> AgentEvent:
        if self._finished:
            raise StopAsyncIteration
        if self._prepare is not None:
            await self._start()
        assert self._agent_events is not None
        try:
            event = await anext(self._agent_events)
        except StopAsyncIteration:
            event = await self._ended()
        except BaseException:
            self._finish()
            raise
        if event.action is not None or event.error is not None or self._paused:
            return await self._after_event(event)
        # `_after_event` of a plain event: noted (`_note_output`), and kept for the session
        self._last_event = event
        output = event.output
        if output is not None and event.depth == 0:
            if output.message or output.custom is not None:
                self._last_output = event
            if output.message is not None and self._turn is not None:
                self._turn.note(event)
        if event.handoff is not None:
            self._handoffs.append(event.handoff)
        return event

    async def _ended(self) -> AgentEvent:
        """The agent's events ended: raise StopAsyncIteration, or return the error event
        of a run whose records could not be kept."""
        failure = await self._completed()
        if failure is None:
            raise StopAsyncIteration
        assert self._ctx is not None
        return self._ctx.event(error=failure)

    async def _after_event(self, event: AgentEvent) -> AgentEvent:
        """Take `event` into the run: a pause is saved, an error or a pause ends the run, an
        output is noted (and the session's turn notes it)."""
        ctx = self._ctx
        assert ctx is not None
        self._last_event = event
        action, error = event.action, event.error
        if event.depth == 0 and action is not None and action.interrupted and error is None:
            event = await self._pause(event, ctx)
        if isinstance(event.error, ResumeError | CheckpointCorrupt) and self._claimed is not None:
            await self._unclaim()
        self._note(event)
        if self._turn is not None:
            self._turn.note(event)
        if event.error is not None or (self._paused and action is not None and action.interrupted):
            # (an agent run as a tool that stopped saved the run: its events still on their
            # way up come first, then the error that ends the run)
            if self._turn is not None and not (self._paused or self._finished):
                await self._keep_failed_turn(event.error, ctx)
            await self._close()
        return event

    async def _completed(self) -> PlaitError | None:
        """The run finished: write its session turn and retire its checkpoints."""
        self._finish()
        if self._turn is None and self._resumed_from is None and not self._steps:
            return None  # no session, nothing resumed, no step saved: nothing to keep
        try:
            await self._keep_records()
        except PlaitError as exc:
            return exc
        return None

    async def aclose(self) -> None:
        """Close the stream.

        From the task iterating it (or when no task is): stop the run at once — what is in
        flight is cancelled, every stream closed, nothing saved. From another task while a
        consumer iterates it: stop the run as `cancel()` does (the run is saved, and the
        consumer sees a last `RunCancelled` event), and return once the consumer's current
        step has returned.
        """
        consumer, current = self._consumer, asyncio.current_task()
        live = not self._finished and consumer is not None and not consumer.done()
        if live and (consumer is not current or self._busy):
            self.cancel()  # another task's stop button (or a tool of this very run)
            if self._busy and consumer is not current:
                idle = self._idle = self._idle or asyncio.Event()
                await idle.wait()
            return
        await self._close()

    async def _close(self) -> None:
        """Stop the run: cancel what is in flight and close every stream."""
        self._finish()
        aclose = getattr(self._agent_events, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> RunStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def collect(self) -> RunResult:
        """Drain the remaining events and return the run's `RunResult`."""
        async for _ in self:
            pass
        return self._result or await self._make_result()

    async def _after_run(self) -> None:
        """The run ended: run the `after_run` hooks with its result (one that fails makes
        its error the run's)."""
        self._result = result = await self._make_result()
        ctx = self._ctx
        assert ctx is not None
        failure = await notify(self._setup.hooks.after_run, "after_run", ctx, result)
        if failure is not None:
            self._error = failure
            self._result = dataclasses.replace(result, error=failure, final_output=None)

    async def _make_result(self) -> RunResult:
        """Return the `RunResult` of the events so far."""
        final: Any = None
        last = self._last_output
        if self._error is None and not self._paused and last is not None and last.output:
            variant = last.output.message
            if variant is not None:
                final = (await variant.get_message()).content
            else:
                final = last.output.custom
        return RunResult(
            events=tuple(self._events),
            final_output=final,
            error=self._error,
            interrupts=self._interrupts,
            checkpoint_id=self.checkpoint_id if self._paused else None,
            handoffs=(*self._earlier_handoffs, *self._handoffs),  # the whole run's
            usage=self._ctx.usage if self._ctx is not None else RunResult().usage,
            metadata=dict(self._ctx.metadata) if self._ctx is not None else {},
        )

    def _note(self, event: AgentEvent) -> None:
        action = event.action
        if action is not None and action.interrupted is not None and event.depth == 0:
            self._interrupts = action.interrupted.contexts
        if event.error is not None:
            self._error = event.error
            return
        self._note_output(event)

    def _note_output(self, event: AgentEvent) -> None:
        """Keep `event` as the run's last output if it is one, and its handoff (`_note` of
        an event that neither pauses nor fails)."""
        output = event.output
        if (
            output is not None
            and event.depth == 0
            and (output.message or output.custom is not None)
        ):
            self._last_output = event
        if event.handoff is not None:
            self._handoffs.append(event.handoff)


async def _failed(ctx: Frame, error: PlaitError) -> AsyncIterator[AgentEvent]:
    yield ctx.event(error=error)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _streams(event: AgentEvent) -> bool:
    """Tell whether `event` carries a message that is still being streamed."""
    output = event.output
    return output is not None and output.message is not None and output.message.is_streaming
