"""Workflow agents: run sub-agents in sequence, in parallel, or in a loop.

Each child sees the run's input plus the messages of the children before it, rewritten
"For context" (its own messages stay verbatim). As in Eino, the run path accumulates siblings
in a sequence or loop (the second child of `S` runs at `("S", "A", "B")`); parallel children
run at `("P", child)`. An exit from a child stops the whole workflow; an error stops it with
that error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing

from plait.agent import Agent, AgentInput
from plait.agents.flow import dump_history, is_pause, load_history, run_flow
from plait.context import RunContext
from plait.errors import AgentError, UsageError
from plait.events import AgentEvent, BreakLoopAction, InterruptCtx

__all__ = ["LoopAgent", "ParallelAgent", "SequentialAgent"]


def _check(name: str, sub_agents: Sequence[Agent]) -> tuple[Agent, ...]:
    if not name:
        raise UsageError("a workflow agent needs a non-empty name")
    if not sub_agents:
        raise UsageError(f"workflow '{name}' needs at least one sub-agent")
    return tuple(sub_agents)


def _exits(event: AgentEvent, depth: int) -> bool:
    """Whether `event` is an exit of this workflow's own lane (not inside an agent tool)."""
    return event.depth == depth and event.action is not None and event.action.exit


class _Workflow:
    def __init__(self, name: str, sub_agents: Sequence[Agent], *, description: str = "") -> None:
        self.name = name
        self.description = description
        self.sub_agents = _check(name, sub_agents)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {[a.name for a in self.sub_agents]})"

    async def _run_child(
        self, child: Agent, ctx: RunContext, state: _Lane
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run one child through the flow; note exit, break and error in `state`."""
        async with aclosing(run_flow(child, ctx)) as events:  # type: ignore[type-var]
            async for event in events:
                if event.error is not None:
                    state.failed = True
                elif _exits(event, ctx.depth):
                    state.exited = True
                elif is_pause(event, ctx.depth):
                    assert event.action is not None and event.action.interrupted is not None
                    state.paused.extend(event.action.interrupted.contexts)
                    if state.on_pause is not None:
                        state.on_pause()  # saved before the pause event goes up
                yield state.mark_break(event, ctx.depth)
                if event.error is not None:
                    return


class _Lane:
    """What a workflow learned from its children so far."""

    __slots__ = ("broke", "exited", "failed", "iteration", "on_pause", "paused")

    def __init__(self) -> None:
        self.on_pause: Callable[[], None] | None = None
        self.exited = False
        self.failed = False
        self.broke = False
        self.paused: list[InterruptCtx] = []
        self.iteration: int | None = None  # set by LoopAgent: breaks are honoured

    @property
    def stop(self) -> bool:
        return self.exited or self.failed or self.broke or bool(self.paused)

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


class SequentialAgent(_Workflow):
    """Run the sub-agents one after another."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Run each child in order; stop at an exit, an error or a pause."""
        state = _Lane()
        saved = ctx.take_state()
        start = saved["index"] if saved else 0
        path = tuple(saved["path"][:-1]) if saved else ctx.run_path
        for index in range(start, len(self.sub_agents)):
            child = self.sub_agents[index]
            path = (*path, child.name)
            child_ctx = ctx.for_agent(child.name, run_path=path, address=ctx.address)
            saved_state = {"index": index, "path": list(path)}
            state.on_pause = functools.partial(ctx.save_state, saved_state)
            async with aclosing(self._run_child(child, child_ctx, state)) as events:
                async for event in events:
                    yield event
            if state.stop:
                return


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

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Run the children in rounds until a break, an exit, an error, a pause or the limit."""
        state = _Lane()
        saved = ctx.take_state()
        iteration = saved["iteration"] if saved else 0
        start = saved["index"] if saved else 0
        path = tuple(saved["path"][:-1]) if saved else ctx.run_path
        while self.max_iterations is None or iteration < self.max_iterations:
            state.iteration = iteration
            for index in range(start, len(self.sub_agents)):
                child = self.sub_agents[index]
                path = (*path, child.name)
                child_ctx = ctx.for_agent(child.name, run_path=path, address=ctx.address)
                saved_state = {"iteration": iteration, "index": index, "path": list(path)}
                state.on_pause = functools.partial(ctx.save_state, saved_state)
                async with aclosing(self._run_child(child, child_ctx, state)) as events:
                    async for event in events:
                        yield event
                if state.stop:
                    return
            start = 0
            iteration += 1


_DONE = object()


class ParallelAgent(_Workflow):
    """Run the sub-agents concurrently; their events interleave as they happen.

    Each child works in its own history lane; after all finish, their messages join the
    history (in sub-agent order) so that later agents see them. An error cancels the others.
    """

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Run every child at once and pass on their events; pause once if any paused."""
        saved = ctx.take_state()
        base = len(ctx.history)
        lanes = {c.name: ctx.fork().for_agent(c.name) for c in self.sub_agents}
        todo = list(self.sub_agents)
        if saved:  # resuming: only the children that paused run again
            for name, records in saved["lanes"].items():
                lanes[name]._history[base:] = load_history(records)
            todo = [c for c in self.sub_agents if c.name in saved["paused"]]
        states = {c.name: _Lane() for c in todo}
        async with aclosing(self._interleave(todo, lanes, states)) as events:
            async for event in events:
                yield event
                if event.error is not None:
                    return
        paused = [name for name, st in states.items() if st.paused]
        if paused:
            ctx.save_state(
                {
                    "paused": paused,
                    "lanes": {n: dump_history(x.history[base:]) for n, x in lanes.items()},
                }
            )
            yield ctx.pause_event([c for n in paused for c in states[n].paused])
            return
        for lane_ctx in lanes.values():
            ctx.history.extend(lane_ctx.history[base:])

    async def _interleave(
        self, children: list[Agent], lanes: dict[str, RunContext], states: dict[str, _Lane]
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run `children` concurrently; yield their events (pause events are kept back)."""
        queue: asyncio.Queue[object] = asyncio.Queue()

        async def lane(child: Agent, child_ctx: RunContext, state: _Lane) -> None:
            try:
                async with aclosing(self._run_child(child, child_ctx, state)) as events:
                    async for event in events:
                        if not is_pause(event, child_ctx.depth):
                            queue.put_nowait(event)
            except Exception as exc:
                queue.put_nowait(child_ctx.event(error=AgentError.wrap(exc, child.name)))
            finally:
                queue.put_nowait(_DONE)

        tasks = [asyncio.ensure_future(lane(c, lanes[c.name], states[c.name])) for c in children]
        try:
            remaining = len(tasks)
            while remaining:
                item = await queue.get()
                if item is _DONE:
                    remaining -= 1
                    continue
                assert isinstance(item, AgentEvent)
                yield item
                if item.error is not None:
                    return
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
