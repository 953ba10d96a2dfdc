"""The pause signal: how `interrupt()` unwinds a tool, node or agent up to the kernel.

`raise_pause` is the only place it is raised; `plait.kernel` is the only module that catches
it, turning it into a pause event (an agent) or an `Interrupted` result (a tool or node call).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from plait.events import InterruptCtx

__all__ = ["InterruptSignal", "raise_pause"]


class InterruptSignal(BaseException):
    """Raised by `interrupt()` to pause the run; a `BaseException`, so `except Exception`
    in a tool cannot swallow it."""

    def __init__(self, contexts: tuple[InterruptCtx, ...]) -> None:
        super().__init__(contexts)
        self.contexts = contexts


def raise_pause(contexts: Sequence[InterruptCtx]) -> NoReturn:
    """Pause the tool, node or agent running now on `contexts` (an agent run as a tool whose
    child paused passes the child's interrupts up this way)."""
    raise InterruptSignal(tuple(contexts))
