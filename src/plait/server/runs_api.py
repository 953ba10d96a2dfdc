"""`GET /v1/runs` (the caller's runs, newest first) and `GET /v1/agents/{name}/topology`.

Runs are listed from the store (the user's index of runs, `plait.server.run_index`, and
each run's latest summary), never from memory, so every process sharing the store lists the
same runs. A run that was resumed is listed once, as its latest summary, under the id its
first response gave (`run_id`); a paused run's `checkpoint_id` is the one to resume.
Runs come newest first by start time (of runs started at the same time, the one listed
last first). The cursor is opaque: it stands for a place in that order (a start time and
the run's number in the index), so it stays valid while runs start, change or finish. A
filter that matches nothing answers an empty page with no cursor.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query

from plait.errors import CheckpointNotFound
from plait.server.bodies import RunList, RunListItem, error_responses
from plait.server.limits import ApiError
from plait.server.run_index import Listed, decode_cursor, encode_cursor, read_runs
from plait.server.topology import Topology, describe
from plait.stores.base import GuardedStore

__all__ = ["MAX_PAGE", "runs_router"]

#: The most runs one page holds.
MAX_PAGE = 200

_errors = functools.partial(
    error_responses,
    {401: "No valid API key.", 404: "Unknown agent.", 422: "A bad `limit`, `status` or `cursor`."},
)

ListedStatus = Literal["running", "paused", "completed", "failed", "cancelled"]


def runs_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the runs listing and topology routes; `caller` is the app's dependency that
    checks the API key."""
    router = APIRouter()
    caller_dep: Any = Depends(caller)

    @router.get(
        "/v1/runs",
        summary="List your runs",
        response_model=RunList,
        responses=_errors(401, 422),
        tags=["runs"],
    )
    async def list_runs(
        status: Annotated[
            ListedStatus | None, Query(description="Only runs in this status.")
        ] = None,
        agent: Annotated[str | None, Query(description="Only runs of this agent.")] = None,
        limit: Annotated[
            int, Query(ge=1, le=MAX_PAGE, description=f"Runs per page (1 to {MAX_PAGE}).")
        ] = 50,
        cursor: Annotated[
            str | None, Query(max_length=200, description="`next_cursor` of the page before.")
        ] = None,
        who: Any = caller_dep,
    ) -> RunList:
        """Return the caller's runs, newest first by start time: each run's latest summary
        with its `run_id` and `updated_at`. A resumed run is listed once. Pass
        `next_cursor` as `cursor` for the next page."""
        return await _page(who, status, agent, limit, cursor)

    @router.get(
        "/v1/agents/{name}/topology",
        summary="Describe an agent's topology",
        response_model=Topology,
        responses=_errors(401, 404),
        tags=["agents"],
    )
    async def agent_topology(name: str, who: Any = caller_dep) -> Topology:
        """Return agent `name` as a graph: its nodes (agents, teams, graph nodes, tools)
        and the edges between them (members, transfers, agent tools, graph edges)."""
        agent = who.server.agents.get(name)
        if agent is None:
            raise ApiError(404, f"no agent '{name[:128]}'; GET /v1/agents lists them")
        return describe(agent)

    return router


async def _page(
    who: Any, status: str | None, agent: str | None, limit: int, cursor: str | None
) -> RunList:
    """Return one page of the caller's runs (see the module's docstring)."""
    after = None
    if cursor is not None:
        after = decode_cursor(cursor)
        if after is None:
            raise ApiError(422, "cursor is not one this server gave; pass a next_cursor")
    store = who.store
    found = await GuardedStore(store.store).get_session_record(store.runs_key)
    listed = [
        run
        for run in read_runs(found)
        if (status is None or run.status == status)
        and (agent is None or run.agent == agent)
        and (after is None or run.position < after)
    ]
    page = listed[:limit]
    items = await asyncio.gather(*(_item(who, run) for run in page))
    # the index said the status asked for; a run that changed since is left out
    runs = [item for item in items if item is not None and status in (None, item.status)]
    more = len(listed) > limit and page
    return RunList(runs=runs, next_cursor=encode_cursor(page[-1]) if more else None)


async def _item(who: Any, run: Listed) -> RunListItem | None:
    """Return a listed run's latest summary (None: its summary is gone)."""
    try:
        record = await who.server.runs.record(who.store, run.run_id)
    except CheckpointNotFound:
        return None
    data = record.model_dump()
    data["run_id"] = run.run_id
    data["updated_at"] = record.updated_at or record.started_at
    if data["updated_at"] is None:
        return None
    data.pop("started_at", None)
    return RunListItem.model_validate(data)
