"""`Runner`: run an agent, stream its events, collect them, pause and resume."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from plait.agent import Agent, AgentInput
from plait.agents.flow import can_transfer, iterate, run_flow
from plait.checkpoint import UNSET, Checkpoint
from plait.context import RunContext, _current
from plait.errors import AgentError, CheckpointNotFound, PlaitError, ResumeError, UsageError
from plait.events import AgentEvent, HandoffLog, InterruptCtx, InterruptInfo, RunResult
from plait.messages import Message
from plait.stores.base import Store
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
        checkpoint_ttl: float | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise UsageError(f"Runner needs an Agent (name, description, run), got {agent!r}")
        self.agent = agent
        self.store: Store = store if store is not None else MemoryStore()
        self.enable_streaming = enable_streaming
        self.event_filter = event_filter
        self.checkpoint_ttl = checkpoint_ttl

    def run(
        self,
        messages: Sequence[Message],
        *,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
    ) -> RunStream:
        """Start a run on `messages`; iterate the returned stream for its events.

        If the run pauses, it is saved under `checkpoint_id` (a fresh id when None), which
        the interrupt event reports.
        """
        if isinstance(messages, str | Message):
            raise UsageError("Runner.run takes a list of messages; use query(text) for one text")
        messages = tuple(messages)
        ctx = RunContext.root(
            self.agent.name,
            messages,
            session_values=dict(session_values) if session_values is not None else None,
            enable_streaming=self.enable_streaming,
        )
        return RunStream(self, self._start(ctx), ctx, checkpoint_id)

    def query(
        self,
        text: str,
        *,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
    ) -> RunStream:
        """Start a run on one user message."""
        return self.run(
            [Message.user(text)], checkpoint_id=checkpoint_id, session_values=session_values
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
        return iterate(self.agent, agent_input, ctx)

    async def _prepare(
        self, checkpoint_id: str, targets: Mapping[str, Any] | None, value: Any
    ) -> tuple[AsyncIterator[AgentEvent], RunContext]:
        record = await self.store.get_checkpoint(checkpoint_id)
        if record is None:
            raise CheckpointNotFound(f"no checkpoint '{checkpoint_id}' in {self.store!r}")
        checkpoint = Checkpoint.decode(record.data, checkpoint_id)
        by_id = checkpoint.targets(targets, value)  # check first …
        if record.status != "pending":
            raise ResumeError(f"checkpoint '{checkpoint_id}' was already resumed ({record.status})")
        if checkpoint.data["agent"] != self.agent.name:
            raise ResumeError(
                f"checkpoint '{checkpoint_id}' belongs to agent '{checkpoint.data['agent']}', "
                f"not '{self.agent.name}'"
            )
        if not await self.store.claim_checkpoint(checkpoint_id, record.version):  # … claim second
            raise ResumeError(f"checkpoint '{checkpoint_id}' is being resumed by someone else")
        ctx = RunContext.root(
            self.agent.name,
            checkpoint.root_input,
            session_values=dict(checkpoint.data["session_values"]),
            enable_streaming=bool(checkpoint.data["streaming"]),
        )
        checkpoint.restore(ctx, by_id)
        return self._start(ctx), ctx

    async def _save(self, ctx: RunContext, interrupts: tuple[InterruptCtx, ...], cp: str) -> None:
        data = Checkpoint.encode(ctx, interrupts, agent_name=self.agent.name, session_id=None)
        await self.store.put_checkpoint(cp, data, ttl=self.checkpoint_ttl)

    async def _finish(self, checkpoint_id: str) -> None:
        record = await self.store.get_checkpoint(checkpoint_id)
        if record is not None:
            await self.store.put_checkpoint(
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


Prepare = Callable[[], Awaitable[tuple[AsyncIterator[AgentEvent], RunContext]]]


class RunStream:
    """The events of one run, as an async iterator.

    Iterate it for the events; `await stream.collect()` drains what is left and returns the
    `RunResult`. Leaving the iteration early, `aclose()`, or `async with` exit cancel the run
    cleanly: tools in flight are cancelled and model streams closed.
    """

    def __init__(
        self,
        runner: Runner,
        agent_events: AsyncIterator[AgentEvent] | None,
        ctx: RunContext | None,
        checkpoint_id: str | None,
        prepare: Prepare | None = None,
    ) -> None:
        self._runner = runner
        self._filter = runner.event_filter
        self._ctx = ctx
        self._agent_events = agent_events
        self._prepare = prepare
        self._resuming = prepare is not None
        self._events: list[AgentEvent] = []
        self._last_output: AgentEvent | None = None
        self._error: PlaitError | None = None
        self._interrupts: tuple[InterruptCtx, ...] = ()
        self._checkpoint_id = checkpoint_id
        self._handoffs: list[HandoffLog] = []
        self._finished = False

    @property
    def context(self) -> RunContext:
        """Return the run's root context (session values, usage so far)."""
        if self._ctx is None:
            raise UsageError("a resumed run has no context until its first event")
        return self._ctx

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> AgentEvent:
        keep = self._filter
        while True:
            event = await self._next_event()
            if keep is None or keep(event):
                self._events.append(event)
                return event

    async def _next_event(self) -> AgentEvent:
        if self._finished:
            raise StopAsyncIteration
        if self._prepare is not None:
            prepare, self._prepare = self._prepare, None
            try:
                self._agent_events, self._ctx = await prepare()
            except BaseException:
                self._finished = True
                raise
        ctx = self._ctx
        assert ctx is not None and self._agent_events is not None
        token = _current.set(ctx)
        try:
            event = await self._agent_events.__anext__()
        except StopAsyncIteration:
            self._finished = True
            if self._resuming and self._checkpoint_id is not None:
                await self._runner._finish(self._checkpoint_id)
            raise
        except Exception as exc:
            event = ctx.event(error=AgentError.wrap(exc, ctx.agent_name))
        except BaseException:
            self._finished = True
            raise
        finally:
            _current.reset(token)
        if event.depth == 0 and event.action is not None and event.action.interrupted:
            event = await self._pause(event, ctx)
        self._note(event)
        if event.error is not None or self._interrupts:
            await self.aclose()
        return event

    async def _pause(self, event: AgentEvent, ctx: RunContext) -> AgentEvent:
        """Save the checkpoint, then report it on the interrupt event."""
        assert event.action is not None and event.action.interrupted is not None
        contexts = event.action.interrupted.contexts
        checkpoint_id = self._checkpoint_id or uuid.uuid4().hex
        try:
            await self._runner._save(ctx, contexts, checkpoint_id)
        except PlaitError as exc:
            return ctx.event(error=exc)
        self._checkpoint_id = checkpoint_id
        info = InterruptInfo(contexts=contexts, checkpoint_id=checkpoint_id)
        action = dataclasses.replace(event.action, interrupted=info)
        return dataclasses.replace(event, action=action)

    async def aclose(self) -> None:
        """Stop the run: cancel what is in flight and close every stream."""
        self._finished = True
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
        if self._error is None and not self._interrupts and last is not None:
            variant = last.output.message if last.output is not None else None
            if variant is not None:
                final = (await variant.get_message()).content
        return RunResult(
            events=tuple(self._events),
            final_output=final,
            error=self._error,
            interrupts=self._interrupts,
            checkpoint_id=self._checkpoint_id if self._interrupts else None,
            handoffs=tuple(self._handoffs),
            usage=self._ctx.usage if self._ctx is not None else RunResult().usage,
        )

    def _note(self, event: AgentEvent) -> None:
        if event.error is not None:
            self._error = event.error
            return
        output = event.output
        if output is not None and output.message is not None and event.depth == 0:
            self._last_output = event
        action = event.action
        if action is not None and action.interrupted is not None and event.depth == 0:
            self._interrupts = action.interrupted.contexts
        if event.handoff is not None:
            self._handoffs.append(event.handoff)
