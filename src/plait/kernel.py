"""The run kernel: the one way into an agent, into a tool call, and out of them on a pause.

`enter` runs an agent with its own context current for every step (so `plait.interrupt()`
and `plait.run_context()` see that agent's context) and turns the pause signal into the
agent's pause event, and an exception into its error event. `call_in` does the same for one
tool or graph-node call. This module is the only one that catches the pause signal
(`plait._signal`), and it stands above the context: it imports `plait.context`, never the
other way round.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypeVar

from plait._signal import InterruptSignal
from plait.agent import Agent, AgentInput
from plait.checkpoint import ReplayRecord
from plait.context import RunContext
from plait.current import make_current, reset_current
from plait.errors import AgentError, PlaitError
from plait.events import AgentEvent, InterruptCtx
from plait.history import USER

__all__ = [
    "Interrupted",
    "call_in",
    "enter",
    "input_for",
    "is_pause",
    "lane_for",
]

_T = TypeVar("_T")


class Interrupted:
    """What `call_in` returns when the call paused: the interrupts it raised."""

    __slots__ = ("contexts",)

    def __init__(self, contexts: tuple[InterruptCtx, ...]) -> None:
        self.contexts = contexts


async def enter(
    agent: Agent, agent_input: AgentInput, ctx: RunContext
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
    replay = _Replay(ctx)
    events = agent.run(agent_input, ctx)
    try:
        while True:
            token = make_current(ctx)
            try:
                event = await anext(events)
            except StopAsyncIteration:
                return
            except InterruptSignal as signal:
                replay.pause()
                yield ctx.pause_event(signal.contexts)
                return
            except Exception as exc:
                error = AgentError.wrap(exc, ctx.agent_name)
                yield ctx.event(error=error)
                return
            finally:
                reset_current(token)
            error = event.error if event.error is not None else error
            if is_pause(event, ctx.depth):
                replay.pause()
            elif replay.repeats(event):
                continue
            yield event
    finally:
        replay.close()
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
        for hook in hooks:
            hook.agent_exited(ctx, error)


class _Replay:
    """What an agent emits again when it runs again from its start on a resume.

    An agent that keeps no resume record of its own (a custom agent) cannot continue where
    it paused: it runs again from its start. Its own events before the pause were seen
    (and recorded in the history and the session) then, so the first that many of its own
    events after the resume are not passed on again. The count is kept with the run when
    the agent pauses, at its place in the run.
    """

    __slots__ = ("ctx", "emitted", "paused", "skip")

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        saved = ctx.take_record("replay", ReplayRecord)
        self.skip = 0 if saved is None else saved.emitted  # own events seen before the pause
        self.emitted = 0  # own events in this run of the agent, passed on or not
        self.paused = False

    def repeats(self, event: AgentEvent) -> bool:
        """Count one of the agent's events; whether it is one it emitted before the pause."""
        ctx = self.ctx
        if event.run_path != ctx.run_path or event.depth != ctx.depth or event.error is not None:
            return False
        self.emitted += 1
        return self.emitted <= self.skip

    def pause(self) -> None:
        """The agent paused: keep its count if it will run again from its start."""
        self.paused = True
        if self.emitted and not self.ctx.keeps_state(besides="replay"):
            self.ctx.keep_record("replay", ReplayRecord(emitted=self.emitted))

    def close(self) -> None:
        """The agent ended: forget the count unless it paused."""
        if not self.paused and self.skip:
            self.ctx.drop_record("replay")


async def call_in(
    ctx: RunContext, fn: Callable[..., Awaitable[_T]], *args: Any
) -> _T | Interrupted:
    """Await `fn(*args)` with `ctx` as the current context (a tool or node call); a pause
    raised inside is returned as `Interrupted`."""
    token = make_current(ctx)
    try:
        return await fn(*args)
    except InterruptSignal as signal:
        return Interrupted(signal.contexts)
    finally:
        reset_current(token)


def input_for(ctx: RunContext, agent_name: str) -> AgentInput:
    """Return the input of `agent_name` in the lane of `ctx`: the lane's conversation as that
    agent sees it, with the conversation itself as `source`."""
    return AgentInput(
        messages=ctx.input_for(agent_name),
        enable_streaming=ctx.enable_streaming,
        source=ctx.conversation(),
    )


def lane_for(ctx: RunContext, agent_input: AgentInput) -> RunContext:
    """Return a lane of `ctx` that starts from `agent_input`: a composite runs its children
    there, so they start from the input it was given."""
    source = agent_input.source
    if source is None:
        source = [(USER, m) for m in agent_input.messages]
    return ctx.lane(source)


def is_pause(event: AgentEvent, depth: int) -> bool:
    """Whether `event` announces a pause of this lane (not of an agent run as a tool)."""
    return (
        event.depth == depth and event.action is not None and event.action.interrupted is not None
    )
