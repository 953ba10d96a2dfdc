"""The Agent Protocol (LangGraph Server's API) on plait's app, so the official
`langgraph-sdk` client drives any served agent, team or graph unchanged.

The routes are mounted by `create_app(..., agent_protocol=True)` (the default), behind
the app's own door: its Host guard, API keys (`Authorization: Bearer` or `x-api-key`),
body limit, per-user view of the store and runs. What maps to what:

- an assistant is a served agent (`graph_id` = its public name) or a stored configuration
  of one (`assistants`);
- a thread is a plait session (`thread_id` = session id; `threads`), its history the
  step snapshots its runs kept (`state`);
- a thread's run is a run of the server (`plait.server.runs`; `runs`); a stateless run
  is one on a temporary thread (`stateless`);
- a store item is an entry of the user's `store` document in the server's store (`store`);
- a cron is a record of the server's, fired by each worker's `Scheduler` (`crons`);
- what is not served answers `501`, naming it (`not_served`).

Messages cross in the SDK's shape, through one converter (`messages`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter

from plait.protocols.agent_protocol.assistants import assistants_router
from plait.protocols.agent_protocol.cancel import cancel_router
from plait.protocols.agent_protocol.crons import Scheduler, crons_router
from plait.protocols.agent_protocol.not_served import not_served_router
from plait.protocols.agent_protocol.replay import RunLogs
from plait.protocols.agent_protocol.runs import runs_router
from plait.protocols.agent_protocol.state import state_router
from plait.protocols.agent_protocol.stateless import stateless_router
from plait.protocols.agent_protocol.store import store_router
from plait.protocols.agent_protocol.stream_route import stream_shortcut
from plait.protocols.agent_protocol.threads import threads_router

__all__ = ["RunLogs", "Scheduler", "agent_protocol_router", "stream_shortcut"]


def agent_protocol_router(caller: Callable[..., Any], logs: RunLogs | None = None) -> APIRouter:
    """Return every Agent Protocol route; `caller` is the app's dependency that checks the
    API key, `logs` keeps the events of this process's runs, for clients that re-attach
    (the stream route's shortcut, `stream_shortcut`, shares them)."""
    router = APIRouter()
    logs = RunLogs() if logs is None else logs
    # a thread's runs first: a request is matched against the routes in turn, and none of
    # the others has a path and method of theirs (`/threads/{id}/runs/crons` is POST only)
    router.include_router(runs_router(caller, logs))
    parts = (assistants_router, threads_router, state_router, crons_router, store_router)
    for part in (*parts, cancel_router, not_served_router):
        router.include_router(part(caller))
    router.include_router(stateless_router(caller, logs))
    return router
