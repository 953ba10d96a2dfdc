"""`AgentContext`: what an agent, a tool, a graph node or a hook sees of the run it is in.

This is the whole public surface of a run's context. Custom agents receive it in
`run(input, ctx)`, tools through a parameter annotated `AgentContext` (or `RunContext`, the
same protocol under its older name) or `plait.run_context()`, graph nodes and hooks as their
first argument. plait's own context class implements it and has more, for plait's own
modules; only the names below are public and stable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from plait.core.resume import ResumeInfo
from plait.errors import PlaitError
from plait.events import AgentAction, AgentEvent, AgentOutput
from plait.messages import Message, Usage

__all__ = ["AgentContext", "HookContext", "ResumeInfo", "RunContext"]


@runtime_checkable
class AgentContext(Protocol):
    """The context of one agent (or one tool call of it) in a run.

    Where it is: `agent_name`, `run_path` (agent names from the root), `depth` (agents run
    as tools are one deeper). What the run holds: `session_id`, `session_values` (one
    mapping for the whole run), `state` (team-shared), `local_state` (this agent's own,
    kept across its turns), `usage` (tokens so far), `metadata` (the runner's, read-only),
    `history` (the messages this agent runs on). Control: `cancelled` (stop long work),
    `resume_info`, `idempotency_key` (inside a tool call). Acting: `event(...)` builds an
    event of this agent, `emit(value)` passes an event or a custom value up from a tool
    call, `send_action` attaches an action to the tool call's event,
    `save_state`/`load_state` keep JSON-able values across pauses.
    """

    @property
    def agent_name(self) -> str:
        """The name of the agent this context belongs to."""
        ...

    @property
    def run_path(self) -> tuple[str, ...]:
        """The agent names from the run's root to this agent."""
        ...

    @property
    def depth(self) -> int:
        """How deep this agent runs: 0 at the root, one more inside an agent run as a tool."""
        ...

    @property
    def session_id(self) -> str | None:
        """The session the run belongs to, if any."""
        ...

    @property
    def session_values(self) -> dict[str, Any]:
        """The run's session values, shared by every agent of the run."""
        ...

    @property
    def state(self) -> dict[str, Any]:
        """The team-shared state of the run."""
        ...

    @property
    def local_state(self) -> dict[str, Any]:
        """This agent's own state, kept across its turns and not shared."""
        ...

    @property
    def usage(self) -> Usage:
        """The tokens spent by every model call of the run so far."""
        ...

    @property
    def metadata(self) -> Mapping[str, Any]:
        """The run's metadata (`Runner(metadata=...)`), read-only."""
        ...

    @property
    def cancelled(self) -> bool:
        """Whether this work should stop (the run was asked to, or a tool call timed out)."""
        ...

    @property
    def history(self) -> Sequence[Message]:
        """The messages this agent runs on."""
        ...

    @property
    def resume_info(self) -> ResumeInfo | None:
        """How the resumed run finds this agent; None when the run is not a resume."""
        ...

    @property
    def idempotency_key(self) -> str | None:
        """Inside a tool call, a key stable for that call across pauses, resumes and
        processes; None elsewhere."""
        ...

    def event(
        self,
        *,
        message: Message | None = None,
        output: AgentOutput | None = None,
        action: AgentAction | None = None,
        error: PlaitError | None = None,
    ) -> AgentEvent:
        """Build an event of this agent (name, run path and depth stamped)."""
        ...

    def emit(self, value: Any) -> bool:
        """Pass an event up from a tool call while it runs: an `AgentEvent` as it is, any
        other value as this agent's event with `AgentOutput(custom=value)` (what the Agent
        Protocol's `custom` stream mode sends). Return False when the tool's caller takes
        no events from it (a tool says it emits with `emits_events`)."""
        ...

    def send_action(self, action: AgentAction) -> None:
        """Attach `action` to the event of the tool call this context belongs to."""
        ...

    def save_state(self, key: str, value: Any) -> None:
        """Keep a JSON-able value (or a pydantic model) for this agent at this place in the
        run; it survives pauses and resumes. Encoded at once: a value that cannot be is a
        `SerializationError` naming the key and the place inside the value."""
        ...

    def load_state(self, key: str) -> Any:
        """Return the value saved under `key` here (after a resume too), or None."""
        ...


#: The older name of `AgentContext`, kept for annotations (a tool parameter annotated with
#: either is injected).
RunContext = AgentContext


@runtime_checkable
class HookContext(AgentContext, Protocol):
    """What a hook may use of the run besides `AgentContext`: the context every seam of
    `plait.Hooks` receives, so plait's own features (tracing, limits, the loop guard,
    compaction, the cassette) are written on it alone, as a user's hook can be.

    Where it is: `address` (the agent, or the tool call: its interrupts and values are keyed
    by it), `owner()` (for a tool call, its agent's context), `place(name)` (a place of the
    hook's own below this one). The call under way: `model` (the model the agent calls in
    this run), `tool` and `tool_error` (inside a tool call: the tool, and what it raised).
    The run: `checkpoint_id`, `requests` and `tool_calls` (counted across pauses),
    `paused`. Acting: `record_model_call(usage)` counts a call the hook makes itself in the
    run's usage and budgets, `side_model(model)` is what such a call goes to, `emit(value)`
    (of `AgentContext`) also passes up what a `before_model` hook emits, `interrupt(info)`
    pauses the run here (or returns the answer once resumed), `stop(error)` ends it at its next
    safe point with a resumable checkpoint. Keeping: `extras` while the
    run lives (never saved), `keep_run_value` / `run_value` for the whole run, saved with it
    (`save_state` keeps values at a place).
    """

    @property
    def address(self) -> str:
        """The place in the run: `agent:A;tool:search:call_1`."""
        ...

    def owner(self) -> HookContext:
        """Return the context of the agent at this place: this one, or for a tool call its
        agent's (whose `save_state` values the seams of its tool calls can share)."""
        ...

    def place(self, name: str) -> HookContext:
        """Return the context of a place of the hook's own just below this one
        (`address;name`): its `interrupt` and `save_state` are apart from the agent's or
        the tool call's (a name per question lets a hook pause several times)."""
        ...

    @property
    def model(self) -> object:
        """The model the agent of this context calls in this run (None: not a model's)."""
        ...

    @property
    def tool(self) -> object:
        """Inside a tool call, the tool it runs (from `wrap_tool` on); None elsewhere."""
        ...

    @property
    def tool_error(self) -> Exception | None:
        """In `after_tool`, what the tool raised (its result then tells the model)."""
        ...

    @property
    def checkpoint_id(self) -> str | None:
        """The id this run is saved under when it pauses, or the id it resumes (None
        without a store)."""
        ...

    @property
    def requests(self) -> int:
        """The model calls the run's agents have sent so far (in `before_model`, not the one
        about to be sent), across pauses."""
        ...

    @property
    def tool_calls(self) -> int:
        """The tool calls of the run running or done (in `before_tool`, not the one about
        to run; one that paused counts when it runs again), across pauses."""
        ...

    @property
    def paused(self) -> bool:
        """Whether the run has paused at this place or below it (in `after_agent`: the
        agent paused rather than finished)."""
        ...

    def record_model_call(self, usage: Usage | None) -> None:
        """Count one model call and its usage towards the run's totals and budgets."""
        ...

    def side_model(self, model: Any) -> Any:
        """Return what a model call the hook makes itself (a summary) goes to: `model`
        behind the run's `wrap_model` hooks (a cassette records it) and wherever the run
        sends its model calls."""
        ...

    def interrupt(self, info: Any = None, *, state: Any = None) -> Any:
        """Pause the run here, or return the data this place was resumed with."""
        ...

    def stop(self, error: PlaitError | None = None) -> None:
        """Ask the run to stop at its next safe point, saved so that `resume` continues it
        (as a cancel does), ending with `error` (None: `RunCancelled`). Called in
        `before_model`, the call is not made: the resumed run makes it."""
        ...

    @property
    def extras(self) -> dict[str, Any]:
        """What hooks keep for this run while it lives (never saved), each under a key of
        its own."""
        ...

    def keep_run_value(self, key: str, value: Any) -> None:
        """Keep a JSON-able value for the whole run: saved with its checkpoints, seen again
        by `run_value` in the run that resumes it."""
        ...

    def run_value(self, key: str) -> Any:
        """Return the value kept under `key` by `keep_run_value` (in this run or the one it
        resumes), or None."""
        ...
