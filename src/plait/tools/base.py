"""The tool protocol and the values tools exchange with agents."""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Literal, Protocol, runtime_checkable

from plait._util.json import JSONMixin
from plait._util.record import record
from plait.core.agent_context import AgentContext
from plait.errors import UsageError
from plait.events import AgentAction
from plait.messages import EFFECTS, Effect, ToolInfo

__all__ = [
    "EFFECTS",
    "TRANSFER_TOOL",
    "Approval",
    "Effect",
    "EmitsEvents",
    "Gated",
    "HasTimeout",
    "Tool",
    "ToolInfo",
    "ToolResult",
    "Toolset",
    "check_approval",
    "check_effect",
    "check_timeout",
]

#: The name of the tool an agent transfers with (a flow's sub-agents, a swarm's peers).
TRANSFER_TOOL = "transfer_to_agent"


@record
class Approval:
    """A person approves each call of a tool before it runs (`@tool(approval=...)`).

    `expires_in` (seconds, None: never) bounds how long the question stays open; a resume
    after that applies `default` ("reject" or "approve") whatever the answer.
    """

    expires_in: float | None = None
    default: Literal["reject", "approve"] = "reject"

    def __post_init__(self) -> None:
        check_timeout(self.expires_in, "Approval(expires_in=...)")
        if self.default not in ("reject", "approve"):
            raise UsageError(
                f"Approval(default=...) is 'reject' or 'approve', got {self.default!r}"
            )


@record
class ToolResult(JSONMixin):
    """A tool's result with an action attached to its event (exit, transfer, break…).

    A transfer from an agent that has no one to transfer to (no sub-agents, no parent, not a
    swarm member) is a failed tool call: the model is told, or with `tool_errors="raise"`
    the run ends with a `ToolError`.
    """

    content: str
    action: AgentAction | None = None


@runtime_checkable
class Tool(Protocol):
    """A tool a model can call."""

    def info(self) -> ToolInfo:
        """Describe the tool to the model."""
        ...

    async def call(self, arguments_json: str, ctx: AgentContext) -> str | ToolResult:
        """Run the tool on the JSON arguments the model sent."""
        ...


@runtime_checkable
class Toolset(Protocol):
    """Tools known only once a run starts (an MCP server's, `plait.tools.MCPToolset`).

    Given in an agent's `tools`, a toolset is opened when each run of the agent starts: the
    context's value is the tools offered in that run (after the agent's own), and it is
    left when the run of the agent ends (finished, paused or failed). A `PlaitError` raised
    while opening ends the run with it.
    """

    def open_tools(self, ctx: AgentContext) -> AbstractAsyncContextManager[Sequence[Tool]]:
        """Open the toolset for one run of an agent; its value is the tools of that run."""
        ...


@runtime_checkable
class EmitsEvents(Protocol):
    """A tool that passes events up while it runs (an agent run as a tool): with
    `emits_events` true, its calls run concurrently with a channel for those events."""

    emits_events: bool


@runtime_checkable
class HasTimeout(Protocol):
    """A tool with its own time limit: each call may run `timeout` seconds (None: the
    calling agent's `tool_timeout`)."""

    timeout: float | None


@runtime_checkable
class Gated(Protocol):
    """A tool whose calls pass a gate before they run: an approval, and the journal of a
    `"once"` effect (`plait.effects`)."""

    effect: Effect
    approval: Approval | None


def check_effect(value: object, owner: str) -> Effect:
    """Return `value` if it is an effect: "read", "idempotent" or "once"."""
    for effect in EFFECTS:
        if value == effect and isinstance(value, str):
            return effect
    raise UsageError(f"{owner}: effect is 'read', 'idempotent' or 'once', got {value!r}")


def check_approval(value: object, owner: str) -> Approval | None:
    """Return the `Approval` that `value` asks for: True is `Approval()`, False or None none."""
    if value is None or value is False:
        return None
    if value is True:
        return Approval()
    if isinstance(value, Approval):
        return value
    raise UsageError(f"{owner}: approval is True, False, None or a plait.Approval, got {value!r}")


def check_timeout(value: object, owner: str) -> float | None:
    """Return `value` as a timeout in seconds: a positive finite number, or None for none."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value > 0 and math.isfinite(value):
            return float(value)
    raise UsageError(
        f"{owner}: a timeout is a positive finite number of seconds, or None for no limit; "
        f"got {value!r}"
    )
