"""`StateGraph`: nodes that read a shared state and return updates, run in super-steps.

A compiled graph is an `Agent`. When it finishes it emits its answer, an assistant-message
event at its own depth: the last assistant message its nodes added to `messages`, else its
final state as JSON. Then comes its last event, whose `output.custom` is the final state. A
`Runner` reports that state as `final_output`; an `AgentTool`, a coordinator's member tool or
an agent node of another graph takes the answer, like any agent's last message.

Sync function nodes run in worker threads (with the context variables copied, so
`plait.run_context()` works in them), so the nodes of a super-step run at the same time and
the event loop stays free. A thread cannot be killed: a cancelled run stops waiting for it at
once, and the function runs on to its end in the background (closing the event loop, and
leaving the process, wait for it).

A checkpoint keeps the state as JSON; a resumed graph rebuilds each value as its key's
annotated type (a `datetime` comes back as a `datetime`, `messages` as `Message`s).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable, Mapping, Sequence
from contextlib import aclosing
from typing import Any

from plait._util.json import load_plain
from plait._util.merge import emitted
from plait._util.route import run_sync_node
from plait.agents.agent_tool import run_nested
from plait.core.agent import Agent, AgentInput
from plait.core.agent_context import AgentContext
from plait.core.checkpoint import GraphJoin, GraphRecord
from plait.core.context import Emit, Frame, inside
from plait.core.kernel import Interrupted, call_in
from plait.core.steps import Fail, Final, Pause, RunNodes, Step
from plait.errors import AgentError, MaxStepsExceeded, PlaitError, UsageError
from plait.events import AgentEvent, AgentOutput, InterruptCtx
from plait.messages import Message

__all__ = ["END", "START", "CompiledGraph", "StateGraph", "append", "merge"]

START = "__start__"
END = "__end__"
Reducer = Callable[[Any, Any], Any]
Router = Callable[[dict[str, Any]], Hashable | Sequence[Hashable]]


def append(left: Any, right: Any) -> list[Any]:
    """Reducer: append the update's items to the current list."""
    return [*(left or []), *(right if isinstance(right, list | tuple) else [right])]


def merge(left: Any, right: Any) -> dict[Any, Any]:
    """Reducer: merge the update's keys into the current mapping."""
    return {**(left or {}), **(right or {})}


def _hints(schema: Any) -> dict[str, Any]:
    """Return the schema's annotation per key (`Required[...]`/`NotRequired[...]` unwrapped)."""
    try:
        hints = typing.get_type_hints(schema, include_extras=True)
    except Exception as exc:
        raise UsageError(f"StateGraph cannot read the state schema {schema!r}: {exc}") from exc
    for key, hint in hints.items():
        if typing.get_origin(hint) in (typing.Required, typing.NotRequired):
            hints[key] = typing.get_args(hint)[0]
    return hints


def _reducers(hints: Mapping[str, Any]) -> dict[str, Reducer]:
    found: dict[str, Reducer] = {}
    for key, hint in hints.items():
        for meta in getattr(hint, "__metadata__", ()):
            if callable(meta):
                found[key] = meta
    return found


class StateGraph:
    """A graph of nodes over a state schema (TypedDict, dataclass or pydantic model).

    Keys annotated `Annotated[list, plait.graph.append]` (or `merge`, or any `(old, new) ->
    value`) combine updates; other keys are overwritten. Keys missing from the initial state
    are allowed.
    """

    def __init__(self, state_schema: Any) -> None:
        self.state_schema = state_schema
        self.hints = _hints(state_schema)
        self.reducers = _reducers(self.hints)
        self.nodes: dict[str, Callable[..., Any] | Agent] = {}
        self.edges: dict[str, list[str]] = {}
        self.joins: list[tuple[tuple[str, ...], str]] = []
        self.branches: dict[str, list[tuple[Router, Mapping[Hashable, str] | None]]] = {}

    def add_node(self, name: str, node: Callable[..., Any] | Agent) -> StateGraph:
        """Add a node: a function `(state) -> update` (sync or async) or any `Agent`."""
        if name in (START, END) or not name:
            raise UsageError(f"'{name}' cannot be a node name")
        if name in self.nodes:
            raise UsageError(f"the graph already has a node '{name}'")
        self.nodes[name] = node
        return self

    def add_edge(self, source: str | Sequence[str], target: str) -> StateGraph:
        """Run `target` after `source`; a list of sources is a join that waits for all."""
        if isinstance(source, str):
            self.edges.setdefault(source, []).append(target)
        else:
            self.joins.append((tuple(source), target))
        return self

    def add_conditional_edges(
        self, source: str, router: Router, path_map: Mapping[Hashable, str] | None = None
    ) -> StateGraph:
        """After `source`, run the node(s) `router(state)` names (through `path_map`)."""
        self.branches.setdefault(source, []).append((router, path_map))
        return self

    def compile(self, *, max_steps: int = 100, name: str = "graph") -> CompiledGraph:
        """Check the graph and return it as an `Agent`."""
        known = {*self.nodes, START, END}
        for source, targets in self.edges.items():
            for target in [source, *targets]:
                if target not in known:
                    raise UsageError(f"edge {source} -> {targets}: unknown node '{target}'")
        for sources, target in self.joins:
            for node in [*sources, target]:
                if node not in known:
                    raise UsageError(f"join {list(sources)} -> {target}: unknown node '{node}'")
        starts = START in self.edges or START in self.branches
        if not starts and not any(START in s for s, _ in self.joins):
            raise UsageError("the graph has no edge from START")
        return CompiledGraph(self, max_steps=max_steps, name=name)


class CompiledGraph:
    """A compiled `StateGraph`; an `Agent` whose final output is the final state.

    The initial state holds `messages` (the run's input messages) and every state key found
    in the session values. Each super-step runs its nodes concurrently (sync functions in
    worker threads) and emits one event per node with `output.custom = {"node": name,
    "update": update}`; an agent node runs on the state's `messages` (one level deeper) and
    its final answer is appended to them. At the end the graph emits its answer (the last
    assistant message its nodes added to `messages`, else the final state as JSON), then its
    last event, whose `output.custom` is the final state. `interrupt()` in a node pauses the
    graph; on resume that node runs again from its start (nodes that finished in the same
    step do not), on the saved state rebuilt as the schema's types.
    """

    def __init__(self, graph: StateGraph, *, max_steps: int, name: str) -> None:
        self.graph = graph
        self.max_steps = max_steps
        self.name = name
        self.description = f"state graph with nodes {list(graph.nodes)}"
        self._adapters: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"CompiledGraph({self.name!r}, nodes={list(self.graph.nodes)})"

    def _initial(self, input: AgentInput, ctx: Frame) -> dict[str, Any]:
        keys = self.graph.hints
        state = {k: v for k, v in ctx.session_values.items() if k in keys}
        state.setdefault("messages", list(input.messages))
        return state

    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Run on `input` in `ctx` (see the class docstring)."""
        return self._events(input, inside(ctx))

    async def _events(self, input: AgentInput, ctx: Frame) -> AsyncGenerator[AgentEvent, None]:
        """Run super-steps from START until no node is triggered."""
        saved = ctx.take_record("graph", GraphRecord)
        if saved is not None:
            state, frontier, steps, done, seen = self._restore(saved)
        else:
            state, steps, done = self._initial(input, ctx), 0, {}
            seen = {sources: set() for sources, _ in self.graph.joins}
            try:
                frontier = self._next([START], state, seen)
            except PlaitError as exc:
                yield ctx.event(error=exc)
                return
        step: Step = RunNodes(tuple(frontier)) if frontier else Final()
        while True:
            match step:
                case RunNodes(nodes):
                    if saved is None:
                        steps += 1
                        if steps > self.max_steps:
                            step = Fail(self._too_many_steps())
                            continue
                    saved = None
                    run = _SuperStep(list(nodes), done)
                    async with aclosing(self._super_step(run, state, ctx)) as events:
                        async for event in events:
                            yield event
                            if event.error is not None:
                                return
                    state, step = self._after(run, state, steps, seen, ctx)
                    done = {}
                    if isinstance(step, RunNodes):
                        stop = await ctx.safe_point()  # a step checkpoint, or a stop
                        if stop is not None:
                            yield stop
                            return
                case Pause(interrupts):
                    yield ctx.pause_event(interrupts)
                    return
                case Fail(error):
                    if error is not None:
                        yield ctx.event(error=error)
                    return
                case _:
                    ctx.drop_record("graph")
                    yield ctx.event(message=_answer(state, input.messages))
                    yield ctx.event(output=AgentOutput(custom=state))
                    return

    def _too_many_steps(self) -> MaxStepsExceeded:
        return MaxStepsExceeded(
            f"graph '{self.name}' ran more than max_steps={self.max_steps} steps",
            limit=self.max_steps,
        )

    def _after(
        self,
        run: _SuperStep,
        state: dict[str, Any],
        steps: int,
        seen: dict[tuple[str, ...], set[str]],
        ctx: Frame,
    ) -> tuple[dict[str, Any], Step]:
        """Return the state after a super-step and the next step: `Pause` (the record keeps
        the nodes' updates so far), `RunNodes` (the record keeps where it starts), `Final`
        when no node is triggered, or `Fail`."""
        if run.paused:
            self._keep(ctx, state, run.frontier, steps, run.updates, seen)
            return state, Pause(tuple(run.paused))
        for node in run.frontier:
            state = self._apply(state, run.updates[node])
        try:
            frontier = self._next(run.frontier, state, seen)
        except PlaitError as exc:
            return state, Fail(exc)
        if not frontier:
            return state, Final()
        self._keep(ctx, state, frontier, steps, {}, seen)
        return state, RunNodes(tuple(frontier))

    def _keep(
        self,
        ctx: Frame,
        state: dict[str, Any],
        frontier: list[str],
        steps: int,
        done: dict[str, Any],
        seen: dict[tuple[str, ...], set[str]],
    ) -> None:
        """Keep the graph's resume record: where the next super-step starts."""
        joins = [GraphJoin(sources=list(k), seen=sorted(v)) for k, v in seen.items()]
        record = GraphRecord.model_construct(
            state=state, frontier=list(frontier), steps=steps, done=done, joins=joins
        )
        ctx.keep_record("graph", record)

    def _restore(
        self, saved: GraphRecord
    ) -> tuple[dict[str, Any], list[str], int, dict[str, Any], dict[tuple[str, ...], set[str]]]:
        """Unpack a saved pause: state and finished updates rebuilt as the schema's types."""
        done = {
            node: self._typed(update) if isinstance(update, Mapping) else update
            for node, update in saved.done.items()
        }
        seen = {tuple(j.sources): set(j.seen) for j in saved.joins}
        return self._typed(saved.state), list(saved.frontier), saved.steps, done, seen

    def _typed(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Rebuild JSON values as their keys' annotated types; `messages` as `Message`s.

        A value that does not fit its annotation (one item for an `append` key, say) stays
        as its JSON data.
        """
        from pydantic import ValidationError

        out = dict(values)
        for key, value in values.items():
            try:
                if key == "messages" and isinstance(value, list):
                    value = out[key] = load_plain(list[Message], value)
                adapter = self._adapter(key)
                if adapter is not None:
                    out[key] = adapter.validate_python(value)
            except ValidationError:
                pass
        return out

    def _adapter(self, key: str) -> Any:
        """The validator of a state key's annotation (None when pydantic cannot build one)."""
        if key not in self._adapters:
            from pydantic import PydanticUserError, TypeAdapter

            hint = self.graph.hints.get(key)
            try:
                self._adapters[key] = None if hint is None else TypeAdapter(hint)
            except PydanticUserError:
                self._adapters[key] = None
        return self._adapters[key]

    def _apply(self, state: dict[str, Any], update: Any) -> dict[str, Any]:
        if not update:
            return state
        if not isinstance(update, Mapping):
            raise UsageError(f"a node of graph '{self.name}' returned {type(update).__name__}")
        new = dict(state)
        for key, value in update.items():
            reducer = self.graph.reducers.get(key)
            new[key] = reducer(new.get(key), value) if reducer else value
        return new

    def _next(
        self, finished: Sequence[str], state: dict[str, Any], seen: dict[tuple[str, ...], set[str]]
    ) -> list[str]:
        """The nodes triggered by the ones that just finished (END and repeats dropped)."""
        out: list[str] = []
        for node in finished:
            out += self.graph.edges.get(node, [])
            for router, path_map in self.graph.branches.get(node, []):
                out += self._route(node, router, path_map, state)
        for sources, target in self.graph.joins:
            seen[sources].update(n for n in finished if n in sources)
            if seen[sources] >= set(sources):
                seen[sources].clear()
                out.append(target)
        unique: list[str] = []
        for node in out:
            if node != END and node not in unique:
                unique.append(node)
        return unique

    def _route(
        self,
        source: str,
        router: Router,
        path_map: Mapping[Hashable, str] | None,
        state: dict[str, Any],
    ) -> list[str]:
        keys = router(state)
        keys_list = list(keys) if isinstance(keys, list | tuple | set) else [keys]
        targets = []
        for key in keys_list:
            if key is None or key == "":
                continue
            target = path_map.get(key, key) if path_map is not None else key
            if target != END and target not in self.graph.nodes:
                raise UsageError(
                    f"conditional edge from '{source}' returned {key!r}; target node "
                    f"'{target}' does not exist"
                )
            targets.append(str(target))
        return targets

    async def _super_step(
        self, step: _SuperStep, state: dict[str, Any], ctx: Frame
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the step's nodes concurrently; yield their events and one event per node."""
        todo = [n for n in step.frontier if n not in step.updates]

        async def one(name: str, emit: Emit) -> None:
            nctx = ctx.for_tool(name, "step")
            nctx.address = f"{ctx.address};node:{name}"
            try:
                update = await call_in(nctx, self._node, name, state, nctx, emit)
            except Exception as exc:
                emit(ctx.event(error=AgentError.wrap(exc, name)))
                return
            if isinstance(update, Interrupted):
                step.paused.extend(update.contexts)
                return
            step.updates[name] = update
            emit(ctx.event(output=AgentOutput(custom={"node": name, "update": update})))

        jobs = [functools.partial(one, n) for n in todo]
        async with aclosing(emitted(jobs, last=lambda event: event.error is not None)) as events:
            async for event in events:
                yield event

    async def _node(self, name: str, state: dict[str, Any], nctx: Frame, emit: Emit) -> Any:
        node = self.graph.nodes[name]
        if not callable(node):  # an agent
            return await self._agent_node(node, state, nctx, emit)
        if _is_async(node):
            result = node(state)
        else:  # on a daemon thread (never waited for once abandoned), context copied
            result = await run_sync_node(nctx, name, node, state)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _agent_node(
        self, agent: Agent, state: dict[str, Any], nctx: Frame, emit: Emit
    ) -> Any:
        """Run an agent on the state's messages; its final answer is appended to them."""
        answer = await run_nested(agent, nctx, lambda: list(state.get("messages") or []), emit)
        new = [answer] if answer is not None else []
        if "messages" in self.graph.reducers:
            return {"messages": new}
        return {"messages": [*(state.get("messages") or []), *new]}


def _is_async(fn: Callable[..., Any]) -> bool:
    """Whether calling `fn` returns a coroutine (an async function or `async __call__`)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _answer(state: Mapping[str, Any], given: Sequence[Message]) -> Message:
    """The graph's answer: the last assistant message its nodes added, else the state as JSON.

    A repeated message drops its usage, which was counted where the model answered.
    """
    import pydantic_core

    messages = state.get("messages")
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, Message) and message.role == "assistant" and message not in given:
            return dataclasses.replace(message, usage=None)
    return Message.assistant(pydantic_core.to_json(state, serialize_unknown=True).decode())


class _SuperStep:
    """One super-step: its nodes, their updates, and the interrupts that paused it."""

    def __init__(self, frontier: list[str], done: dict[str, Any]) -> None:
        self.frontier = frontier
        self.updates: dict[str, Any] = dict(done)
        self.paused: list[InterruptCtx] = []
