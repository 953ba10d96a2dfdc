"""Where a run sends the calls made outside the ReAct loop: the model calls of a
compaction summary and of `Inherit.summary`, and sync graph nodes.

The run's interceptor (`RunState.interceptor`) answers the ReAct loop's model and tool
calls; one that also offers `side_model(ctx, model)` and `sync_node(ctx, name, fn)` takes
these too (a durable-execution engine runs them as its activities). Without one they run
as they are: the model called directly, the node on a daemon thread.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from plait._util.threads import run_in_thread

__all__ = ["run_sync_node", "side_model"]


def side_model(ctx: Any, model: Any) -> Any:
    """Return the model a call outside the ReAct loop at `ctx` goes to."""
    route = getattr(ctx.run.interceptor, "side_model", None)
    return model if route is None else route(ctx, model)


def run_sync_node(ctx: Any, name: str, fn: Callable[[Any], Any], state: Any) -> Awaitable[Any]:
    """Run the sync graph node `fn` on `state`: where the run's interceptor sends it, else
    on a daemon thread (context copied)."""
    route = getattr(ctx.run.interceptor, "sync_node", None)
    if route is not None:
        routed: Awaitable[Any] = route(ctx, name, fn, state)
        return routed
    return run_in_thread(functools.partial(fn, state))
