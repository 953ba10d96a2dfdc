"""The run kernel: the one way into an agent, into a tool call, and out of them on a pause.

`enter` runs an agent with its own context current for every step (so `plait.interrupt()`
and `plait.run_context()` see that agent's context) and turns the pause signal into the
agent's pause event, and an exception into its error event. `call_in` does the same for one
tool or graph-node call; `raise_pause` passes a child's pause up through a tool call. This
module is the only one that raises or catches the pause signal.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from plait.errors import AgentError, PlaitError
from plait.events import AgentEvent, InterruptCtx

if TYPE_CHECKING:
    from plait.agent import Agent, AgentInput
    from plait.context import RunContext

__all__ = [
    "InterruptSignal",
    "Interrupted",
    "call_in",
    "current",
    "enter",
    "is_pause",
    "raise_pause",
]

_T = TypeVar("_T")

_current: ContextVar[RunContext | None] = ContextVar("plait_run_context", default=None)


def current() -> RunContext | None:
    """Return the context current here (the agent, tool or node running), if any."""
    return _current.get()


def make_current(ctx: RunContext) -> Token[RunContext | None]:
    """Make `ctx` current until `reset_current(token)`."""
    return _current.set(ctx)


def reset_current(token: Token[RunContext | None]) -> None:
    """Restore the context current before `make_current`."""
    _current.reset(token)


class InterruptSignal(BaseException):
    """Raised by `interrupt()` to pause the run; a `BaseException`, so `except Exception`
    in a tool cannot swallow it. Only this module raises and catches it."""

    def __init__(self, contexts: tuple[InterruptCtx, ...]) -> None:
        super().__init__(contexts)
        self.contexts = contexts


class Interrupted:
    """What `call_in` returns when the call paused: the interrupts it raised."""

    __slots__ = ("contexts",)

    def __init__(self, contexts: tuple[InterruptCtx, ...]) -> None:
        self.contexts = contexts


class _Agentish(Protocol):
    name: str

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]: ...


async def enter(
    agent: Agent | _Agentish, agent_input: AgentInput, ctx: RunContext
) -> AsyncGenerator[AgentEvent, None]:
    """Run `agent` in `ctx`: the one way into an agent.

    Every step of the agent runs with `ctx` as the current context; a pause raised out of it
    becomes its pause event, and an exception its error event.
    """
    hooks = ctx.hooks
    ctx.enter_resume(agent)
    for hook in hooks:
        hook.agent_entered(ctx)
    error: PlaitError | None = None
    events = agent.run(agent_input, ctx)
    try:
        while True:
            token = _current.set(ctx)
            try:
                event = await anext(events)
            except StopAsyncIteration:
                return
            except InterruptSignal as signal:
                yield ctx.pause_event(signal.contexts)
                return
            except Exception as exc:
                error = AgentError.wrap(exc, ctx.agent_name)
                yield ctx.event(error=error)
                return
            finally:
                _current.reset(token)
            error = event.error if event.error is not None else error
            yield event
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
        for hook in hooks:
            hook.agent_exited(ctx, error)


async def call_in(
    ctx: RunContext, fn: Callable[..., Awaitable[_T]], *args: Any
) -> _T | Interrupted:
    """Await `fn(*args)` with `ctx` as the current context (a tool or node call); a pause
    raised inside is returned as `Interrupted`."""
    token = _current.set(ctx)
    try:
        return await fn(*args)
    except InterruptSignal as signal:
        return Interrupted(signal.contexts)
    finally:
        _current.reset(token)


def raise_pause(contexts: Sequence[InterruptCtx]) -> None:
    """Pause the tool or node call running now on `contexts` (an agent run as a tool whose
    child paused passes the child's interrupts up this way)."""
    raise InterruptSignal(tuple(contexts))


def is_pause(event: AgentEvent, depth: int) -> bool:
    """Whether `event` announces a pause of this lane (not of an agent run as a tool)."""
    return (
        event.depth == depth and event.action is not None and event.action.interrupted is not None
    )
