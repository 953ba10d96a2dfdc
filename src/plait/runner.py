"""`Runner`: run an agent, stream its events, collect them, pause and resume."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, TypeVar

from plait.agent import Agent, AgentInput
from plait.agents.flow import can_transfer, run_flow
from plait.checkpoint import UNSET, Checkpoint
from plait.context import InterruptSignal, Resume, RunContext, _current, safe_point_reason
from plait.errors import (
    AgentError,
    CheckpointNotFound,
    PlaitError,
    ResumeError,
    RunCancelled,
    UsageError,
)
from plait.events import AgentEvent, HandoffLog, InterruptCtx, InterruptInfo, RunResult
from plait.messages import Message
from plait.session import SessionTurn
from plait.stores.base import GuardedStore, Store
from plait.stores.memory import MemoryStore

__all__ = ["EventFilter", "RunStream", "Runner"]

EventFilter = Callable[[AgentEvent], bool]
_T = TypeVar("_T")


class Runner:
    """Runs an agent: `run`/`query` stream events; `*_sync` collect them; `resume` continues
    a paused run.

    `store` keeps checkpoints of paused runs (default: an in-memory store owned by this
    runner, so a pause can be resumed in this process; use `SqliteStore`, `PostgresStore` or
    `RedisStore` to resume elsewhere or later). `event_filter(event)` returns True to keep an
    event for the caller. Errors inside a run never raise out of the runner: they are the
    last event (and `RunResult.error`). Nothing bound to an event loop is kept between runs.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        store: Store | None = None,
        enable_streaming: bool = False,
        event_filter: EventFilter | None = None,
        durability: Literal["exit", "step"] = "exit",
        checkpoint_ttl: float | None = None,
        session_ttl: float | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise UsageError(f"Runner needs an Agent (name, description, run), got {agent!r}")
        if durability not in ("exit", "step"):
            raise UsageError("durability must be 'exit' or 'step'")
        self.agent = agent
        self.store: Store = store if store is not None else MemoryStore()
        self._store = GuardedStore(self.store)  # failures become StoreError
        self.enable_streaming = enable_streaming
        self.event_filter = event_filter
        self.durability = durability
        self.checkpoint_ttl = checkpoint_ttl
        self.session_ttl = session_ttl
        self._active: weakref.WeakValueDictionary[str, RunStream] = weakref.WeakValueDictionary()

    def cancel(self, checkpoint_id: str) -> bool:
        """Ask the run with this checkpoint id to stop at its next safe point.

        The run then ends with a `RunCancelled` error and a checkpoint that `resume` continues.
        Return False when no such run is active in this runner.
        """
        stream = self._active.get(checkpoint_id)
        if stream is None:
            return False
        stream.cancel()
        return True

    def run(
        self,
        messages: Sequence[Message],
        *,
        session_id: str | None = None,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
    ) -> RunStream:
        """Start a run on `messages`; iterate the returned stream for its events.

        With `session_id`, the run continues that conversation (its history and values) and
        the turn is added to it when the run finishes. If the run pauses, it is saved under
        `checkpoint_id` (a fresh id when None; `stream.checkpoint_id` tells it).
        """
        if isinstance(messages, str | Message):
            raise UsageError("Runner.run takes a list of messages; use query(text) for one text")
        messages = tuple(messages)
        if session_id is not None:
            prepare = functools.partial(self._prepare_session, session_id, messages, session_values)
            return RunStream(self, None, None, checkpoint_id, prepare, resuming=False)
        ctx = self._root_context(messages, session_values, self.enable_streaming)
        return RunStream(self, self._start(ctx), ctx, checkpoint_id)

    def _root_context(
        self, messages: Sequence[Message], values: Mapping[str, Any] | None, streaming: bool
    ) -> RunContext:
        ctx = RunContext.root(
            self.agent.name,
            messages,
            session_values=dict(values) if values is not None else None,
            enable_streaming=streaming,
        )
        ctx._run.durability = self.durability
        return ctx

    async def _prepare_session(
        self, session_id: str, messages: tuple[Message, ...], values: Mapping[str, Any] | None
    ) -> tuple[AsyncIterator[AgentEvent], RunContext, SessionTurn]:
        turn = await SessionTurn.load(self._store, session_id, messages)
        merged = {**turn.values, **(values or {})}
        ctx = self._root_context(turn.input_for(self.agent.name), merged, self.enable_streaming)
        ctx.state.update(turn.state)
        ctx._run.local.update(turn.local)
        return self._start(ctx), ctx, turn

    def query(
        self,
        text: str,
        *,
        session_id: str | None = None,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
    ) -> RunStream:
        """Start a run on one user message."""
        return self.run(
            [Message.user(text)],
            session_id=session_id,
            checkpoint_id=checkpoint_id,
            session_values=session_values,
        )

    def resume(
        self,
        checkpoint_id: str,
        targets: Mapping[str, Any] | None = None,
        *,
        value: Any = UNSET,
    ) -> RunStream:
        """Continue a paused run.

        `targets` maps interrupt ids to the data each `interrupt()` returns; `value=` is the
        data when exactly one interrupt is pending. Interrupts not targeted pause again with
        fresh ids. A rejected resume (unknown checkpoint or id, a value for several
        interrupts, already resumed) raises when iterated and leaves the checkpoint as it was.
        """
        prepare = functools.partial(self._prepare, checkpoint_id, targets, value)
        return RunStream(self, None, None, checkpoint_id, prepare)

    def _start(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if can_transfer(self.agent):
            return run_flow(self.agent, ctx)
        agent_input = AgentInput(messages=ctx.root_input, enable_streaming=ctx.enable_streaming)
        return self.agent.run(agent_input, ctx)  # an interrupt() raised out of it: RunStream

    async def _prepare(
        self, checkpoint_id: str, targets: Mapping[str, Any] | None, value: Any
    ) -> tuple[AsyncIterator[AgentEvent], RunContext, SessionTurn | None]:
        record = await self._store.get_checkpoint(checkpoint_id)
        if record is None:
            raise CheckpointNotFound(f"no checkpoint '{checkpoint_id}' in {self.store!r}")
        checkpoint = Checkpoint.decode(record.data, checkpoint_id)
        by_id = checkpoint.targets(targets, value)  # check first …
        if record.status != "pending":
            raise ResumeError(
                f"checkpoint '{checkpoint_id}' was already resumed (it is {record.status})"
            )
        if checkpoint.data["agent"] != self.agent.name:
            raise ResumeError(
                f"checkpoint '{checkpoint_id}' belongs to agent '{checkpoint.data['agent']}', "
                f"not '{self.agent.name}'"
            )
        if not await self._store.claim_checkpoint(checkpoint_id, record.version):  # … claim second
            raise ResumeError(f"checkpoint '{checkpoint_id}' is being resumed by someone else")
        return self._reenter(checkpoint, by_id)

    def _reenter(
        self, checkpoint: Checkpoint, by_id: dict[str, Any]
    ) -> tuple[AsyncIterator[AgentEvent], RunContext, SessionTurn | None]:
        """Rebuild the run from a checkpoint and start it again where it stopped."""
        data = checkpoint.data
        ctx = self._root_context(
            checkpoint.root_input, dict(data["session_values"]), bool(data["streaming"])
        )
        checkpoint.restore(ctx, by_id)
        turn = None
        if data["session_id"] is not None:
            turn = SessionTurn(
                data["session_id"], [], {}, [], SessionTurn.load_turn(data["session_turn"] or [])
            )
        return self._start(ctx), ctx, turn

    async def _save(
        self,
        ctx: RunContext,
        interrupts: tuple[InterruptCtx, ...],
        checkpoint_id: str,
        turn: SessionTurn | None,
        *,
        running: bool = False,
    ) -> bytes:
        if turn is not None:
            await turn.settle()
        data = Checkpoint.encode(
            ctx,
            interrupts,
            agent_name=self.agent.name,
            session_id=turn.session_id if turn is not None else None,
            session_turn=turn.dump_turn() if turn is not None else None,
            running=running,
        )
        await self._store.put_checkpoint(checkpoint_id, data, ttl=self.checkpoint_ttl)
        return data

    async def _finish(self, checkpoint_id: str) -> None:
        record = await self._store.get_checkpoint(checkpoint_id)
        if record is not None:
            await self._store.put_checkpoint(
                checkpoint_id, record.data, status="done", ttl=self.checkpoint_ttl
            )

    def run_sync(
        self,
        messages: Sequence[Message],
        *,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run to the end in a new event loop and return the `RunResult` (never raises)."""
        return _run_in_new_loop(
            lambda: self.run(
                messages, checkpoint_id=checkpoint_id, session_values=session_values
            ).collect()
        )

    def query_sync(
        self,
        text: str,
        *,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run one user message to the end in a new event loop and return the `RunResult`."""
        return self.run_sync(
            [Message.user(text)], checkpoint_id=checkpoint_id, session_values=session_values
        )

    def resume_sync(
        self,
        checkpoint_id: str,
        targets: Mapping[str, Any] | None = None,
        *,
        value: Any = UNSET,
    ) -> RunResult:
        """Resume in a new event loop and return the `RunResult` (a rejected resume raises)."""
        return _run_in_new_loop(lambda: self.resume(checkpoint_id, targets, value=value).collect())


def _run_in_new_loop(make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    raise UsageError(
        "the *_sync methods start their own event loop; inside async code use "
        "`await runner.run(...).collect()` or iterate `runner.run(...)`"
    )


Prepared = tuple[AsyncIterator[AgentEvent], RunContext, SessionTurn | None]
Prepare = Callable[[], Awaitable[Prepared]]


class RunStream:
    """The events of one run, as an async iterator.

    Iterate it for the events; `await stream.collect()` drains what is left and returns the
    `RunResult`. Leaving the iteration early, `aclose()`, or `async with` exit cancel the run
    cleanly: tools in flight are cancelled and model streams closed. `cancel()` instead asks
    the run to stop at its next safe point and leave a checkpoint.
    """

    def __init__(
        self,
        runner: Runner,
        agent_events: AsyncIterator[AgentEvent] | None,
        ctx: RunContext | None,
        checkpoint_id: str | None,
        prepare: Prepare | None = None,
        *,
        resuming: bool = True,
    ) -> None:
        self._runner = runner
        self._filter = runner.event_filter
        self._ctx = ctx
        self._agent_events = agent_events
        self._prepare = prepare
        self._resuming = prepare is not None and resuming
        self._turn: SessionTurn | None = None
        self._held: AgentEvent | None = None
        self._events: list[AgentEvent] = []
        self._last_output: AgentEvent | None = None
        self._error: PlaitError | None = None
        self._interrupts: tuple[InterruptCtx, ...] = ()
        self._paused = False
        self._checkpoint_id = checkpoint_id
        self._handoffs: list[HandoffLog] = []
        self._finished = False
        self._cancel = False
        if checkpoint_id is not None:
            runner._active[checkpoint_id] = self

    @property
    def checkpoint_id(self) -> str:
        """Return the id a pause or cancel of this run is saved under (made on first use)."""
        if self._checkpoint_id is None:
            self._checkpoint_id = uuid.uuid4().hex
            self._runner._active[self._checkpoint_id] = self
        return self._checkpoint_id

    @property
    def context(self) -> RunContext:
        """Return the run's root context (session values, usage so far)."""
        if self._ctx is None:
            raise UsageError("this run has no context until its first event")
        return self._ctx

    def cancel(self) -> None:
        """Stop at the next safe point (after a model call, or after the tools in flight)."""
        self._cancel = True
        if self._ctx is not None:
            self._ctx._run.cancel_requested = True

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> AgentEvent:
        keep = self._filter
        while True:
            event = await (self._next_held() if self._turn is not None else self._next_event())
            if keep is None or keep(event):
                self._events.append(event)
                return event

    async def _next_held(self) -> AgentEvent:
        """With a session, hold one event back so the session is written before the last."""
        if self._held is None:
            self._held = await self._next_event()
        current = self._held
        try:
            self._held = await self._next_event()
        except StopAsyncIteration:
            self._held = None
            self._turn = None
        return current

    async def _start(self) -> None:
        prepare, self._prepare = self._prepare, None
        assert prepare is not None
        try:
            self._agent_events, self._ctx, self._turn = await prepare()
        except BaseException:
            self._finish()
            raise
        if self._cancel:
            self._ctx._run.cancel_requested = True

    def _finish(self) -> None:
        self._finished = True
        if self._checkpoint_id is not None:
            self._runner._active.pop(self._checkpoint_id, None)

    async def _next_event(self) -> AgentEvent:
        if self._finished:
            raise StopAsyncIteration
        if self._prepare is not None:
            await self._start()
        while True:
            ctx = self._ctx
            assert ctx is not None and self._agent_events is not None
            token = _current.set(ctx)
            try:
                event = await self._agent_events.__anext__()
            except StopAsyncIteration:
                failure = await self._completed()
                if failure is None:
                    raise
                event = ctx.event(error=failure)  # the run ended but its records were not kept
            except InterruptSignal as signal:  # a custom root agent called interrupt()
                event = ctx.pause_event(signal.contexts)
            except Exception as exc:
                event = ctx.event(error=AgentError.wrap(exc, ctx.agent_name))
            except BaseException:
                self._finish()
                raise
            finally:
                _current.reset(token)
            if event.depth == 0 and event.action is not None and event.action.interrupted:
                paused = await self._pause(event, ctx)
                if paused is None:
                    continue  # a step checkpoint: the run goes on from it
                event = paused
            self._note(event)
            if self._turn is not None:
                self._turn.note(event)
            if event.error is not None or self._paused:
                await self.aclose()
            return event

    async def _completed(self) -> PlaitError | None:
        """The run finished: write its session turn and retire a resumed checkpoint."""
        self._finish()
        try:
            await self._keep_records()
        except PlaitError as exc:
            return exc
        return None

    async def _keep_records(self) -> None:
        runner = self._runner
        if self._turn is not None and self._error is None and self._ctx is not None:
            ctx = self._ctx
            await self._turn.save(
                runner._store,
                ctx.session_values,
                self._handoffs,
                runner.session_ttl,
                ctx.state,
                ctx._run.local,
            )
        if self._checkpoint_id is not None and (self._resuming or runner.durability == "step"):
            await runner._finish(self._checkpoint_id)

    async def _pause(self, event: AgentEvent, ctx: RunContext) -> AgentEvent | None:
        """Save the checkpoint of a pause; return the event reporting it (None: step on)."""
        assert event.action is not None and event.action.interrupted is not None
        contexts = event.action.interrupted.contexts
        reasons = {safe_point_reason(c) for c in contexts}
        step = reasons == {"step"}
        try:
            await self._runner._save(ctx, contexts, self.checkpoint_id, self._turn, running=step)
        except PlaitError as exc:
            return ctx.event(error=exc)
        if step:
            await self._step_on(ctx)
            return None
        self._paused = True
        shown = tuple(c for c in contexts if safe_point_reason(c) is None)
        info = InterruptInfo(contexts=shown or contexts, checkpoint_id=self.checkpoint_id)
        action = dataclasses.replace(event.action, interrupted=info)
        error = None
        if not shown:
            error = RunCancelled(
                f"the run was cancelled at a safe point; resume checkpoint "
                f"'{self.checkpoint_id}' to continue"
            )
        return dataclasses.replace(event, action=action, error=error)

    async def _step_on(self, ctx: RunContext) -> None:
        """Continue a run from the step checkpoint it has just written.

        The run is rebuilt from what it saved, exactly as a resume from the store would,
        but from memory: the checkpoint's bytes need not be read back.
        """
        aclose = getattr(self._agent_events, "aclose", None)
        if aclose is not None:
            await aclose()
        runner = self._runner
        new_ctx = runner._root_context(ctx.root_input, None, ctx.enable_streaming)
        run, old = new_ctx._run, ctx._run
        run.session_values = old.session_values
        run.state = old.state
        new_ctx.history.extend(ctx.history)
        paused = old.paused
        answers = {k: list(v) for k, v in paused.answers.items()}
        run.resume = Resume(dict(paused.states), dict(paused.user_states), answers)
        run.model_calls, run.input_tokens, run.output_tokens = (
            old.model_calls,
            old.input_tokens,
            old.output_tokens,
        )
        run.cancel_requested = old.cancel_requested
        self._agent_events, self._ctx = runner._start(new_ctx), new_ctx

    async def aclose(self) -> None:
        """Stop the run: cancel what is in flight and close every stream."""
        self._finish()
        aclose = getattr(self._agent_events, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> RunStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def collect(self) -> RunResult:
        """Drain the remaining events and return the run's `RunResult`."""
        async for _ in self:
            pass
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
            handoffs=tuple(self._handoffs),
            usage=self._ctx.usage if self._ctx is not None else RunResult().usage,
        )

    def _note(self, event: AgentEvent) -> None:
        action = event.action
        if action is not None and action.interrupted is not None and event.depth == 0:
            self._interrupts = action.interrupted.contexts
        if event.error is not None:
            self._error = event.error
            return
        output = event.output
        if (
            output is not None
            and event.depth == 0
            and (output.message or output.custom is not None)
        ):
            self._last_output = event
        if event.handoff is not None:
            self._handoffs.append(event.handoff)
