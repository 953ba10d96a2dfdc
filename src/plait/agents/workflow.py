"""Workflow agents: run sub-agents in sequence, in parallel, or in a loop.

Each child sees the run's input plus the messages of the children before it, rewritten
"For context" (its own messages stay verbatim). As in Eino, the run path accumulates siblings
in a sequence or loop (the second child of `S` runs at `("S", "A", "B")`); parallel children
run at `("P", child)`. An exit from a child stops the whole workflow; an error stops it with
that error.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing

from plait._util.merge import emitted
from plait.core.agent import Agent, AgentInput, require_agent, require_unique_names
from plait.core.agent_context import AgentContext
from plait.core.checkpoint import LaneRecord, ParallelRecord, SequenceRecord
from plait.core.context import Frame, inside
from plait.core.handoff import lane_for
from plait.core.history import as_records, whole_messages
from plait.core.kernel import is_pause, run_agent
from plait.core.steps import Fail, Final, Pause, Step
from plait.errors import UsageError
from plait.events import AgentEvent, BreakLoopAction, InterruptCtx

__all__ = ["LoopAgent", "ParallelAgent", "SequentialAgent"]


def _check(kind: str, name: str, sub_agents: Sequence[Agent]) -> tuple[Agent, ...]:
    if not name:
        raise UsageError("a workflow agent needs a non-empty name")
    if not sub_agents:
        raise UsageError(f"workflow '{name}' needs at least one sub-agent")
    agents = tuple(
        require_agent(a, f"{kind} '{name}': sub_agents[{i}]") for i, a in enumerate(sub_agents)
    )
    require_unique_names(agents, f"{kind} '{name}': sub_agents")
    return agents


def _exits(event: AgentEvent, depth: int) -> bool:
    """Whether `event` is an exit of this workflow's own lane (not inside an agent tool)."""
    return event.depth == depth and event.action is not None and event.action.exit


class _Workflow:
    def __init__(self, name: str, sub_agents: Sequence[Agent], *, description: str = "") -> None:
        self.name = name
        self.description = description
        self.sub_agents = _check(type(self).__name__, name, sub_agents)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {[a.name for a in self.sub_agents]})"

    async def _run_child(
        self, child: Agent, ctx: Frame, lane: _Lane
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run one child through the flow; note exit, break, pause and error in `lane`."""
        async with aclosing(run_agent(child, ctx)) as events:
            async for event in events:
                if event.error is not None:
                    lane.failed = True
                elif _exits(event, ctx.depth):
                    lane.exited = True
                elif is_pause(event, ctx.depth):
                    assert event.action is not None and event.action.interrupted is not None
                    lane.paused.extend(event.action.interrupted.contexts)
                yield lane.mark_break(event, ctx.depth)
                if event.error is not None:
                    return

    async def _rounds(
        self, input: AgentInput, ctx: Frame, limit: int | None, *, loop: bool
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the children in order, round after round (`limit` rounds; None: no limit),
        until an exit, an error, a pause or, in a `loop`, a break."""
        lane = _Lane()
        where = open_lane(ctx, input)
        iteration, start, path = _resume_point(ctx)
        while limit is None or iteration < limit:
            lane.iteration = iteration if loop else None  # a loop's breaks are honoured
            at = (iteration, start, path)
            async with aclosing(self._in_order(ctx, where, at, lane)) as events:
                async for event in events:
                    yield event
            if lane.outcome() is not None:
                break
            start, path = 0, lane.path
            iteration += 1
        _close(ctx, where, lane.outcome())

    async def _in_order(
        self,
        ctx: Frame,
        where: Frame,
        at: tuple[int, int, tuple[str, ...]],
        lane: _Lane,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the children from `at` (iteration, index, run path) one after another in the
        lane `where`, keeping the sequence's record."""
        iteration, start, path = at
        for index in range(start, len(self.sub_agents)):
            child = self.sub_agents[index]
            path = (*path, child.name)
            ctx.keep_record(
                "sequence", SequenceRecord(index=index, path=list(path), iteration=iteration)
            )
            child_ctx = where.for_agent(child.name, run_path=path, address=ctx.address)
            async with aclosing(self._run_child(child, child_ctx, lane)) as events:
                async for event in events:
                    yield event
            if lane.outcome() is not None:
                return
        lane.path = path


class _Lane:
    """What a workflow learned from its children so far."""

    __slots__ = ("broke", "exited", "failed", "iteration", "path", "paused")

    def __init__(self) -> None:
        self.exited = False
        self.failed = False
        self.broke = False
        self.paused: list[InterruptCtx] = []
        self.iteration: int | None = None  # set by LoopAgent: breaks are honoured
        self.path: tuple[str, ...] = ()

    def outcome(self) -> Step | None:
        """Return what the children came to: None (go on), `Fail`, `Pause`, or `Final` (an
        exit, or a break of the loop)."""
        if self.failed:
            return Fail()
        if self.paused:
            return Pause(tuple(self.paused))
        if self.exited or self.broke:
            return Final()
        return None

    def mark_break(self, event: AgentEvent, depth: int) -> AgentEvent:
        """Take the first pending `BreakLoopAction` of this lane for the loop, marking it done."""
        action = event.action
        if self.iteration is None or self.broke or action is None or event.depth != depth:
            return event
        brk = action.break_loop
        if brk is None or brk.done:
            return event
        self.broke = True
        done = BreakLoopAction(
            from_agent=brk.from_agent, done=True, current_iterations=self.iteration
        )
        return dataclasses.replace(event, action=dataclasses.replace(action, break_loop=done))


def _close(ctx: Frame, where: Frame, outcome: Step | None) -> None:
    """End a sequence or loop: on a pause its records stay for the checkpoint, else they go
    and what its children said joins the caller's lane."""
    match outcome:
        case Pause():
            return
        case _:
            ctx.drop_record("sequence")
            close_lane(ctx, where)


def open_lane(ctx: Frame, agent_input: AgentInput) -> Frame:
    """Open the lane a composite runs its children in: it starts from the composite's
    input, and what the children record there is its resume record until `close_lane`."""
    lane = lane_for(ctx, agent_input)
    saved = ctx.take_record("lane", LaneRecord)
    if saved is not None:
        lane.lane_history.extend(as_records(saved.history))
    ctx.keep_record("lane", functools.partial(_lane_record, lane))
    return lane


def close_lane(ctx: Frame, lane: Frame) -> None:
    """The composite finished: what its children recorded joins the history around it."""
    ctx.drop_record("lane")
    ctx.lane_history.extend(lane.lane_history)


def _lane_record(lane: Frame) -> LaneRecord:
    return LaneRecord(history=whole_messages(lane.lane_history))


def _resume_point(ctx: Frame) -> tuple[int, int, tuple[str, ...]]:
    """Return (iteration, index, run path before the child) to start from."""
    saved = ctx.take_record("sequence", SequenceRecord)
    if saved is None:
        return 0, 0, ctx.run_path
    return saved.iteration, saved.index, tuple(saved.path[:-1])


class SequentialAgent(_Workflow):
    """Run the sub-agents one after another."""

    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Run on `input` in `ctx` (see the class docstring)."""
        return self._rounds(input, inside(ctx), 1, loop=False)


class LoopAgent(_Workflow):
    """Run the sub-agents in order, again and again, until one breaks the loop.

    `max_iterations=None` loops until a `BreakLoopAction` (sent by an agent or a tool with
    `run_context().break_loop()`); it takes effect after the sub-agent that sent it finishes.
    """

    def __init__(
        self,
        name: str,
        sub_agents: Sequence[Agent],
        *,
        max_iterations: int | None = None,
        description: str = "",
    ) -> None:
        super().__init__(name, sub_agents, description=description)
        if max_iterations is not None and max_iterations < 1:
            raise UsageError(f"loop '{name}': max_iterations must be at least 1 or None")
        self.max_iterations = max_iterations

    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Run on `input` in `ctx` (see the class docstring)."""
        return self._events(input, inside(ctx))

    def _events(self, input: AgentInput, ctx: Frame) -> AsyncGenerator[AgentEvent, None]:
        """Run the children in rounds until a break, an exit, an error, a pause or the limit."""
        return self._rounds(input, ctx, self.max_iterations, loop=True)


class ParallelAgent(_Workflow):
    """Run the sub-agents concurrently; their events interleave as they happen.

    Each child works in its own history lane; after all finish, their messages join the
    history (in sub-agent order) so that later agents see them. An error cancels the others.
    """

    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Run on `input` in `ctx` (see the class docstring)."""
        return self._events(input, inside(ctx))

    async def _events(self, input: AgentInput, ctx: Frame) -> AsyncGenerator[AgentEvent, None]:
        """Run every child at once and pass on their events; pause once if any paused."""
        saved = ctx.take_record("parallel", ParallelRecord)
        base = 0
        lanes = {c.name: lane_for(ctx, input).for_agent(c.name) for c in self.sub_agents}
        todo = list(self.sub_agents)
        if saved is not None:  # resuming: only the children not finished run again
            for name, pairs in saved.lanes.items():
                if name in lanes:
                    lanes[name].lane_history[:] = as_records(pairs)
            todo = [c for c in self.sub_agents if c.name in saved.pending]
        states = {c.name: _Lane() for c in todo}
        pending = {c.name for c in todo}
        ctx.keep_record("parallel", functools.partial(_parallel_record, pending, lanes, base))
        async with aclosing(self._interleave(todo, lanes, states, pending)) as events:
            async for event in events:
                yield event
                if event.error is not None:
                    return
        paused = [c for st in states.values() if isinstance(st.outcome(), Pause) for c in st.paused]
        if paused:
            yield ctx.pause_event(paused)
            return
        ctx.drop_record("parallel")
        for lane_ctx in lanes.values():
            ctx.lane_history.extend(lane_ctx.lane_history[base:])

    async def _interleave(
        self,
        children: list[Agent],
        lanes: dict[str, Frame],
        states: dict[str, _Lane],
        pending: set[str],
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run `children` concurrently; yield their events (pause events are kept back)."""

        async def lane(child: Agent, emit: Callable[[AgentEvent], None]) -> None:
            child_ctx, state = lanes[child.name], states[child.name]
            async with aclosing(self._run_child(child, child_ctx, state)) as events:
                async for event in events:
                    # a pause is kept back (all pause as one); a stop, a pause with an error
                    # (`RunCancelled`), ends the run now
                    if event.error is not None or not is_pause(event, child_ctx.depth):
                        emit(event)
            if state.outcome() is None:
                pending.discard(child.name)

        jobs = [functools.partial(lane, c) for c in children]
        async with aclosing(emitted(jobs, last=lambda event: event.error is not None)) as events:
            async for event in events:
                yield event


def _parallel_record(pending: set[str], lanes: dict[str, Frame], base: int) -> ParallelRecord:
    return ParallelRecord(
        pending=sorted(pending),
        lanes={n: whole_messages(c.lane_history[base:]) for n, c in lanes.items()},
    )
