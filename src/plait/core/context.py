"""The run context: plait's own implementation of `AgentContext`, and more for its modules.

`Frame` is a view of one place in a run (an agent, or one tool call of it) over the
run's shared state (`plait.core.run_state.RunState`): where it is (agent, run path, depth,
address), the lane it runs in (input, history, model input), and the actions and events its
tool calls send. Its bases hold the rest: what the run holds, its usage and budgets
(`plait.core.context_run`); the resume records components keep while they work
(`keep_record`), the values custom agents keep (`save_state`), and how it pauses
(`interrupt`), stops between steps (`safe_point`) and stops tool calls in flight (`guard`,
`cancelled`) (`plait.core.context_pause`); the events it builds
(`plait.core.context_events`). The kernel (`plait.core.kernel`) enters every agent and tool
call with one; a pause or a step save snapshots every record at once, so saving a step never
unwinds the stack. Only the names of `AgentContext` are public. This module is the only one
that touches the private fields of a context other than `self`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plait.core.agent_context import AgentContext, HookContext
from plait.core.context_pause import UNREAD, PauseAndSave
from plait.core.context_run import RunValues
from plait.core.history import USER, HistoryRecord, history_for, whole_messages
from plait.core.hooks import NO_HOOKS, HookChain
from plait.core.resume import ResumePoints
from plait.core.run_state import (
    Budget,
    IdSource,
    RunSnapshot,
    RunState,
    SavedOptions,
    Saver,
)
from plait.core.wrapped import WrappedModel
from plait.errors import MaxDepthExceeded, UsageError
from plait.events import AgentAction, AgentEvent, AgentOutput, BreakLoopAction
from plait.messages import Message

__all__ = [
    "Emit",
    "IdSource",
    "Frame",
    "inside",
]

Emit = Callable[[AgentEvent], None]


class Frame(RunValues, PauseAndSave):
    """The context of one agent (or one tool call) inside a run.

    `session_values` is one mapping shared by the whole run (last write wins); `state` is the
    team-shared state; `agent_name`, `run_path` and `depth` locate the current agent.
    Get it inside a tool with `plait.run_context()` or by a parameter annotated `Frame`.
    """

    __slots__ = (
        "_actions",
        "_budgets",
        "_emit",
        "_history",
        "_model",
        "_model_messages",
        "_root_authors",
        "_root_input",
        "_teams",
        "address",
        "agent_name",
        "depth",
        "run",
        "run_path",
        "tool",
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
        self.run = run
        self._root_input = root_input
        self._history = history
        self._root_authors: tuple[str, ...] | None = None  # None: all the caller's
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.tool_error: Exception | None = None  # what the tool call raised (told the model)
        self.tool: Any = None  # the tool this tool call runs (set as the call starts)
        self._actions: list[AgentAction] | None = None
        self._emit: Emit | None = None
        self._call_guard = None
        self._model_messages: list[Message] | None = None
        self._model: object = None
        self._answered = None
        self._budgets: tuple[str, ...] = ()  # addresses of the teams whose budgets apply
        self._teams: tuple[tuple[str, int, int | None], ...] = ()  # (name, level, max_depth)
        self._resume_info = UNREAD

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
    ) -> Frame:
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
        ctx.run.options = options
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
    ) -> Frame:
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
        run = self.run
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

    def nested(self, agent_name: str, messages: Sequence[Message]) -> Frame:
        """Return the context of an agent run as a tool of this one: one level deeper, with
        its own input and history, sharing the run's session values, state and usage."""
        ctx = Frame(
            agent_name=agent_name,
            run_path=(*self.run_path, agent_name),
            depth=self.depth + 1,
            run=self.run,
            root_input=tuple(messages),
            history=[],
            address=f"{self.address};agent:{agent_name}",
        )
        ctx._budgets, ctx._teams = self._budgets, self._teams
        return ctx

    def fork(self, history: Sequence[HistoryRecord] | None = None) -> Frame:
        """Return a copy with its own history lane (for a branch running in parallel);
        `history` replaces what the lane starts with."""
        ctx = self._copy(self.agent_name, self.run_path, self.address)
        ctx._history = list(self._history if history is None else history)
        return ctx

    def _copy(self, agent_name: str, run_path: tuple[str, ...], address: str) -> Frame:
        ctx = Frame(
            agent_name=agent_name,
            run_path=run_path,
            depth=self.depth,
            run=self.run,
            root_input=self._root_input,
            history=self._history,
            address=address,
        )
        ctx._budgets, ctx._teams = self._budgets, self._teams
        ctx._root_authors = self._root_authors
        return ctx

    def for_agent(
        self, name: str, *, run_path: tuple[str, ...] | None = None, address: str | None = None
    ) -> Frame:
        """Return the context of agent `name` in the same lane, its run path and address
        extended (a workflow passes its own address so siblings do not accumulate there)."""
        return self._copy(
            name,
            run_path if run_path is not None else (*self.run_path, name),
            f"{address if address is not None else self.address};agent:{name}",
        )

    def place(self, name: str) -> Frame:
        """Return the context of a place of its own just below this one (`address;name`),
        where a hook's interrupts and saved values are apart from the agent's or the tool
        call's (a gate's approval, a loop guard's question).

        Raises:
            UsageError: `name` is empty or holds a ";".
        """
        if not isinstance(name, str) or not name or ";" in name:
            raise UsageError(f"a place is named by a non-empty text without ';', not {name!r}")
        ctx = self._copy(self.agent_name, self.run_path, f"{self.address};{name}")
        ctx.tool_name, ctx.tool_call_id = self.tool_name, self.tool_call_id
        ctx._model_messages, ctx._model = self._model_messages, self._model
        return ctx

    def for_tool(self, name: str, call_id: str | None) -> Frame:
        """Return the context of one tool call made by this agent (built on every call, so
        it sets its fields directly instead of going through `__init__`)."""
        ctx = _new_context(Frame)
        ctx.agent_name = self.agent_name
        ctx.run_path = self.run_path
        ctx.depth = self.depth
        ctx.run = self.run
        ctx._root_input = self._root_input
        ctx._root_authors = self._root_authors
        ctx._history = self._history
        ctx.address = f"{self.address};tool:{name}:{call_id}"
        ctx.tool_name = name
        ctx.tool_call_id = call_id
        ctx.tool_error = None
        ctx.tool = None
        ctx._actions = []
        ctx._emit = self._emit
        ctx._call_guard = None
        ctx._model_messages = self._model_messages
        ctx._model = self._model
        ctx._answered = None
        ctx._budgets = self._budgets
        ctx._teams = self._teams
        ctx._resume_info = UNREAD
        return ctx

    def for_team(
        self,
        team: str,
        *,
        max_depth: int | None,
        max_steps: int | None,
        max_tokens: int | None,
    ) -> Frame:
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
            if key not in self.run.budgets:
                self.run.budgets[key] = Budget(team, max_steps, max_tokens)
            inner._budgets = (*self._budgets, key)
        return inner

    # --- this lane: its input, history and model -------------------------------------------

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

    def lane(self, source: Sequence[tuple[str, Message]]) -> Frame:
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

    def owner(self) -> Frame:
        """Return the context of the agent at this place: this one, or for a tool call its
        agent's (whose `save_state` values the tool call's seams can share)."""
        if self.tool_name is None:
            return self
        suffix = f";tool:{self.tool_name}:{self.tool_call_id}"
        ctx = self._copy(self.agent_name, self.run_path, self.address.removesuffix(suffix))
        ctx._model_messages, ctx._model = self._model_messages, self._model
        return ctx

    def side_model(self, model: Any) -> Any:
        """Return `model` as a model call made here outside the agent's own loop (a
        compaction summary, `Inherit.summary`) must reach it: through the run's
        `wrap_model` hooks (a cassette records and replays it) and wherever the run sends
        its model calls (a durable-execution engine's activities)."""
        route = getattr(self.run.interceptor, "side_model", None)
        routed = model if route is None else route(self, model)
        fns = self.run.hooks.wrap_model
        return WrappedModel(fns, self, routed) if fns else routed

    # --- checkpoints ----------------------------------------------------------------------

    def snapshot(self) -> RunSnapshot:
        """Return what a checkpoint holds of this run (call it on the root context)."""
        snapshot = self.run.snapshot()
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
        self.run.restore(snapshot, answers, points)

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

    def emit(self, value: Any) -> bool:
        """Pass an event up from inside a tool (an agent run as a tool forwards its events);
        a value that is not an `AgentEvent` goes up as this agent's custom output.

        Return False when the caller does not take events from this tool.
        """
        if self._emit is None:
            return False
        if not isinstance(value, AgentEvent):
            value = self.event(output=AgentOutput(custom=value))
        self._emit(value)
        return True

    def __repr__(self) -> str:
        return f"Frame(agent_name={self.agent_name!r}, run_path={self.run_path!r})"


_new_context = object.__new__


def inside(ctx: AgentContext) -> Frame:
    """Return plait's own context behind `ctx`: the built-in agents use more of it than the
    public `AgentContext`.

    Raises:
        UsageError: `ctx` is not a context plait made (a built-in agent run by hand).
    """
    if isinstance(ctx, Frame):
        return ctx
    raise UsageError(
        f"plait's agents run inside a plait run (Runner), not with a {type(ctx).__name__}"
    )


if TYPE_CHECKING:  # plait's context is what every hook seam is given
    _IS_A_HOOK_CONTEXT: type[HookContext] = Frame
