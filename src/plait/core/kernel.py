"""The run kernel: the one door into an agent, the way into a tool call, and out of both on
a pause.

`run_agent` is how the runner and every composite (workflows, teams, `AgentTool`, graphs,
prebuilt agents) run an agent: an agent that can transfer runs in the handoff loop
(`plait.handoff.Flow`), any other is entered at once; either way its own messages are
recorded in its lane. `run_loop` drives a handoff loop of another policy (a swarm) through
the same entry. Entering an agent makes its context current for every step (so
`plait.interrupt()` and `plait.run_context()` see it), turns the pause signal into the
agent's one pause event and an exception into its error event, fixes its `resume_info`, and
on a resume drops what an agent that keeps no state emits again. `call_in` does the same for
one tool or graph-node call. This module is the only one that catches the pause signal
(`plait._signal`); it stands above the context and the handoff loop and imports them, never
the other way round.

One run, and one resume, as calls:

    Runner.run ─► RunStream ─► run_agent(root, ctx)
        ├─ can transfer? Flow(root).run(ctx, _enter) ─► _enter(agent) per turn, follow transfers
        └─ else _enter(root) ─► root.run(input, ctx) ─► model call ─► tools: call_in(tool)
               a composite's run ─► run_agent(child, child ctx) ─► … (same door, any depth)
               interrupt() ─► pause signal ─► _enter: ONE pause event ─► RunStream saves
                              a checkpoint (a new id) ─► RunResult(interrupts, checkpoint_id)
    Runner.resume(id) ─► claim the checkpoint ─► Frame.restore(records, answers)
        ─► run_agent(root, ctx) ─► each component takes its record once (`take_record`) and
           goes down the path to its interrupt; siblings that finished are not run again;
           the interrupted tool or agent runs again and interrupt() returns the answer
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from types import AsyncGeneratorType
from typing import Any, TypeVar

from plait.core.agent import Agent, AgentInput
from plait.core.checkpoint import ReplayRecord
from plait.core.context import Frame
from plait.core.current import CURRENT
from plait.core.handoff import Flow, HandoffLoop, can_transfer, input_for
from plait.core.hooks import HookChain, notify
from plait.core.signal import InterruptSignal
from plait.errors import AgentError
from plait.events import AgentEvent, InterruptCtx

__all__ = ["Interrupted", "call_in", "is_pause", "run_agent", "run_loop"]

_T = TypeVar("_T")


class Interrupted:
    """What `call_in` returns when the call paused: the interrupts it raised."""

    __slots__ = ("contexts",)

    def __init__(self, contexts: tuple[InterruptCtx, ...]) -> None:
        self.contexts = contexts


def run_agent(
    agent: Agent, ctx: Frame, agent_input: AgentInput | None = None
) -> AsyncGenerator[AgentEvent, None]:
    """Run `agent` in `ctx` (on `agent_input`, by default its input in the lane of `ctx`):
    the one door into an agent, for the runner and every composite.

    An agent that can transfer runs in the flow loop, which follows its transfers; any other
    is entered at once. Its own messages are recorded in the lane of `ctx` (unless it records
    them itself: `RecordsHistory`).
    """
    if can_transfer(agent):
        return Flow(agent).run(ctx, _enter)
    if agent_input is None:
        agent_input = input_for(ctx, agent.name)
    keeps_own = getattr(agent, "records_history", False) is True  # `RecordsHistory`
    return _enter(agent, agent_input, ctx, not keeps_own)


def run_loop(loop: HandoffLoop, ctx: Frame) -> AsyncGenerator[AgentEvent, None]:
    """Run a handoff loop (a swarm) in `ctx`, entering its agents the kernel's way."""
    return loop.run(ctx, _enter)


def _enter(
    agent: Agent, agent_input: AgentInput, ctx: Frame, record: bool = False
) -> AsyncGenerator[AgentEvent, None]:
    """Enter `agent` in `ctx`: every step of it runs with `ctx` as the current context; a
    pause raised out of it becomes its pause event, and an exception its error event. With
    `record`, its own messages go into the lane's history. The `before_agent` and
    `after_agent` hooks (the run's, then the agent's own) run around it."""
    hooks = ctx.run.hooks
    own = getattr(agent, "agent_hooks", None)  # `HasHooks`: a ChatModelAgent's own hooks
    if isinstance(own, HookChain) and not own.empty:
        hooks = hooks.around(own)
    if not (hooks.before_agent or hooks.after_agent):
        return _run(agent, agent_input, ctx, record)
    return _hooked(agent, agent_input, ctx, record, hooks)


async def _hooked(
    agent: Agent, agent_input: AgentInput, ctx: Frame, record: bool, hooks: HookChain
) -> AsyncGenerator[AgentEvent, None]:
    """Run `agent` between its `before_agent` and `after_agent` hooks; a hook's error ends
    it with that error."""
    ctx.enter_resume(agent)  # before the hooks, which may read `ctx.resume_info`
    error = await notify(hooks.before_agent, "before_agent", ctx, agent_input)
    try:
        if error is not None:
            yield ctx.event(error=error)
        else:
            async with aclosing(_run(agent, agent_input, ctx, record, True)) as events:
                async for event in events:
                    if event.error is not None:
                        error = event.error
                    yield event
    finally:
        failure = await notify(hooks.after_agent, "after_agent", ctx, error)
    if failure is not None:
        yield ctx.event(error=failure)


async def _run(
    agent: Agent, agent_input: AgentInput, ctx: Frame, record: bool, entered: bool = False
) -> AsyncGenerator[AgentEvent, None]:
    """Run `agent` in `ctx` with `ctx` as the current context for every step (`entered`: its
    `resume_info` is fixed already)."""
    if not entered:
        ctx.enter_resume(agent)
    replay = _Replay(ctx)
    skip, emitted = replay.skip, 0  # its own events: said before a pause, and seen now
    own = replay.own
    path, depth = ctx.run_path, ctx.depth
    history = ctx.lane_history if record else None
    events = agent.run(agent_input, ctx)
    ended = False  # an async generator of events that ended (returned or raised): closed
    try:
        while True:
            token = CURRENT.set(ctx)
            try:
                event = await anext(events)
            except StopAsyncIteration:
                ended = True
                return
            except InterruptSignal as signal:
                ended = True
                replay.pause(emitted)
                yield ctx.pause_event(signal.contexts)
                return
            except Exception as exc:
                ended = True
                yield ctx.event(error=AgentError.wrap(exc, ctx.agent_name))
                return
            finally:
                CURRENT.reset(token)
            if event.error is not None:
                pass
            elif event.action is not None and is_pause(event, depth):
                replay.pause(emitted)
            elif event.depth == depth and event.run_path == path:  # one of its own
                emitted += 1
                if skip:
                    if emitted <= skip and replay.said_before(emitted, event):
                        continue  # said before the pause
                    skip = 0  # it says something new: from here on all is passed on
                own.append(event)
                output = event.output
                if history is not None and output is not None and output.message is not None:
                    history.append((event.agent_name, output.message))
            yield event
    finally:
        replay.close()
        ended = ended and type(events) is AsyncGeneratorType
        aclose = None if ended else getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


class _Replay:
    """What an agent emits again when it runs again from its start on a resume.

    An agent that keeps no resume record of its own (a custom agent, with or without values
    kept by `save_state`) cannot continue where it paused: it runs again from its start. Its
    own events before the pause were seen (and recorded in the history and the session)
    then, so after the resume its first own events are not passed on again as long as they
    say what those did, in the same order; from the first that differs on, everything is.
    The count and a digest of each event are kept with the run when the agent pauses, at
    its place in the run.
    """

    __slots__ = ("ctx", "own", "paused", "said", "skip")

    def __init__(self, ctx: Frame) -> None:
        self.ctx = ctx
        saved = ctx.take_record("replay", ReplayRecord)
        self.skip = 0 if saved is None else saved.emitted  # own events seen before the pause
        self.said: list[str] = [] if saved is None else saved.said
        self.own: list[AgentEvent] = []  # its own events passed on in this run of it
        self.paused = False

    def said_before(self, n: int, event: AgentEvent) -> bool:
        """Whether `event`, the agent's `n`-th own event, says what its `n`-th did before
        the pause (a record without digests goes by the count alone)."""
        said = self.said
        if not said:
            return True
        return n <= len(said) and _digest(event) == said[n - 1]

    def pause(self, emitted: int) -> None:
        """The agent paused, having emitted `emitted` events of its own in this run of it
        (passed on or not): keep them if it will run again from its start."""
        self.paused = True
        if emitted and not self.ctx.keeps_state(besides=_RUNS_AGAIN):
            kept = emitted - len(self.own)  # dropped as said before: their digests stand
            said = [*self.said[:kept], *(_digest(e) for e in self.own)]
            self.ctx.keep_record("replay", ReplayRecord(emitted=emitted, said=said))

    def close(self) -> None:
        """The agent ended: forget the count unless it paused."""
        if not self.paused and self.skip:
            self.ctx.drop_record("replay")


_RUNS_AGAIN = ("replay", "custom")  # records of an agent that runs again from its start


def _digest(event: AgentEvent) -> str:
    """Return what `event` says, as a short digest: its message (role, text, tool calls)
    and its custom output."""
    output = event.output
    said: list[Any] = [event.agent_name]
    if output is not None:
        variant = output.message
        if variant is not None:
            message = variant.message
            if message is None and variant.stream is not None and variant.stream.done:
                with contextlib.suppress(Exception):
                    message = variant.stream.merged()
            if message is not None:
                calls = [[c.name, c.arguments] for c in message.tool_calls]
                said += [message.role, message.content, calls, variant.tool_name]
            else:
                said.append(None)
        said.append(output.custom)
    text = json.dumps(said, sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


async def call_in(ctx: Frame, fn: Callable[..., Awaitable[_T]], *args: Any) -> _T | Interrupted:
    """Await `fn(*args)` with `ctx` as the current context (a tool or node call); a pause
    raised inside is returned as `Interrupted`."""
    token = CURRENT.set(ctx)
    try:
        return await fn(*args)
    except InterruptSignal as signal:
        return Interrupted(signal.contexts)
    finally:
        CURRENT.reset(token)


def is_pause(event: AgentEvent, depth: int) -> bool:
    """Whether `event` announces a pause of this lane (not of an agent run as a tool)."""
    return (
        event.depth == depth and event.action is not None and event.action.interrupted is not None
    )
