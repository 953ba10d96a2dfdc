"""`Runner(after_run=[...])`: callables run after each run that completes.

A callable gets the run's root `AgentContext` and its `RunResult`: `fn(ctx, result)`, a
coroutine function or a plain one. It runs once the run has finished with an answer, after
its session turn is saved and after the runner's `Hooks.after_run`; never for a run that
failed, was cancelled or paused (a paused run that is resumed and completes runs it then).
They are carried by one `Hooks` subclass, the outermost of the runner's hooks.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeAlias

from plait.core.agent_context import AgentContext
from plait.core.hooks import Hooks
from plait.errors import HookError, PlaitError, UsageError
from plait.events import RunResult

__all__ = ["AfterRun", "AfterRunHooks", "check_after_run", "completed"]

#: What `Runner(after_run=[...])` takes: `(ctx, result)`, awaited when it returns a coroutine.
AfterRun: TypeAlias = Callable[[AgentContext, RunResult], Awaitable[None] | None]


def completed(result: RunResult) -> bool:
    """Return whether `result` is of a run that completed: not failed, cancelled or paused."""
    return result.error is None and not result.interrupts and result.checkpoint_id is None


def check_after_run(value: object) -> tuple[AfterRun, ...]:
    """Return `value`, a list of `after_run` callables, as a tuple.

    Raises:
        UsageError: It is not a list (or tuple) of callables.
    """
    if not isinstance(value, list | tuple):
        raise UsageError(
            f"after_run takes a list of callables (ctx, result) -> None, got {value!r}"
        )
    for fn in value:
        if not callable(fn):
            raise UsageError(f"after_run takes callables (ctx, result) -> None, got {fn!r}")
    return tuple(value)


def _name(fn: object) -> str:
    """Return the name errors give a callable."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


class AfterRunHooks(Hooks):
    """Run the `after_run` callables, in order, after a run that completed.

    A callable that raises a `PlaitError` ends the run with it; any other exception ends it
    with a `HookError` naming the callable (the seam `after_run`). The run's session turn is
    already saved by then.
    """

    def __init__(self, callables: Sequence[AfterRun]) -> None:
        self.callables = check_after_run(list(callables))

    async def after_run(self, ctx: AgentContext, result: RunResult) -> None:
        """Call each callable with `ctx` and `result`, if the run completed."""
        if not completed(result):
            return
        for fn in self.callables:
            try:
                outcome = fn(ctx, result)
                if inspect.isawaitable(outcome):
                    await outcome
            except PlaitError:
                raise
            except Exception as exc:
                name = _name(fn)
                raise HookError(
                    f"after_run callable {name} raised {type(exc).__name__}: {exc}",
                    hook=name,
                    seam="after_run",
                ) from exc
