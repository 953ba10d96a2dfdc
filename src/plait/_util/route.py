"""Where a run sends its sync graph nodes.

The run's interceptor (`RunState.interceptor`, a durable-execution engine's router) takes
the ReAct loop's model and tool calls; one that also offers `sync_node(ctx, name, fn)` runs
sync graph nodes too (as its activities). Without one a node runs on a daemon thread. (Model
calls made outside the ReAct loop go through `Frame.side_model`.)
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from plait._util.threads import run_in_thread

__all__ = ["run_sync_node"]


def run_sync_node(ctx: Any, name: str, fn: Callable[[Any], Any], state: Any) -> Awaitable[Any]:
    """Run the sync graph node `fn` on `state`: where the run's interceptor sends it, else
    on a daemon thread (context copied)."""
    route = getattr(ctx.run.interceptor, "sync_node", None)
    if route is not None:
        routed: Awaitable[Any] = route(ctx, name, fn, state)
        return routed
    return run_in_thread(functools.partial(fn, state))
