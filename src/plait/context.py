"""The run context: what a tool, node or agent can see of the run it is part of."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

from plait.errors import PlaitError, UsageError
from plait.events import AgentAction, AgentEvent, AgentOutput, MessageVariant
from plait.messages import Message, Usage

__all__ = ["RunContext", "run_context"]


class _RunState:
    """State shared by every agent of one run."""

    __slots__ = (
        "enable_streaming",
        "input_tokens",
        "model_calls",
        "output_tokens",
        "root_input",
        "session_values",
        "state",
    )

    def __init__(
        self,
        root_input: Sequence[Message],
        session_values: dict[str, Any],
        enable_streaming: bool,
    ) -> None:
        self.root_input = tuple(root_input)
        self.session_values = session_values
        self.state: dict[str, Any] = {}
        self.enable_streaming = enable_streaming
        self.model_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0


class RunContext:
    """The context of one agent (or one tool call) inside a run.

    `session_values` is one mapping shared by the whole run (last write wins); `state` is the
    team-shared state; `agent_name`, `run_path` and `depth` locate the current agent.
    Get it inside a tool with `plait.run_context()` or by a parameter annotated `RunContext`.
    """

    __slots__ = ("_actions", "_run", "agent_name", "depth", "run_path", "tool_call_id", "tool_name")

    def __init__(
        self,
        *,
        agent_name: str,
        run_path: tuple[str, ...],
        depth: int,
        run: _RunState,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
    ) -> None:
        self.agent_name = agent_name
        self.run_path = run_path
        self.depth = depth
        self._run = run
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self._actions: list[AgentAction] | None = None

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
        run = _RunState(
            messages, session_values if session_values is not None else {}, enable_streaming
        )
        return cls(agent_name=agent_name, run_path=(agent_name,), depth=0, run=run)

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
        """Return the messages the run started with."""
        return self._run.root_input

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
        """Count one model call and its usage towards the run's totals."""
        run = self._run
        run.model_calls += 1
        if usage is not None:
            run.input_tokens += usage.input_tokens
            run.output_tokens += usage.output_tokens

    def send_action(self, action: AgentAction) -> None:
        """Attach `action` to the event of the tool call this context belongs to."""
        if self._actions is None:
            raise UsageError(
                "send_action() works inside a tool call; a custom agent yields an AgentEvent "
                "with the action instead"
            )
        self._actions.append(action)

    def for_agent(self, name: str, *, depth: int | None = None) -> RunContext:
        """Return the context of a sub-agent `name`, its run path extended by that name."""
        return RunContext(
            agent_name=name,
            run_path=(*self.run_path, name),
            depth=self.depth if depth is None else depth,
            run=self._run,
        )

    def for_tool(self, name: str, call_id: str | None) -> RunContext:
        """Return the context of one tool call made by this agent."""
        ctx = RunContext(
            agent_name=self.agent_name,
            run_path=self.run_path,
            depth=self.depth,
            run=self._run,
            tool_name=name,
            tool_call_id=call_id,
        )
        ctx._actions = []
        return ctx

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

_current: ContextVar[RunContext | None] = ContextVar("plait_run_context", default=None)


def run_context() -> RunContext:
    """Return the context of the run this code is part of (inside a tool, node or agent)."""
    ctx = _current.get()
    if ctx is None:
        raise UsageError("run_context() is only available while a plait run is executing")
    return ctx
