"""Cancelling many runs at once (`runs.cancel_many`, `POST /runs/cancel`): the caller's runs
named by `run_ids` (of `thread_id`), or every run of theirs that is `pending`, `running`
or either (`status="all"`), of one thread or of all; each is cancelled as `runs.cancel`
does (`plait.protocols.agent_protocol.runs.cancel_run`), with its `action`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from fastapi import APIRouter, Response

from plait.protocols.agent_protocol.records import find_run
from plait.protocols.agent_protocol.runs import cancel_run
from plait.protocols.agent_protocol.shapes import Body, errors, router_of
from plait.protocols.agent_protocol.thread_records import runs_document, thread_ids
from plait.server.caller import Caller
from plait.server.limits import ApiError
from plait.server.users import id_problem

__all__ = ["cancel_router"]

_ACTIVE = ("pending", "running")


class CancelMany(Body):
    """What `runs.cancel_many` sends."""

    thread_id: str | None = None
    run_ids: list[str] | None = None
    status: Literal["pending", "running", "all"] | None = None


async def _targets(who: Caller, body: CancelMany) -> list[tuple[str, str]]:
    """Return the (thread, run) ids `body` names (`404` for a run named that is not the
    caller's, or not of `thread_id`)."""
    if body.run_ids is not None:
        if body.thread_id is None:
            raise ApiError(422, "run_ids are cancelled on their thread: name its thread_id")
        for run_id in body.run_ids:
            await find_run(who, body.thread_id, run_id)
        return [(body.thread_id, run_id) for run_id in body.run_ids]
    if body.status is None:
        raise ApiError(422, "name the runs to cancel: run_ids (with thread_id) or a status")
    wanted = _ACTIVE if body.status == "all" else (body.status,)
    found = []
    threads = [body.thread_id] if body.thread_id is not None else await thread_ids(who)
    for thread_id in threads:
        if id_problem(thread_id):  # no thread has it
            continue
        for run_id, record in (await runs_document(who, thread_id).read()).items():
            if record["status"] not in _ACTIVE:
                continue
            if (await find_run(who, thread_id, run_id))["status"] in wanted:
                found.append((thread_id, run_id))
    return found


def cancel_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the route that cancels many runs; `caller` is the app's dependency that checks
    the API key."""
    return router_of("runs", caller, _cancel_routes)


def _cancel_routes(router: APIRouter, who_dep: Any) -> None:
    """Add `POST /runs/cancel`."""

    @router.post(
        "/runs/cancel",
        status_code=204,
        summary="Cancel runs",
        responses=errors(401, 404, 422),
    )
    async def cancel_many(
        body: CancelMany,
        who: Caller = who_dep,
        action: Literal["interrupt", "rollback"] = "interrupt",
    ) -> Response:
        """Cancel the caller's runs named, or those with `status`, as `runs.cancel` does."""
        for thread_id, run_id in await _targets(who, body):
            await cancel_run(who, thread_id, run_id, action)
        return Response(status_code=204)
