"""The state of one run, shared by every agent of it, and what it is saved as.

`RunState` is what `Frame` views: session values, team state, each agent's own state,
usage, budgets, the live resume records of the components, the run's settings and per-run
options, and (in a resumed run) the interrupts it answers. It is saved with a checkpoint
(`RunSnapshot`). `IdSource` gives the run its ids and times. `CallGuard` bounds one tool
call: its time limit, and the run's stop switch.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from plait._util.fast import random_hex
from plait._util.tasks import current_task
from plait.core.history import HistoryRecord
from plait.core.hooks import NO_HOOKS
from plait.errors import (
    MaxHandoffsExceeded,
    MaxStepsExceeded,
    PlaitError,
    ResumeError,
    TokenBudgetExceeded,
)
from plait.events import AgentEvent
from plait.messages import Message, Usage

if TYPE_CHECKING:
    from plait.core.resume import ResumePoints

__all__ = [
    "Budget",
    "CallGuard",
    "IdSource",
    "Interceptor",
    "Paused",
    "RunSnapshot",
    "RunState",
    "SavedOptions",
]

_T = TypeVar("_T")

SaveKind = Literal["step", "cancel"]
#: Saves the run (`plait.stream`); called with the context at the safe point (plait's own
#: context class, which the saver reads the run's snapshot from).
Saver = Callable[[SaveKind, Any], Awaitable["AgentEvent | None"]]


class SavedOptions(Protocol):
    """A run's per-run options as the run state keeps them (`plait.options.RunOptions`)."""

    def saved(self) -> list[dict[str, Any]]:
        """Return the JSON-able fields of the options, to save with the run."""
        ...


class Stoppable(Protocol):
    """A call in flight that a stop request ends (a tool call's guard, a model's stream)."""

    def stop_soon(self) -> None:
        """End the call as soon as the event loop can."""


class Interceptor(Protocol):
    """Where a run sends its agents' model and tool calls instead of to the agents' own
    models and tools (a durable-execution engine's router, `plait.temporal`: its activities).
    Capabilities do not use it: they are hooks on the `wrap_model` / `wrap_tool` seams."""

    def model(self, ctx: Any, model: Any) -> Any:
        """Return the model the agent at `ctx` calls instead of `model`."""
        ...

    def tool(self, ctx: Any, tool: Any) -> Any:
        """Return the tool the tool call at `ctx` calls instead of `tool`."""
        ...


class IdSource:
    """Where a run gets its ids (interrupts, checkpoints) and timestamps.

    Replace it (`Runner(ids=...)`) to make them deterministic, as a durable-execution engine
    replaying a run must.
    """

    def new_id(self) -> str:
        """Return a fresh unique id."""
        return random_hex()

    def now(self) -> datetime:
        """Return the current time (timezone-aware UTC)."""
        return datetime.now(UTC)


_IDS = IdSource()  # the default source of ids: it keeps nothing, so every run shares it


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
    """What `interrupt()` calls left for the checkpoint: their states and earlier answers."""

    __slots__ = ("answers", "user_states")

    def __init__(self) -> None:
        self.user_states: dict[str, Any] = {}  # the `state=` given to interrupt()
        self.answers: dict[str, list[Any]] = {}  # values interrupt() already returned


class RunState:
    """State shared by every agent of one run; all of it is saved with a checkpoint."""

    __slots__ = (
        "budgets",
        "cancel_requested",
        "checkpoint_id",
        "durability",
        "effects",
        "enable_streaming",
        "extras",
        "frames",
        "guards",
        "hooks",
        "ids",
        "input_tokens",
        "interceptor",
        "local",
        "max_transfers",
        "metadata",
        "model_call",
        "model_calls",
        "model_calls_in_flight",
        "model_calls_stopped",
        "options",
        "output_tokens",
        "paused",
        "requests",
        "restored",
        "resume_answers",
        "resume_user_states",
        "resumed",
        "root_id",
        "saver",
        "session_id",
        "session_values",
        "state",
        "stop_error",
        "tool_calls",
        "tool_guard",
        "transfers",
    )

    def __init__(self, session_values: dict[str, Any], enable_streaming: bool) -> None:
        self.session_values = session_values
        self.session_id: str | None = None
        self.checkpoint_id: str | None = None  # the id the run was given, or resumes (never saved)
        self.root_id: str | None = None  # made on first use (idempotency keys), then saved
        self.state: dict[str, Any] = {}
        self.local: dict[str, dict[str, Any]] = {}  # each agent's own state, by agent name
        self.enable_streaming = enable_streaming
        self.durability = "exit"
        self.cancel_requested = False
        self.stop_error: PlaitError | None = None  # what a stop ends the run with (a hook's)
        self.model_calls = 0
        self.requests = 0  # model calls sent by agents (counted as each is sent)
        self.tool_calls = 0  # tool calls running or done (one that paused is not counted)
        self.input_tokens = 0
        self.output_tokens = 0
        self.transfers = 0
        self.max_transfers: int | None = None
        self.budgets: dict[str, Budget] = {}  # by the address of the team that set them
        self.frames: dict[tuple[str, str], Any] = {}  # live resume records: (address, kind)
        self.restored: dict[tuple[str, str], Any] = {}  # records of a resumed checkpoint
        self.paused = Paused()
        self.resume_user_states: dict[str, Any] = {}
        self.resume_answers: dict[str, list[Any]] = {}
        self.ids = _IDS  # the runner gives its own (`Frame.configure`)
        self.hooks = NO_HOOKS  # the runner's hooks (`plait.hooks`)
        self.saver: Saver | None = None
        self.metadata: dict[str, Any] = {}
        # the tool and model calls in flight: the first tool call in its own slot, the
        # others (calls running at the same time, model streams) in the set
        self.tool_guard: CallGuard | None = None
        self.guards: set[Stoppable] = set()
        # the tasks awaiting a model's reply now (the first in its own slot, any others
        # running at the same time in the set), and those of them a stop cancelled
        self.model_call: asyncio.Task[Any] | None = None
        self.model_calls_in_flight: set[asyncio.Task[Any]] = set()
        self.model_calls_stopped: set[asyncio.Task[Any]] = set()
        self.options: SavedOptions | None = None  # the run's per-run options (RunOptions)
        self.resumed: ResumePoints | None = None  # the interrupts a resumed run answers
        self.extras: dict[str, Any] | None = None  # kept by process-wide hooks, never saved
        self.interceptor: Interceptor | None = None  # where model and tool calls go (Temporal)
        self.effects: Any = None  # the gates' store, user and approver (`plait.effects`)

    def snapshot(self) -> RunSnapshot:
        """Return what a checkpoint holds of the run state (the root context adds its input
        and history)."""
        records = {k: (v() if callable(v) else v) for k, v in self.frames.items()}
        budgets = {
            k: (b.team, b.max_steps, b.max_tokens, b.steps, b.tokens)
            for k, b in self.budgets.items()
        }
        return RunSnapshot(
            session_values=self.session_values,
            state=self.state,
            local=self.local,
            enable_streaming=self.enable_streaming,
            records=records,
            user_states=dict(self.paused.user_states),
            answers={k: list(v) for k, v in self.paused.answers.items()},
            budgets=budgets,
            model_calls=self.model_calls,
            requests=self.requests,
            tool_calls=self.tool_calls,
            tokens=(self.input_tokens, self.output_tokens),
            transfers=self.transfers,
            metadata=self.metadata,
            options=[] if self.options is None else self.options.saved(),
            root_id=self.root_id,
        )

    def restore(
        self, snapshot: RunSnapshot, answers: dict[str, list[Any]], points: ResumePoints | None
    ) -> None:
        """Put a saved run state back, with `answers` for its interrupts."""
        self.state.update(snapshot.state)
        self.local.update(snapshot.local)
        self.restored = dict(snapshot.records)
        self.resume_user_states = dict(snapshot.user_states)
        self.resume_answers = answers
        for key, (team, max_steps, max_tokens, steps, tokens) in snapshot.budgets.items():
            budget = self.budgets[key] = Budget(team, max_steps, max_tokens)
            budget.steps, budget.tokens = steps, tokens
        self.model_calls = snapshot.model_calls
        self.requests = snapshot.requests
        self.tool_calls = snapshot.tool_calls
        self.input_tokens, self.output_tokens = snapshot.tokens
        self.transfers = snapshot.transfers
        self.metadata.update(snapshot.metadata)
        self.root_id = snapshot.root_id
        self.resumed = points

    def key_of(self, address: str) -> str:
        """Return the idempotency key of the tool call at `address`: stable across pauses,
        resumes, crashes and workers (from the run's root id, made on first use and saved
        with the run, and the address, which holds the tool-call id)."""
        if self.root_id is None:
            self.root_id = self.ids.new_id()
        digest = hashlib.sha256(f"{self.root_id}\n{address}".encode()).hexdigest()
        return f"plait-{digest[:40]}"

    def take_record(self, address: str, kind: str, tp: type[_T]) -> _T | None:
        """Return (once) the record of type `tp` kept at `address` when the run was saved, if
        this run resumes it; it stays the component's record until changed or dropped."""
        record = self.restored.pop((address, kind), None)
        if record is None:
            return None
        if not isinstance(record, tp):
            raise ResumeError(
                f"the checkpoint holds a {type(record).__name__} at '{address}', where this "
                f"run has a component expecting {tp.__name__}; the agents changed"
            )
        self.frames[(address, kind)] = record
        return record

    def request_cancel(self, error: PlaitError | None = None) -> None:
        """Ask the run to stop: its next safe point ends it (with `error`, when given and no
        stop was asked before, else `RunCancelled`), and every tool call in flight is
        stopped (call this on the run's event loop)."""
        if error is not None and not self.cancel_requested:
            self.stop_error = error
        self.cancel_requested = True
        guards: list[Stoppable] = [] if self.tool_guard is None else [self.tool_guard]
        guards += self.guards
        for guard in guards:
            guard.stop_soon()
        for task in (self.model_call, *self.model_calls_in_flight):
            if task is not None and task not in self.model_calls_stopped:
                self.model_calls_stopped.add(task)
                task.cancel()

    def charge(self, budgets: tuple[str, ...], usage: Usage | None) -> None:
        """Count one model call and its usage in the totals and in `budgets` (team keys);
        raise `TokenBudgetExceeded` when a team's token budget is now exceeded."""
        self.model_calls += 1
        tokens = 0
        if usage is not None:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            tokens = usage.input_tokens + usage.output_tokens
        for key in budgets:
            budget = self.budgets[key]
            budget.steps += 1
            budget.tokens += tokens
            if budget.max_tokens is not None and budget.tokens > budget.max_tokens:
                raise TokenBudgetExceeded(
                    f"team '{budget.team}' spent {budget.tokens} tokens, over its "
                    f"total_token_budget={budget.max_tokens}",
                    team=budget.team,
                    limit=budget.max_tokens,
                )

    def check_steps(self, budgets: tuple[str, ...]) -> None:
        """Raise `MaxStepsExceeded` if one more model call would break one of `budgets`."""
        for key in budgets:
            budget = self.budgets[key]
            if budget.max_steps is not None and budget.steps >= budget.max_steps:
                raise MaxStepsExceeded(
                    f"team '{budget.team}' reached total_max_steps={budget.max_steps} model calls",
                    team=budget.team,
                    limit=budget.max_steps,
                )

    def count_transfer(self) -> None:
        """Count one transfer; raise `MaxHandoffsExceeded` past `max_transfers`."""
        self.transfers += 1
        if self.max_transfers is not None and self.transfers > self.max_transfers:
            raise MaxHandoffsExceeded(
                f"the run transferred between agents {self.transfers} times, over the runner's "
                f"max_transfers={self.max_transfers}",
                limit=self.max_transfers,
            )


class RunSnapshot:
    """Everything a checkpoint holds of a run, as Python objects (encoded by
    `plait.checkpoint`)."""

    __slots__ = (
        "answers",
        "budgets",
        "enable_streaming",
        "history",
        "local",
        "metadata",
        "model_calls",
        "options",
        "records",
        "requests",
        "root_authors",
        "root_id",
        "root_input",
        "session_values",
        "state",
        "tokens",
        "tool_calls",
        "transfers",
        "user_states",
    )

    def __init__(  # each field set once: a snapshot is taken at every step save
        self,
        *,
        root_input: tuple[Message, ...] = (),
        root_authors: tuple[str, ...] | None = None,
        root_id: str | None = None,
        history: list[HistoryRecord] | None = None,
        session_values: dict[str, Any] | None = None,
        state: dict[str, Any] | None = None,
        local: dict[str, dict[str, Any]] | None = None,
        enable_streaming: bool = False,
        records: dict[tuple[str, str], Any] | None = None,  # (address, kind) -> record
        user_states: dict[str, Any] | None = None,
        answers: dict[str, list[Any]] | None = None,
        # team key -> (team, max_steps, max_tokens, steps, tokens)
        budgets: dict[str, tuple[str, int | None, int | None, int, int]] | None = None,
        model_calls: int = 0,
        requests: int = 0,
        tool_calls: int = 0,
        tokens: tuple[int, int] = (0, 0),  # (input, output)
        transfers: int = 0,
        metadata: dict[str, Any] | None = None,
        options: list[dict[str, Any]] | None = None,  # the JSON-able fields of the options
    ) -> None:
        self.root_input = root_input
        self.root_authors = root_authors
        self.root_id = root_id
        self.history = [] if history is None else history
        self.session_values = {} if session_values is None else session_values
        self.state = {} if state is None else state
        self.local = {} if local is None else local
        self.enable_streaming = enable_streaming
        self.records = {} if records is None else records
        self.user_states = {} if user_states is None else user_states
        self.answers = {} if answers is None else answers
        self.budgets = {} if budgets is None else budgets
        self.model_calls = model_calls
        self.requests = requests
        self.tool_calls = tool_calls
        self.tokens = tokens
        self.transfers = transfers
        self.metadata = {} if metadata is None else metadata
        self.options = [] if options is None else options


class CallGuard:
    """A time limit and a stop switch around one tool call.

    Used as `with guard:` around the awaited call, in the task that runs it. When `limit`
    seconds pass, or the run is asked to stop, the task is cancelled and the block ends
    quietly with `reason` set ("timeout" or "cancel"). `stopped` then becomes true — and also
    when the call is cancelled from outside (the run closed) — so a sync tool still running
    in its thread can see that nobody waits for it any more.
    """

    __slots__ = ("_cancelling", "_handle", "_run", "_task", "limit", "reason", "stopped")

    def __init__(self, run: RunState, limit: float | None) -> None:
        self._run = run
        self.limit = limit
        self.reason: Literal["timeout", "cancel"] | None = None
        self.stopped = False
        self._task: asyncio.Task[Any] | None = None
        self._handle: asyncio.Handle | None = None
        self._cancelling = 0

    def __enter__(self) -> CallGuard:
        loop = asyncio.get_running_loop()
        task = current_task(loop)
        if task is None:  # not in a task: nothing to cancel
            return self
        self._task, self._cancelling = task, task.cancelling()
        if self.limit is not None:
            self._handle = loop.call_later(self.limit, self._fire, "timeout")
        run = self._run
        if run.tool_guard is None:
            run.tool_guard = self
        else:
            run.guards.add(self)
        return self

    def stop_soon(self) -> None:
        """End the call: at once when asked from another task on its event loop (so the
        call cannot see the stop and return as if it had finished), else at the loop's next
        turn (from another thread, or from the call itself, which is running now)."""
        task = self._task
        if task is None or (loop := task.get_loop()).is_closed():
            return
        if asyncio._get_running_loop() is loop and current_task(loop) is not task:
            self._fire("cancel")
        else:
            loop.call_soon_threadsafe(self._fire, "cancel")

    def _fire(self, reason: Literal["timeout", "cancel"]) -> None:
        if self._task is None or self.reason is not None:
            return  # the call has ended, or was already stopped
        self.reason = reason
        self.stopped = True
        self._task.cancel()

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> bool:
        task, self._task = self._task, None
        run = self._run
        if run.tool_guard is self:
            run.tool_guard = None
        else:
            run.guards.discard(self)
        if self._handle is not None:
            self._handle.cancel()
        if exc_type is None and self.reason is None:
            return False  # the call returned, the guard did not fire: the common case
        cancelled = exc_type is not None and issubclass(exc_type, asyncio.CancelledError)
        if self.reason is None or task is None:
            self.stopped = self.stopped or cancelled
            return False
        # this guard cancelled the task: swallow that cancellation, unless someone else's
        # cancellation (the run being closed) is pending too
        return task.uncancel() <= self._cancelling and cancelled
