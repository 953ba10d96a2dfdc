"""The run context: what a tool, node or agent can see of the run it is part of."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

from plait.errors import MaxStepsExceeded, PlaitError, TokenBudgetExceeded, UsageError
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

__all__ = ["RunContext", "run_context"]


class _RunState:
    """State shared by every agent of one run."""

    __slots__ = (
        "cancel_requested",
        "durability",
        "enable_streaming",
        "input_tokens",
        "local",
        "model_calls",
        "output_tokens",
        "paused",
        "resume",
        "session_values",
        "state",
    )

    def __init__(self, session_values: dict[str, Any], enable_streaming: bool) -> None:
        self.session_values = session_values
        self.state: dict[str, Any] = {}
        self.enable_streaming = enable_streaming
        self.model_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.paused = Paused()
        self.resume: Resume | None = None
        self.cancel_requested = False
        self.durability = "exit"
        self.local: dict[str, dict[str, Any]] = {}  # each agent's own state, by agent name


class Budget:
    """A team's limits on model calls and tokens, counted across every level below it."""

    __slots__ = ("max_steps", "max_tokens", "steps", "team", "tokens")

    def __init__(self, team: str, max_steps: int | None, max_tokens: int | None) -> None:
        self.team = team
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.steps = 0
        self.tokens = 0


class Paused:
    """What the parts of a run save when it pauses, keyed by their address."""

    __slots__ = ("answers", "states", "user_states")

    def __init__(self) -> None:
        self.states: dict[str, Any] = {}  # component state (agent, workflow, agent tool)
        self.user_states: dict[str, Any] = {}  # the `state=` given to interrupt()
        self.answers: dict[str, list[Any]] = {}  # values interrupt() already returned


class Resume:
    """What a resumed run restores; each entry is taken once."""

    __slots__ = ("answers", "states", "user_states")

    def __init__(
        self,
        states: dict[str, Any],
        user_states: dict[str, Any],
        answers: dict[str, list[Any]],
    ) -> None:
        self.states = states
        self.user_states = user_states
        self.answers = answers


class InterruptSignal(BaseException):
    """Raised by `interrupt()` to pause the run; a `BaseException`, so `except Exception`
    in a tool cannot swallow it."""

    def __init__(self, contexts: tuple[InterruptCtx, ...]) -> None:
        super().__init__(contexts)
        self.contexts = contexts


SAFE_POINT = "plait.safe_point"


def safe_point_reason(ctx: InterruptCtx) -> str | None:
    """Return "cancel" or "step" for a pause the runner made at a safe point, else None."""
    info = ctx.info
    if isinstance(info, dict) and len(info) == 1 and SAFE_POINT in info:
        return str(info[SAFE_POINT])
    return None


# One recorded message of the run's history: (author agent name, message variant).
HistoryRecord = tuple[str, MessageVariant]
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
        "_emit",
        "_history",
        "_model_messages",
        "_root_input",
        "_run",
        "_teams",
        "address",
        "agent_name",
        "depth",
        "run_path",
        "tool_call_id",
        "tool_name",
    )

    def __init__(
        self,
        *,
        agent_name: str,
        run_path: tuple[str, ...],
        depth: int,
        run: _RunState,
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
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self._actions: list[AgentAction] | None = None
        self._emit: Emit | None = None
        self._model_messages: list[Message] | None = None
        self._answered: list[Any] | None = None
        self._budgets: tuple[Budget, ...] = ()
        self._teams: tuple[tuple[str, int, int | None], ...] = ()  # (name, level, max_depth)

    @classmethod
    def root(
        cls,
        agent_name: str,
        messages: Sequence[Message],
        *,
        session_values: dict[str, Any] | None = None,
        enable_streaming: bool = False,
    ) -> RunContext:
        """Create the context of a run's root agent."""
        values = session_values if session_values is not None else {}
        return cls(
            agent_name=agent_name,
            run_path=(agent_name,),
            depth=0,
            run=_RunState(values, enable_streaming),
            root_input=tuple(messages),
            history=[],
            address=f"agent:{agent_name}",
        )

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

    def fork(self) -> RunContext:
        """Return a copy with its own history lane (for a branch running in parallel)."""
        ctx = self._copy(self.agent_name, self.run_path, self.address)
        ctx._history = list(self._history)
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
        return ctx

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
    def usage(self) -> Usage:
        """Return the tokens spent by every model call of the run so far."""
        run = self._run
        return Usage(input_tokens=run.input_tokens, output_tokens=run.output_tokens)

    @property
    def model_calls(self) -> int:
        """Return how many model calls the run has made so far."""
        return self._run.model_calls

    def record_model_call(self, usage: Usage | None) -> None:
        """Count one model call and its usage towards the run's totals and team budgets.

        Raise `TokenBudgetExceeded` when a team's token budget is now exceeded.
        """
        run = self._run
        run.model_calls += 1
        tokens = 0
        if usage is not None:
            run.input_tokens += usage.input_tokens
            run.output_tokens += usage.output_tokens
            tokens = usage.input_tokens + usage.output_tokens
        for budget in self._budgets:
            budget.steps += 1
            budget.tokens += tokens
            if budget.max_tokens is not None and budget.tokens > budget.max_tokens:
                raise TokenBudgetExceeded(
                    f"team '{budget.team}' spent {budget.tokens} tokens, over its "
                    f"total_token_budget={budget.max_tokens}",
                    team=budget.team,
                    limit=budget.max_tokens,
                )

    def check_steps(self) -> None:
        """Raise `MaxStepsExceeded` if one more model call would break a team's budget."""
        for budget in self._budgets:
            if budget.max_steps is not None and budget.steps >= budget.max_steps:
                raise MaxStepsExceeded(
                    f"team '{budget.team}' reached total_max_steps={budget.max_steps} model calls",
                    team=budget.team,
                    limit=budget.max_steps,
                )

    @property
    def local_state(self) -> dict[str, Any]:
        """Return this agent's own state: kept across its turns, not shared with others."""
        return self._run.local.setdefault(self.agent_name, {})

    def send_action(self, action: AgentAction) -> None:
        """Attach `action` to the event of the tool call this context belongs to."""
        if self._actions is None:
            raise UsageError(
                "send_action() works inside a tool call; a custom agent yields an AgentEvent "
                "with the action instead"
            )
        self._actions.append(action)

    @property
    def enable_streaming(self) -> bool:
        """Whether model output streams in this run."""
        return self._run.enable_streaming

    @property
    def history(self) -> list[HistoryRecord]:
        """Return the messages recorded so far in this part of the run, with their authors."""
        return self._history

    @property
    def model_messages(self) -> list[Message]:
        """Return the calling agent's current model input (inside a tool; else empty)."""
        return self._model_messages if self._model_messages is not None else []

    def break_loop(self) -> None:
        """Ask the enclosing `LoopAgent` to stop after the current sub-agent finishes."""
        self.send_action(AgentAction(break_loop=BreakLoopAction(from_agent=self.agent_name)))

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

    def for_tool(self, name: str, call_id: str | None) -> RunContext:
        """Return the context of one tool call made by this agent (built on every call, so
        it sets its fields directly instead of going through `__init__`)."""
        ctx = _new_context(RunContext)
        ctx.agent_name = self.agent_name
        ctx.run_path = self.run_path
        ctx.depth = self.depth
        ctx._run = self._run
        ctx._root_input = self._root_input
        ctx._history = self._history
        ctx.address = f"{self.address};tool:{name}:{call_id}"
        ctx.tool_name = name
        ctx.tool_call_id = call_id
        ctx._actions = []
        ctx._emit = self._emit
        ctx._model_messages = self._model_messages
        ctx._answered = None
        ctx._budgets = self._budgets
        ctx._teams = self._teams
        return ctx

    def interrupt(self, info: Any = None, *, state: Any = None) -> Any:
        """Pause the run here, or return the data this point was resumed with."""
        run = self._run
        answered = self._answered
        if answered is None:
            answered = self._answered = []
        resume = run.resume
        if resume is not None:
            queue = resume.answers.get(self.address)
            if queue:
                value = queue.pop(0)
                answered.append(value)
                return value
        run.paused.user_states[self.address] = state
        run.paused.answers[self.address] = list(answered)
        ctx = InterruptCtx(id=uuid.uuid4().hex, address=self.address, info=info)
        raise InterruptSignal((ctx,))

    @property
    def cancel_requested(self) -> bool:
        """Whether the run was asked to stop at its next safe point."""
        return self._run.cancel_requested

    def safe_point(self) -> str | None:
        """At a safe point, return why to stop here: "cancel", "step" or None (go on)."""
        run = self._run
        if run.cancel_requested:
            return "cancel"
        return "step" if run.durability == "step" else None

    def safe_point_event(self, reason: str) -> AgentEvent:
        """Pause here for `reason` ("cancel" or "step"); the runner saves and acts on it."""
        marker = InterruptCtx(id=uuid.uuid4().hex, address=self.address, info={SAFE_POINT: reason})
        return self.pause_event((marker,))

    def interrupt_state(self) -> Any:
        """Return the `state` saved by the interrupt at this point, when resumed."""
        resume = self._run.resume
        return None if resume is None else resume.user_states.get(self.address)

    def save_state(self, state: Any, part: str = "") -> None:
        """Save this component's state (JSON-able) for the checkpoint of a pausing run.

        `part` tells apart several components at one address (a flow and its first agent).
        """
        key = f"{self.address}#{part}" if part else self.address
        self._run.paused.states[key] = state

    def take_state(self, part: str = "") -> Any:
        """Return (once) the state saved here when the run paused, if this run resumes it."""
        resume = self._run.resume
        if resume is None:
            return None
        return resume.states.pop(f"{self.address}#{part}" if part else self.address, None)

    def pause_event(self, contexts: Sequence[InterruptCtx]) -> AgentEvent:
        """Build this agent's event announcing that it paused on `contexts`."""
        info = InterruptInfo(contexts=tuple(contexts))
        return self.event(action=AgentAction(interrupted=info))

    def emit(self, event: AgentEvent) -> bool:
        """Pass an event up from inside a tool (an agent run as a tool forwards its events).

        Return False when the caller does not take events from this tool.
        """
        if self._emit is None:
            return False
        self._emit(event)
        return True

    def take_action(self) -> AgentAction | None:
        """Return the actions sent during this tool call, merged into one (or None)."""
        actions = self._actions
        if not actions:
            return None
        merged = actions[0]
        for action in actions[1:]:
            merged = merged.merge(action)
        actions.clear()
        return merged

    def event(
        self,
        *,
        message: Message | None = None,
        output: AgentOutput | None = None,
        action: AgentAction | None = None,
        error: PlaitError | None = None,
    ) -> AgentEvent:
        """Build an event of this agent; `message` is shorthand for a whole-message output."""
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

_new_context = object.__new__

_current: ContextVar[RunContext | None] = ContextVar("plait_run_context", default=None)


def run_context() -> RunContext:
    """Return the context of the run this code is part of (inside a tool, node or agent)."""
    ctx = _current.get()
    if ctx is None:
        raise UsageError("run_context() is only available while a plait run is executing")
    return ctx
