"""Crons (`/runs/crons…`): runs started on a schedule, and the scheduler that starts them.

A cron names an assistant, a `schedule` in cron syntax (five fields, read by `croniter`),
an IANA `timezone` the schedule is read in (UTC by default), an optional `end_time`, and
what each run gets (`input`, `metadata`, `config`, `context`, `webhook`,
`multitask_strategy`). A thread's cron (`create_for_thread`) runs on its thread; another
(`create`) runs each time on a new thread of its own (its metadata names the cron).

Every cron of every user lives in one server-wide document of the store
(`documents.SharedDocument`), so any worker sharing the store fires any of them. Each
worker's `Scheduler` looks every `poll` seconds; a cron is due when its `next_run_date`
has come. A worker claims the due crons by moving their `next_run_date` on in one
compare-and-set: of several workers looking at once, one claims each firing, so it runs
exactly once. The next date is the schedule's first after *now*, so firings missed while
no worker ran are run once, not once per missed tick. A cron whose next date is past its
`end_time` fires no more (`next_run_date` None). A firing that cannot start (the thread is
busy, the assistant is gone) is logged and skipped. The scheduler also starts the delayed
runs (`after_seconds`, `delayed`) that are due, and the queued runs of free threads
(`workers.sweep_queues`: a worker that stopped or was killed leaves its queues to the
others).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, ConfigDict

from plait.errors import QuotaExceeded
from plait.protocols.agent_protocol.assistants import check_fields, find_assistant
from plait.protocols.agent_protocol.delayed import aware, claim_delayed, clock_now
from plait.protocols.agent_protocol.documents import SharedDocument, now
from plait.protocols.agent_protocol.not_served import refuse_options
from plait.protocols.agent_protocol.runs import RunCreate, start_queued, start_run
from plait.protocols.agent_protocol.shapes import SortedPage, errors, search_routes
from plait.protocols.agent_protocol.threads import find_thread, make_thread
from plait.protocols.agent_protocol.workers import sweep_queues
from plait.server.caller import Caller, Server
from plait.server.limits import ApiError
from plait.server.users import UserStore

__all__ = ["Scheduler", "crons_router"]

_log = logging.getLogger("plait.server")
_DOC = "crons"
#: What a cron passes to each of its runs.
_PAYLOAD = ("input", "metadata", "config", "context", "webhook", "multitask_strategy")


class CronCreate(BaseModel):
    """What `crons.create` and `create_for_thread` send (the fields plait honours)."""

    model_config = ConfigDict(extra="ignore")

    assistant_id: str
    schedule: str
    input: Any = None
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    webhook: str | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    end_time: datetime | None = None
    enabled: bool | None = None
    timezone: str | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None


class CronPatch(BaseModel):
    """What `crons.update` sends."""

    model_config = ConfigDict(extra="ignore")

    schedule: str | None = None
    end_time: datetime | None = None
    input: Any = None
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    webhook: str | None = None
    enabled: bool | None = None
    timezone: str | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None


class CronSearch(SortedPage):
    """What `crons.search` and `count` send."""

    assistant_id: str | None = None
    thread_id: str | None = None
    enabled: bool | None = None


def _zone(name: str | None) -> ZoneInfo:
    """Return the time zone `name` (None: UTC); `422` for an unknown one."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ApiError(422, f"timezone '{str(name)[:64]}' is not an IANA time zone") from None


def _check_schedule(schedule: str) -> None:
    if len(schedule.split()) != 5 or not croniter.is_valid(schedule):
        raise ApiError(422, f"schedule '{schedule[:128]}' is not a five-field cron schedule")


def next_date(record: dict[str, Any], after: datetime) -> str | None:
    """Return when cron `record` fires next after `after` (ISO 8601, UTC), or None when
    that is past its end time."""
    local = after.astimezone(_zone(record["timezone"]))
    found: datetime = croniter(record["schedule"], local).get_next(datetime)
    found = found.astimezone(UTC)
    end = record["end_time"]
    if end is not None and found > datetime.fromisoformat(end):
        return None
    return found.isoformat()


def _cron_json(cron_id: str, record: dict[str, Any]) -> dict[str, Any]:
    """Return a cron record as the SDK reads it."""
    shown = {k: v for k, v in record.items() if k != "user"}
    return {"cron_id": cron_id, **shown, "user_id": record["user"]}


class Scheduler:
    """Fire the crons of `server`'s store when they are due by its clock, looking every
    `poll` seconds."""

    def __init__(self, server: Server, poll: float) -> None:
        self._server = server
        self._poll = poll

    async def run(self) -> None:
        """Look for due crons every `poll` seconds until cancelled (a failure is logged);
        cancelled, it lets a look under way end first."""
        while True:
            look = asyncio.ensure_future(self.tick())
            try:
                await asyncio.shield(look)
            except asyncio.CancelledError:  # a look under way ends first: a store call
                await asyncio.gather(look, return_exceptions=True)  # is not cut short
                raise
            except Exception:
                _log.exception("the cron scheduler could not look for due crons")
            await asyncio.sleep(self._poll)

    async def tick(self) -> None:
        """Claim the crons and delayed runs due now and start a run of each; then start
        the queued runs of the threads that are free (none of it once the app stops: the
        other workers do it)."""
        if self._server.runs.stopping:
            return
        moment = clock_now(self._server)
        due = await SharedDocument(self._server.store, _DOC).change(
            lambda stored: _claim(stored, moment)
        )
        delayed = await claim_delayed(self._server.store, moment)
        starts = [(f"cron {k}", self._fire(k, record)) for k, record in due]
        starts += [(f"delayed run {k}", self._start(k, start)) for k, start in delayed]
        for what, start in starts:
            try:
                await start
            except (ApiError, QuotaExceeded) as refused:  # its user's quota: not a fault
                _log.warning("%s did not start: %s", what, refused)
            except Exception:
                _log.exception("%s did not start", what)
        await sweep_queues(self._server, self._caller, start_queued)

    async def _start(self, run_id: str, start: dict[str, Any]) -> None:
        """Start delayed run `run_id`, now due, as its user."""
        who = self._caller(start["user"])
        await start_run(who, start["thread_id"], RunCreate(**start["body"]), run_id=run_id)

    def _caller(self, user: str) -> Caller:
        server = self._server
        return Caller(server, user, UserStore(server.store, user, server.index))

    async def _fire(self, cron_id: str, record: dict[str, Any]) -> None:
        """Start the run of one firing of the cron, as its user."""
        who = self._caller(record["user"])
        thread_id = record["thread_id"]
        if thread_id is None:
            made = await make_thread(who, None, {"cron_id": cron_id}, None)
            thread_id = made["thread_id"]
        payload = record["payload"]
        body = RunCreate(assistant_id=record["assistant_id"], **payload)
        await start_run(who, thread_id, body)


def _claim(stored: dict[str, Any], moment: datetime) -> list[tuple[str, dict[str, Any]]]:
    """Move every due cron's next date past `moment`; return the crons so claimed."""
    due = []
    for cron_id, record in stored.items():
        upcoming = record["next_run_date"]
        if not record["enabled"] or upcoming is None:
            continue
        if datetime.fromisoformat(upcoming) <= moment:
            due.append((cron_id, dict(record)))
            stored[cron_id] = {**record, "next_run_date": next_date(record, moment)}
    return due


async def _create(
    who: Caller, body: CronCreate, thread_id: str | None, moment: datetime
) -> dict[str, Any]:
    """Check and store a new cron of the caller; return it as the SDK reads it."""
    refuse_options(body)
    _check_schedule(body.schedule)
    _zone(body.timezone)
    assistant = await find_assistant(who, body.assistant_id)
    for fields in (body.context, (body.config or {}).get("configurable")):
        if fields is not None:
            check_fields(fields)
    if body.webhook is not None:
        await who.server.webhooks.check(body.webhook)
    stamp = now()
    record: dict[str, Any] = {
        "user": who.user,
        "assistant_id": assistant.assistant_id,
        "thread_id": thread_id,
        "on_run_completed": None if thread_id else "keep",
        "schedule": body.schedule,
        "timezone": body.timezone,
        "end_time": None if body.end_time is None else aware(body.end_time).isoformat(),
        "enabled": body.enabled is not False,
        "payload": {k: getattr(body, k) for k in _PAYLOAD if getattr(body, k) is not None},
        "metadata": body.metadata or {},
        "created_at": stamp,
        "updated_at": stamp,
    }
    record["next_run_date"] = next_date(record, moment)
    cron_id = str(uuid.uuid4())

    def add(stored: dict[str, Any]) -> None:
        stored[cron_id] = record

    await SharedDocument(who.server.store, _DOC).change(add)
    return _cron_json(cron_id, record)


def _patch(record: dict[str, Any], body: CronPatch, moment: datetime) -> dict[str, Any]:
    """Return cron `record` changed as `body` asks (its next date read anew)."""
    given = body.model_dump(exclude_unset=True)
    changed = dict(record)
    for key in ("schedule", "timezone", "enabled", "metadata"):
        if given.get(key) is not None:
            changed[key] = given[key]
    if "end_time" in given:
        end = given["end_time"]
        changed["end_time"] = None if end is None else aware(end).isoformat()
    payload = dict(record["payload"])
    for key in ("input", "metadata", "config", "context", "webhook"):
        if given.get(key) is not None:
            payload[key] = given[key]
    changed["payload"] = payload
    changed["next_run_date"] = next_date(changed, moment)
    changed["updated_at"] = now()
    return changed


def _mine(who: Caller, stored: dict[str, Any], cron_id: str) -> dict[str, Any]:
    """Return the caller's cron `cron_id` of `stored`; `404` for none (or another's)."""
    found = stored.get(cron_id)
    if found is None or found["user"] != who.user:
        raise ApiError(404, f"no cron '{cron_id[:128]}'")
    return dict(found)


def _matches(record: dict[str, Any], body: CronSearch, assistant_id: str | None) -> bool:
    metadata = body.metadata or {}
    return (
        (assistant_id is None or record["assistant_id"] == assistant_id)
        and (body.thread_id is None or record["thread_id"] == body.thread_id)
        and (body.enabled is None or record["enabled"] == body.enabled)
        and all(record["metadata"].get(k) == v for k, v in metadata.items())
    )


async def _search(who: Caller, body: CronSearch) -> list[dict[str, Any]]:
    """Return the caller's crons that match `body`, in `sort_by` order (default: newest
    first)."""
    assistant_id = None
    if body.assistant_id is not None:
        assistant_id = (await find_assistant(who, body.assistant_id)).assistant_id
    stored = await SharedDocument(who.server.store, _DOC).read()
    found = [
        _cron_json(cron_id, record)
        for cron_id, record in stored.items()
        if record["user"] == who.user and _matches(record, body, assistant_id)
    ]
    key = body.sort_by or "created_at"
    found.sort(key=lambda cron: str(cron.get(key) or ""), reverse=body.sort_order != "asc")
    return found


def crons_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the cron routes; `caller` is the app's dependency that checks the API key."""
    router = APIRouter(tags=["agent protocol: crons"])
    who_dep: Any = Depends(caller)

    @router.post("/runs/crons", summary="Create a cron", responses=errors(401, 404, 422, 501))
    async def create(body: CronCreate, who: Caller = who_dep) -> dict[str, Any]:
        """Run the assistant on `schedule`, each time on a new thread."""
        return await _create(who, body, None, clock_now(who.server))

    @router.post(
        "/threads/{thread_id}/runs/crons",
        summary="Create a thread's cron",
        responses=errors(401, 404, 422, 501),
    )
    async def create_for_thread(
        thread_id: str, body: CronCreate, who: Caller = who_dep
    ) -> dict[str, Any]:
        """Run the assistant on the thread on `schedule`."""
        await find_thread(who, thread_id)
        return await _create(who, body, thread_id, clock_now(who.server))

    _reading_routes(router, who_dep)
    _changing_routes(router, who_dep)
    return router


def _reading_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes that search and count the caller's crons."""

    search_routes(router, who_dep, "runs/crons", CronSearch, _search, (401, 404))


def _changing_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes that change and delete a cron."""

    @router.patch(
        "/runs/crons/{cron_id}", summary="Change a cron", responses=errors(401, 404, 422, 501)
    )
    async def update(cron_id: str, body: CronPatch, who: Caller = who_dep) -> dict[str, Any]:
        """Change the cron (`enabled` pauses or restarts it); its next date is read anew."""
        refuse_options(body)
        if body.schedule is not None:
            _check_schedule(body.schedule)
        _zone(body.timezone)
        if body.webhook is not None:
            await who.server.webhooks.check(body.webhook)
        moment = clock_now(who.server)

        def edit(stored: dict[str, Any]) -> dict[str, Any]:
            stored[cron_id] = _patch(_mine(who, stored, cron_id), body, moment)
            return _cron_json(cron_id, stored[cron_id])

        return await SharedDocument(who.server.store, _DOC).change(edit)

    @router.delete(
        "/runs/crons/{cron_id}",
        status_code=204,
        summary="Delete a cron",
        responses=errors(401, 404),
    )
    async def delete(cron_id: str, who: Caller = who_dep) -> Response:
        """Delete the cron: it fires no more."""

        def edit(stored: dict[str, Any]) -> None:
            _mine(who, stored, cron_id)
            del stored[cron_id]

        await SharedDocument(who.server.store, _DOC).change(edit)
        return Response(status_code=204)
