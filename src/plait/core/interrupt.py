"""Pausing a run: `interrupt()` and `interrupt_state()`.

`interrupt(info)` inside a tool (or `ctx.interrupt(info)` in a custom agent) pauses the run
the first time: the run ends with one event whose `action.interrupted` lists every pending
interrupt. When the run is resumed with data for that interrupt, the tool runs again from its
start and this time `interrupt(...)` returns the data.
"""

from __future__ import annotations

from typing import Any

from plait.core.current import current_context
from plait.core.signal import InterruptSignal

__all__ = ["InterruptSignal", "interrupt", "interrupt_state"]


def interrupt(info: Any = None, *, state: Any = None) -> Any:
    """Pause the run (first time) or return the resume data (when resumed with some).

    `info` is shown to whoever resumes (a question, the action awaiting approval); `state` is
    saved with the checkpoint and given back by `interrupt_state()` on resume. Both must be
    JSON-serializable.
    """
    return current_context().interrupt(info, state=state)


def interrupt_state() -> Any:
    """Return the `state` saved by this point's interrupt, when resumed (else None)."""
    return current_context().interrupt_state()
