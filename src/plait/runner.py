"""`Runner`: run an agent, stream its events, or collect them into a `RunResult`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from plait.agent import Agent, AgentInput
from plait.agents.flow import can_transfer, run_flow
from plait.context import RunContext, _current
from plait.errors import AgentError, PlaitError, UsageError
from plait.events import AgentEvent, HandoffLog, InterruptCtx, RunResult
from plait.messages import Message

__all__ = ["EventFilter", "RunStream", "Runner"]

EventFilter = Callable[[AgentEvent], bool]
_T = TypeVar("_T")


class Runner:
    """Runs an agent: `run`/`query` stream events; `run_sync`/`query_sync` collect them.

    `event_filter(event)` returns True to keep an event for the caller. Errors inside a run
    never raise out of the runner: they are the last event (and `RunResult.error`).
    A runner holds nothing bound to an event loop, so it can serve successive loops.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        enable_streaming: bool = False,
        event_filter: EventFilter | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise UsageError(f"Runner needs an Agent (name, description, run), got {agent!r}")
        self.agent = agent
        self.enable_streaming = enable_streaming
        self.event_filter = event_filter

    def run(
        self,
        messages: Sequence[Message],
        *,
        session_values: Mapping[str, Any] | None = None,
    ) -> RunStream:
        """Start a run on `messages`; iterate the returned stream for its events."""
        if isinstance(messages, str | Message):
            raise UsageError("Runner.run takes a list of messages; use query(text) for one text")
        messages = tuple(messages)
        ctx = RunContext.root(
            self.agent.name,
            messages,
            session_values=dict(session_values) if session_values is not None else None,
            enable_streaming=self.enable_streaming,
        )
        if can_transfer(self.agent):
            return RunStream(run_flow(self.agent, ctx), ctx, self.event_filter)
        agent_input = AgentInput(messages=messages, enable_streaming=self.enable_streaming)
        return RunStream(self.agent.run(agent_input, ctx), ctx, self.event_filter)

    def query(self, text: str, *, session_values: Mapping[str, Any] | None = None) -> RunStream:
        """Start a run on one user message."""
        return self.run([Message.user(text)], session_values=session_values)

    def run_sync(
        self,
        messages: Sequence[Message],
        *,
        session_values: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run to the end in a new event loop and return the `RunResult` (never raises)."""
        return _run_in_new_loop(lambda: self.run(messages, session_values=session_values).collect())

    def query_sync(
        self, text: str, *, session_values: Mapping[str, Any] | None = None
    ) -> RunResult:
        """Run one user message to the end in a new event loop and return the `RunResult`."""
        return self.run_sync([Message.user(text)], session_values=session_values)


def _run_in_new_loop(make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    raise UsageError(
        "the *_sync methods start their own event loop; inside async code use "
        "`await runner.run(...).collect()` or iterate `runner.run(...)`"
    )


class RunStream:
    """The events of one run, as an async iterator.

    Iterate it for the events; `await stream.collect()` drains what is left and returns the
    `RunResult`. Leaving the iteration early, `aclose()`, or `async with` exit cancel the run
    cleanly: tools in flight are cancelled and model streams closed.
    """

    def __init__(
        self,
        agent_events: AsyncIterator[AgentEvent],
        ctx: RunContext,
        event_filter: EventFilter | None,
    ) -> None:
        self._ctx = ctx
        self._filter = event_filter
        self._events: list[AgentEvent] = []
        self._last_output: AgentEvent | None = None
        self._error: PlaitError | None = None
        self._interrupts: tuple[InterruptCtx, ...] = ()
        self._checkpoint_id: str | None = None
        self._handoffs: list[HandoffLog] = []
        self._agent_events = agent_events
        self._finished = False

    @property
    def context(self) -> RunContext:
        """Return the run's root context (session values, usage so far)."""
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
        ctx = self._ctx
        token = _current.set(ctx)
        try:
            event = await self._agent_events.__anext__()
        except StopAsyncIteration:
            self._finished = True
            raise
        except Exception as exc:
            event = ctx.event(error=AgentError.wrap(exc, ctx.agent_name))
        except BaseException:
            self._finished = True
            raise
        finally:
            _current.reset(token)
        self._note(event)
        if event.error is not None:
            await self.aclose()
        return event

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
            checkpoint_id=self._checkpoint_id,
            handoffs=tuple(self._handoffs),
            usage=self._ctx.usage,
        )

    def _note(self, event: AgentEvent) -> None:
        if event.error is not None:
            self._error = event.error
            return
        output = event.output
        if output is not None and output.message is not None and event.depth == 0:
            self._last_output = event
        action = event.action
        if action is not None and action.interrupted is not None:
            self._interrupts = action.interrupted.contexts
            self._checkpoint_id = action.interrupted.checkpoint_id
        if event.handoff is not None:
            self._handoffs.append(event.handoff)
