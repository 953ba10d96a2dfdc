"""The run context: plait's own implementation of `AgentContext`, and more for its modules.

`RunContext` is a view of one place in a run (an agent, or one tool call of it) over the
run's shared state (`plait.run_state.RunState`): where it is (agent, run path, depth,
address), what the run holds (session values, team state, usage), its budgets, the resume
records components keep while they work (`keep_record`), the values custom agents keep
(`save_state`), and how it pauses (`interrupt`), stops between steps (`safe_point`) and stops
tool calls in flight (`guard`, `cancelled`). The kernel (`plait.kernel`) enters every agent
and tool call with one; a pause or a step save snapshots every record at once, so saving a
step never unwinds the stack. Only the names of `AgentContext` are public. This module is
the only one that touches `RunContext`'s private fields.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

from plait.core.agent_context import AgentContext
from plait.core.custom import custom_record, load_custom, save_custom
from plait.core.history import USER, HistoryRecord, history_for, whole_messages
from plait.core.hooks import NO_HOOKS, HookChain
from plait.core.resume import ResumeInfo, ResumePoints
from plait.core.run_state import (
    Budget,
    CallGuard,
    IdSource,
    Interceptor,
    RunSnapshot,
    RunState,
    SavedOptions,
    Saver,
)
from plait.core.signal import raise_pause
from plait.errors import MaxDepthExceeded, PlaitError, RunCancelled, UsageError
from plait.events import (
    AgentAction,
    AgentEvent,
    AgentOutput,
    BreakLoopAction,
    InterruptCtx,
    InterruptInfo,
    MessageVariant,
)
from plait.messages import Message, Usage

__all__ = [
    "Emit",
    "IdSource",
    "RunContext",
    "inside",
]

_T = TypeVar("_T")
_UNREAD = object()  # a context's `resume_info`, not yet looked up
_RUN_VALUES = "run"  # where `keep_run_value` keeps its values: the address of no agent

Emit = Callable[[AgentEvent], None]


class RunContext:
    """The context of one agent (or one tool call) inside a run.

    `session_values` is one mapping shared by the whole run (last write wins); `state` is the
    team-shared state; `agent_name`, `run_path` and `depth` locate the current agent.
    Get it inside a tool with `plait.run_context()` or by a parameter annotated `RunContext`.
    """

    __slots__ = (
        "_actions",
        "_answered",
        "_budgets",
        "_call_guard",
        "_emit",
        "_history",
        "_model",
        "_model_messages",
        "_resume_info",
        "_root_authors",
        "_root_input",
        "_run",
        "_teams",
        "address",
        "agent_name",
        "chat_model",
        "depth",
        "run_path",
        "tool_call_id",
        "tool_error",
        "tool_name",
    )

    def __init__(
        self,
        *,
        agent_name: str,
        run_path: tuple[str, ...],
        depth: int,
        run: RunState,
        root_input: tuple[Message, ...],
        history: list[HistoryRecord],
        address: str,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
    ) -> None:
        self.agent_name = agent_name
        self.address = address
        self.run_path = run_path
        self.depth = depth
        self._run = run
        self._root_input = root_input
        self._history = history
        self._root_authors: tuple[str, ...] | None = None  # None: all the caller's
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.tool_error: Exception | None = None  # what the tool call raised (told the model)
        self.chat_model: object = None  # the model of the ChatModelAgent running here
        self._actions: list[AgentAction] | None = None
        self._emit: Emit | None = None
        self._call_guard: CallGuard | None = None
        self._model_messages: list[Message] | None = None
        self._model: object = None
        self._answered: list[Any] | None = None
        self._budgets: tuple[str, ...] = ()  # addresses of the teams whose budgets apply
        self._teams: tuple[tuple[str, int, int | None], ...] = ()  # (name, level, max_depth)
        self._resume_info: object = _UNREAD  # a ResumeInfo, None, or not read yet

    # --- building contexts ---------------------------------------------------------------

    @classmethod
    def root(
        cls,
        agent_name: str,
        messages: Sequence[Message],
        *,
        session_values: dict[str, Any] | None = None,
        enable_streaming: bool = False,
        authors: Sequence[str] | None = None,
        options: SavedOptions | None = None,
    ) -> RunContext:
        """Create the context of a run's root agent; `authors` names who wrote each of
        `messages` (a session's earlier turns), None when all are the caller's; `options`
        are the run's per-run options."""
        values = session_values if session_values is not None else {}
        ctx = cls(
            agent_name=agent_name,
            run_path=(agent_name,),
            depth=0,
            run=RunState(values, enable_streaming),
            root_input=tuple(messages),
            history=[],
            address=f"agent:{agent_name}",
        )
        if authors is not None:
            if len(authors) != len(ctx._root_input):
                raise UsageError("authors must name the author of each message")
            ctx._root_authors = tuple(authors)
        ctx._run.options = options
        return ctx

    @classmethod
    def detached(
        cls,
        *,
        agent_name: str,
        run_path: tuple[str, ...],
        depth: int,
        agent_address: str,
        session_values: dict[str, Any],
    ) -> RunContext:
        """Create the context of an agent at `agent_address` of a run that lives elsewhere
        (a durable-execution engine runs one tool call of it in another process): a run
        state of its own holding `session_values`; restore the rest with `restore`."""
        return cls(
            agent_name=agent_name,
            run_path=run_path,
            depth=depth,
            run=RunState(session_values, False),
            root_input=(),
            history=[],
            address=agent_address,
        )

    def configure(
        self,
        *,
        durability: str = "exit",
        ids: IdSource | None = None,
        hooks: HookChain = NO_HOOKS,
        max_transfers: int | None = None,
        saver: Saver | None = None,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        checkpoint_id: str | None = None,
        effects: Any = None,
    ) -> None:
        """Set the run-wide options (the runner does this once, at the start of a run);
        `metadata` is added to the run's (over what a resumed checkpoint held); `effects`
        is what the gates of its tool calls use (`plait.effects.EffectRun`)."""
        run = self._run
        run.effects = effects
        run.session_id = session_id
        run.checkpoint_id = checkpoint_id
        run.durability = durability
        run.ids = ids if ids is not None else run.ids
        run.hooks = hooks
        run.max_transfers = max_transfers
        run.saver = saver
        if metadata:
            run.metadata.update(metadata)

    def nested(self, agent_name: str, messages: Sequence[Message]) -> RunContext:
        """Return the context of an agent run as a tool of this one: one level deeper, with
        its own input and history, sharing the run's session values, state and usage."""
        ctx = RunContext(
            agent_name=agent_name,
            run_path=(*self.run_path, agent_name),
            depth=self.depth + 1,
            run=self._run,
            root_input=tuple(messages),
            history=[],
            address=f"{self.address};agent:{agent_name}",
        )
        ctx._budgets, ctx._teams = self._budgets, self._teams
        return ctx

    def fork(self, history: Sequence[HistoryRecord] | None = None) -> RunContext:
        """Return a copy with its own history lane (for a branch running in parallel);
        `history` replaces what the lane starts with."""
        ctx = self._copy(self.agent_name, self.run_path, self.address)
        ctx._history = list(self._history if history is None else history)
        return ctx

    def _copy(self, agent_name: str, run_path: tuple[str, ...], address: str) -> RunContext:
        ctx = RunContext(
            agent_name=agent_name,
            run_path=run_path,
            depth=self.depth,
            run=self._run,
            root_input=self._root_input,
            history=self._history,
            address=address,
        )
        ctx._budgets, ctx._teams = self._budgets, self._teams
        ctx._root_authors = self._root_authors
        return ctx

    def for_agent(
        self, name: str, *, run_path: tuple[str, ...] | None = None, address: str | None = None
    ) -> RunContext:
        """Return the context of agent `name` in the same lane, its run path and address
        extended (a workflow passes its own address so siblings do not accumulate there)."""
        return self._copy(
            name,
            run_path if run_path is not None else (*self.run_path, name),
            f"{address if address is not None else self.address};agent:{name}",
        )

    def at_gate(self, kind: str) -> RunContext:
        """Return the context of a gate in front of this tool call (an approval, a
        journal's question), whose interrupt is its own, apart from the tool's."""
        ctx = self._copy(self.agent_name, self.run_path, f"{self.address};{kind}")
        ctx.tool_name, ctx.tool_call_id = self.tool_name, self.tool_call_id
        return ctx

    def for_tool(self, name: str, call_id: str | None) -> RunContext:
        """Return the context of one tool call made by this agent (built on every call, so
        it sets its fields directly instead of going through `__init__`)."""
        ctx = _new_context(RunContext)
        ctx.agent_name = self.agent_name
        ctx.run_path = self.run_path
        ctx.depth = self.depth
        ctx._run = self._run
        ctx._root_input = self._root_input
        ctx._root_authors = self._root_authors
        ctx._history = self._history
        ctx.address = f"{self.address};tool:{name}:{call_id}"
        ctx.tool_name = name
        ctx.tool_call_id = call_id
        ctx.tool_error = None
        ctx.chat_model = None
        ctx._actions = []
        ctx._emit = self._emit
        ctx._call_guard = None
        ctx._model_messages = self._model_messages
        ctx._model = self._model
        ctx._answered = None
        ctx._budgets = self._budgets
        ctx._teams = self._teams
        ctx._resume_info = _UNREAD
        return ctx

    def for_team(
        self,
        team: str,
        *,
        max_depth: int | None,
        max_steps: int | None,
        max_tokens: int | None,
    ) -> RunContext:
        """Return the context a team runs its members in: its nesting level checked against
        every enclosing team's `max_depth`, its budget (kept in the run state) applied."""
        level = self._teams[-1][1] + 1 if self._teams else 1
        for outer, outer_level, limit in self._teams:
            if limit is not None and level - outer_level + 1 > limit:
                raise MaxDepthExceeded(
                    f"team '{team}' runs {level - outer_level + 1} levels of teams deep in "
                    f"team '{outer}', over its max_depth={limit}",
                    team=outer,
                    limit=limit,
                )
        inner = self._copy(self.agent_name, self.run_path, self.address)
        inner._teams = (*self._teams, (team, level, max_depth))
        if max_steps is not None or max_tokens is not None:
            key = f"{self.address}|{team}"
            if key not in self._run.budgets:
                self._run.budgets[key] = Budget(team, max_steps, max_tokens)
            inner._budgets = (*self._budgets, key)
        return inner

    # --- what the run holds ----------------------------------------------------------------

    @property
    def session_values(self) -> dict[str, Any]:
        """Return the run's session values (shared by every agent of the run)."""
        return self._run.session_values

    @property
    def state(self) -> dict[str, Any]:
        """Return the team-shared state of the run."""
        return self._run.state

    @property
    def root_input(self) -> tuple[Message, ...]:
        """Return the messages this run (or this agent-as-tool run) started with."""
        return self._root_input

    @property
    def root_records(self) -> list[tuple[str, Message]]:
        """Return the root input with the author of each message ("user" for the caller)."""
        authors = self._root_authors or (USER,) * len(self._root_input)
        return list(zip(authors, self._root_input, strict=True))

    def conversation(self) -> list[tuple[str, Message]]:
        """Return this lane's conversation so far with its authors: the root input, then the
        history recorded in the lane."""
        return [*self.root_records, *whole_messages(self._history)]

    def lane(self, source: Sequence[tuple[str, Message]]) -> RunContext:
        """Return a lane of this context that starts from `source` (authored messages) with
        an empty history of its own; the same agent, path and address."""
        ctx = self._copy(self.agent_name, self.run_path, self.address)
        ctx._root_input = tuple(m for _, m in source)
        ctx._root_authors = tuple(a for a, _ in source)
        ctx._history = []
        return ctx

    def input_for(self, agent_name: str) -> list[Message]:
        """Return what `agent_name` runs on in this lane: the root input and the history,
        other agents' messages rewritten "For context", its own (and the caller's) verbatim."""
        return history_for(agent_name, self._root_input, self._history, self._root_authors)

    @property
    def usage(self) -> Usage:
        """Return the tokens spent by every model call of the run so far."""
        return Usage(input_tokens=self._run.input_tokens, output_tokens=self._run.output_tokens)

    @property
    def model_calls(self) -> int:
        """Return how many model calls the run has made so far."""
        return self._run.model_calls

    @property
    def requests(self) -> int:
        """Return how many model calls agents of the run have sent so far."""
        return self._run.requests

    @property
    def tool_calls(self) -> int:
        """Return how many tool calls of the run have run or are running (one that paused
        counts when it runs again)."""
        return self._run.tool_calls

    @property
    def local_state(self) -> dict[str, Any]:
        """Return this agent's own state: kept across its turns, not shared with others."""
        return self._run.local.setdefault(self.agent_name, {})

    @property
    def all_local_state(self) -> dict[str, dict[str, Any]]:
        """Return every agent's own state, by agent name (what a session keeps)."""
        return self._run.local

    @property
    def enable_streaming(self) -> bool:
        """Whether model output streams in this run."""
        return self._run.enable_streaming

    @property
    def lane_history(self) -> list[HistoryRecord]:
        """Return the messages recorded so far in this part of the run, with their authors."""
        return self._history

    @property
    def history(self) -> tuple[Message, ...]:
        """Return the messages this agent runs on: inside a tool call, its agent's current
        model input; elsewhere the agent's input in its lane."""
        if self._model_messages is not None:
            return tuple(self._model_messages)
        return tuple(self.input_for(self.agent_name))

    @property
    def session_id(self) -> str | None:
        """Return the session the run belongs to, if any."""
        return self._run.session_id

    @property
    def idempotency_key(self) -> str | None:
        """Inside a tool call, return a key stable for that call across pauses, resumes,
        crashes and workers (from the run's root id and the call's address, which holds
        its tool-call id); None outside a tool call."""
        return None if self.tool_call_id is None else self._run.key_of(self.address)

    @property
    def model_messages(self) -> list[Message]:
        """Return the calling agent's current model input (inside a tool; else empty)."""
        return self._model_messages if self._model_messages is not None else []

    def set_model_messages(self, messages: list[Message]) -> None:
        """Make `messages` the current model input that tools of this agent see."""
        self._model_messages = messages

    @property
    def model(self) -> object:
        """Return the model the agent of this context calls (None: not a model's agent)."""
        return self._model

    def set_model(self, model: object) -> None:
        """Name the model the agent of this context calls (hooks may ask it to count)."""
        self._model = model

    def owner(self) -> RunContext:
        """Return the context of the agent at this place: this one, or for a tool call its
        agent's (whose `save_state` values the tool call's seams can share)."""
        if self.tool_name is None:
            return self
        suffix = f";tool:{self.tool_name}:{self.tool_call_id}"
        ctx = self._copy(self.agent_name, self.run_path, self.address.removesuffix(suffix))
        ctx._model_messages, ctx._model = self._model_messages, self._model
        return ctx

    @property
    def ids(self) -> IdSource:
        """Return the run's source of ids and timestamps."""
        return self._run.ids

    @property
    def effects(self) -> Any:
        """Return what the gates of this run's tool calls use (None outside a runner)."""
        return self._run.effects

    @property
    def hooks(self) -> HookChain:
        """Return the runner's hooks of this run."""
        return self._run.hooks

    @property
    def run_options(self) -> SavedOptions | None:
        """Return the run's per-run options (None: there are none)."""
        return self._run.options

    @property
    def metadata(self) -> Mapping[str, Any]:
        """Return the run's metadata, read-only (the runner's, saved with every checkpoint)."""
        return MappingProxyType(self._run.metadata)

    def keep_run_value(self, key: str, value: Any) -> None:
        """Keep a JSON value for the whole run: saved with every checkpoint and seen again
        (`run_value`) by the run that resumes it. No agent sees it (plait's own
        process-wide hooks keep theirs here)."""
        save_custom(custom_record(self._run, _RUN_VALUES), key, value)

    def run_value(self, key: str) -> Any:
        """Return the value kept under `key` with `keep_run_value` (by this run, or by the run
        it resumes), or None."""
        return load_custom(custom_record(self._run, _RUN_VALUES), key)

    @property
    def checkpoint_id(self) -> str | None:
        """Return the id the run was started under or resumes (None: it was given none; a
        first pause then makes one, which `on_pause` tells)."""
        return self._run.checkpoint_id

    @property
    def interceptor(self) -> Interceptor | None:
        """Return what answers this run's model and tool calls instead of the agents' own
        models and tools (a cassette), or None."""
        return self._run.interceptor

    def set_interceptor(self, interceptor: Interceptor | None) -> None:
        """Make `interceptor` answer the model and tool calls of the whole run."""
        self._run.interceptor = interceptor

    @property
    def extras(self) -> dict[str, Any]:
        """Return what plait's process-wide hooks keep for this run while it lives (never
        saved), by hook."""
        run = self._run
        if run.extras is None:
            run.extras = {}
        return run.extras

    def paused_within(self) -> bool:
        """Whether an `interrupt()` here or below this place has paused the run."""
        address = self.address
        below = address + ";"
        return any(a == address or a.startswith(below) for a in self._run.paused.user_states)

    # --- budgets ----------------------------------------------------------------------------

    def record_model_call(self, usage: Usage | None) -> None:
        """Count one model call and its usage towards the run's totals and team budgets.

        Raise `TokenBudgetExceeded` when a team's token budget is now exceeded.
        """
        if usage is None and not self._budgets:
            self._run.model_calls += 1  # all there is to count
        else:
            self._run.charge(self._budgets, usage)

    def run_state(self) -> RunState:
        """Return the state of the whole run (plait's own agents read its flags and counters
        directly on their hot paths)."""
        return self._run

    @property
    def under_budgets(self) -> bool:
        """Whether team budgets (steps, tokens) apply here."""
        return bool(self._budgets)

    def count_request(self) -> None:
        """Count one model call an agent sends now."""
        self._run.requests += 1

    def count_tool_call(self, delta: int = 1) -> None:
        """Count one tool call that starts now (`delta=-1`: one that paused, uncounted)."""
        self._run.tool_calls += delta

    def check_steps(self) -> None:
        """Raise `MaxStepsExceeded` if one more model call would break a team's budget."""
        self._run.check_steps(self._budgets)

    def count_transfer(self) -> None:
        """Count one transfer between agents; raise `MaxHandoffsExceeded` past the runner's
        `max_transfers`."""
        self._run.count_transfer()

    # --- tools ------------------------------------------------------------------------------

    def send_action(self, action: AgentAction) -> None:
        """Attach `action` to the event of the tool call this context belongs to."""
        if self._actions is None:
            raise UsageError(
                "send_action() works inside a tool call; a custom agent yields an AgentEvent "
                "with the action instead"
            )
        self._actions.append(action)

    def break_loop(self) -> None:
        """Ask the enclosing `LoopAgent` to stop after the current sub-agent finishes."""
        self.send_action(AgentAction(break_loop=BreakLoopAction(from_agent=self.agent_name)))

    def take_action(self) -> AgentAction | None:
        """Return the actions sent during this tool call, merged into one (or None)."""
        actions = self._actions
        if not actions:
            return None
        merged = functools.reduce(AgentAction.merge, actions)
        actions.clear()
        return merged

    def set_emit(self, emit: Emit | None) -> None:
        """Let tools called from this context pass events up through `emit`."""
        self._emit = emit

    def emit(self, event: AgentEvent) -> bool:
        """Pass an event up from inside a tool (an agent run as a tool forwards its events).

        Return False when the caller does not take events from this tool.
        """
        if self._emit is None:
            return False
        self._emit(event)
        return True

    # --- pausing, resuming and saving -------------------------------------------------------

    def interrupt(self, info: Any = None, *, state: Any = None) -> Any:
        """Pause the run here, or return the data this point was resumed with."""
        run = self._run
        answered = self._answered
        if answered is None:
            answered = self._answered = []
        queue = run.resume_answers.get(self.address)
        if queue:
            value = queue.pop(0)
            answered.append(value)
            return value
        run.paused.user_states[self.address] = state
        run.paused.answers[self.address] = list(answered)
        raise_pause((InterruptCtx(id=run.ids.new_id(), address=self.address, info=info),))

    def waiting_answers(self) -> tuple[list[Any], str]:
        """Return the answers waiting for the interrupts at this place (a resumed run's,
        in order) and the run's root id (made now if needed): what a tool call run in
        another process needs to pause and resume as it would here."""
        run = self._run
        run.key_of(self.address)  # makes the root id on first use
        assert run.root_id is not None
        return list(run.resume_answers.get(self.address) or ()), run.root_id

    def interrupt_state(self) -> Any:
        """Return the `state` saved by the interrupt at this point, when resumed."""
        return self._run.resume_user_states.get(self.address)

    @property
    def resume_info(self) -> ResumeInfo | None:
        """Return how this run's resume concerns this agent or tool call (None: the run is
        not a resume); see `plait.resume`."""
        info = self._resume_info
        if info is _UNREAD:
            points = self._run.resumed
            info = self._resume_info = None if points is None else points.info(self.address)
        return info  # type: ignore[return-value]

    def enter_resume(self, agent: object) -> None:
        """Fix the `resume_info` of `agent`, entering in this context (the kernel calls it)."""
        points = self._run.resumed
        if points is not None:
            self._resume_info = points.enter(self.address, agent)

    @property
    def saves_steps(self) -> bool:
        """Whether this run saves a checkpoint at every safe point, or was asked to stop
        at the next one (components keep their records up to date only then)."""
        run = self._run
        return run.durability == "step" or run.cancel_requested

    @property
    def cancel_requested(self) -> bool:
        """Whether the run was asked to stop at its next safe point."""
        return self._run.cancel_requested

    def request_cancel(self) -> None:
        """Ask the run to stop: tool calls in flight are stopped, and its next safe point
        ends it (call this on the run's event loop; `RunStream.cancel()` works anywhere)."""
        self._run.request_cancel()

    @property
    def cancelled(self) -> bool:
        """Whether this work should stop: the run was asked to stop, or this tool call ran
        past its timeout or was abandoned (the run closed).

        A sync tool runs in a thread that cannot be killed: check this between steps of long
        work and return early. An async tool is stopped by cancellation instead.
        """
        guard = self._call_guard
        return self._run.cancel_requested or (guard is not None and guard.stopped)

    def guard(self, limit: float | None) -> CallGuard:
        """Return the guard this tool call runs in: it ends the call after `limit` seconds
        (None: no limit) or when the run is asked to stop (see `CallGuard`)."""
        self._call_guard = CallGuard(self._run, limit)
        return self._call_guard

    async def safe_point(self) -> AgentEvent | None:
        """Call between two steps of work, with this component's record up to date.

        With `durability="step"` the run's checkpoint is written here (the run goes on).
        When the run was asked to stop, it is saved and the event ending it is returned:
        yield it and return.
        """
        run = self._run
        if run.cancel_requested and run.saver is not None:
            return await run.saver("cancel", self)
        if run.cancel_requested:
            return self.event(error=RunCancelled("the run was cancelled"))
        if run.durability == "step" and run.saver is not None:
            await run.saver("step", self)
        return None

    def keep_record(self, kind: str, record: Any) -> None:
        """Keep this component's resume record (or a function returning it) in the run
        state; every pause and step save includes it until `drop_state`."""
        self._run.frames[(self.address, kind)] = record

    def keeps_state(self, *, besides: tuple[str, ...]) -> bool:
        """Whether a component at this place keeps a resume record (other than those of the
        kinds `besides`)."""
        return any(a == self.address and k not in besides for a, k in self._run.frames)

    def drop_record(self, kind: str) -> None:
        """Forget this component's record: it finished its work."""
        self._run.frames.pop((self.address, kind), None)

    def take_record(self, kind: str, tp: type[_T]) -> _T | None:
        """Return (once) the record of type `tp` this component saved when the run was saved,
        if this run resumes it; it stays this component's record until changed or dropped."""
        return self._run.take_record(self.address, kind, tp)

    def save_state(self, key: str, value: Any) -> None:
        """Keep a JSON-able value (or a pydantic model) for this agent at this place of the
        run, across pauses and resumes; it is encoded now (`SerializationError` names the
        key and the place inside the value that cannot be)."""
        save_custom(custom_record(self._run, self.address), key, value)

    def load_state(self, key: str) -> Any:
        """Return the value saved under `key` at this place of the run, or None."""
        return load_custom(custom_record(self._run, self.address), key)

    def snapshot(self) -> RunSnapshot:
        """Return what a checkpoint holds of this run (call it on the root context)."""
        snapshot = self._run.snapshot()
        snapshot.root_input, snapshot.root_authors = self._root_input, self._root_authors
        snapshot.history = list(self._history)
        return snapshot

    def restore(
        self, snapshot: RunSnapshot, answers: dict[str, list[Any]], points: ResumePoints | None
    ) -> None:
        """Put a saved run back into this (root) context, with `answers` for its interrupts
        and `points` telling each agent how the resume concerns it (`resume_info`)."""
        authors = snapshot.root_authors
        if authors is not None and len(authors) == len(self._root_input):
            self._root_authors = tuple(authors)
        self._history.extend(snapshot.history)
        self._run.restore(snapshot, answers, points)

    # --- events -----------------------------------------------------------------------------

    def pause_event(self, contexts: Sequence[InterruptCtx]) -> AgentEvent:
        """Build this agent's event announcing that it paused on `contexts`."""
        info = InterruptInfo(contexts=tuple(contexts))
        return self.event(action=AgentAction(interrupted=info))

    def event(
        self,
        *,
        message: Message | None = None,
        output: AgentOutput | None = None,
        action: AgentAction | None = None,
        error: PlaitError | None = None,
    ) -> AgentEvent:
        """Build an event of this agent; `message` is shorthand for a whole-message output."""
        if message is not None and error is None:
            role = "tool" if message.role == "tool" else "assistant"
            return message_event(self.agent_name, self.run_path, self.depth, role, message, action)
        if message is not None:
            role = "tool" if message.role == "tool" else "assistant"
            variant = _make_variant(False, role, message.name, message, None)
            output = _make_output(variant, None)
        return _make_event(self.agent_name, self.run_path, self.depth, output, action, error, None)

    def __repr__(self) -> str:
        return f"RunContext(agent_name={self.agent_name!r}, run_path={self.run_path!r})"


# Positional constructors of the event types, for the hot path (see plait._record).
_make_variant: Callable[..., MessageVariant] = MessageVariant._make  # type: ignore[attr-defined]
_make_output: Callable[..., AgentOutput] = AgentOutput._make  # type: ignore[attr-defined]
_make_event: Callable[..., AgentEvent] = AgentEvent._make  # type: ignore[attr-defined]
_new = object.__new__
_set = object.__setattr__


def message_event(
    agent_name: str,
    run_path: tuple[str, ...],
    depth: int,
    role: str,
    message: Message,
    action: AgentAction | None,
) -> AgentEvent:
    """Build the event of a whole message, its output and message variant, in one call (the
    event of every model reply and tool result): equal to `AgentEvent(agent_name=...,
    output=AgentOutput(message=MessageVariant(is_streaming=False, role=role,
    tool_name=message.name, message=message)), action=action)`. Records keep every field
    in their `__dict__` (`plait._record`)."""
    variant = _new(MessageVariant)
    _set(
        variant,
        "__dict__",
        {
            "is_streaming": False,
            "role": role,
            "tool_name": message.name,
            "message": message,
            "stream": None,
        },
    )
    output = _new(AgentOutput)
    _set(output, "__dict__", {"message": variant, "custom": None})
    event = _new(AgentEvent)
    _set(
        event,
        "__dict__",
        {
            "agent_name": agent_name,
            "run_path": run_path,
            "depth": depth,
            "output": output,
            "action": action,
            "error": None,
            "handoff": None,
        },
    )
    return event


_new_context = object.__new__


def inside(ctx: AgentContext) -> RunContext:
    """Return plait's own context behind `ctx`: the built-in agents use more of it than the
    public `AgentContext`.

    Raises:
        UsageError: `ctx` is not a context plait made (a built-in agent run by hand).
    """
    if isinstance(ctx, RunContext):
        return ctx
    raise UsageError(
        f"plait's agents run inside a plait run (Runner), not with a {type(ctx).__name__}"
    )
