"""Which run context is current: the agent, tool or graph node running now.

The kernel makes an agent's context current for each of its steps, and a tool call's for
the call, so `plait.run_context()` and `plait.interrupt()` find the right one wherever they
are called from.
"""

from __future__ import annotations

from contextvars import ContextVar, Token

from plait.core.agent_context import AgentContext
from plait.core.context import Frame
from plait.errors import UsageError

__all__ = [
    "CURRENT",
    "current",
    "current_context",
    "make_current",
    "reset_current",
    "run_context",
]

#: The current context (the kernel sets and resets it around each step it runs).
CURRENT: ContextVar[Frame | None] = ContextVar("plait_run_context", default=None)


def current() -> Frame | None:
    """Return the context current here (the agent, tool or node running), if any."""
    return CURRENT.get()


def make_current(ctx: Frame) -> Token[Frame | None]:
    """Make `ctx` current until `reset_current(token)`."""
    return CURRENT.set(ctx)


def reset_current(token: Token[Frame | None]) -> None:
    """Restore the context current before `make_current`."""
    CURRENT.reset(token)


def current_context() -> Frame:
    """Return plait's own context of the run this code is part of.

    Raises:
        UsageError: No plait run is executing here.
    """
    ctx = CURRENT.get()
    if ctx is None:
        raise UsageError("run_context() is only available while a plait run is executing")
    return ctx


def run_context() -> AgentContext:
    """Return the context of the run this code is part of (inside a tool, node or agent).

    Raises:
        UsageError: No plait run is executing here.
    """
    return current_context()
