"""A thread's runs (`/threads/{thread_id}/runs…`): each is a run of the server
(`plait.server.runs.Runs`) in the thread's session.

`stream`, `wait` and `create` (a background run: it answers at once) start a run of the
assistant's agent with the assistant's options (and the run's own `config.configurable` or
`context`, the same `RunOption` fields), on `input` (`{"messages": [...]}`; any other key
is a session value). `command={"resume": value}` resumes the thread's pending interrupt
instead (`{interrupt id: value}` answers several), exactly once: a second resume of the
same pause is `409`. A run on a busy thread does what its `multitask_strategy` says
(`plait.protocols.agent_protocol.multitask`: `reject`, the default, is `409`). `cancel`
with `action="interrupt"` stops the run at its next safe point, keeping a resumable
checkpoint until the thread goes on (its turn is then added to the thread, and it is
resumable no more); `action="rollback"` then removes the run's turn from the thread.
`join_stream` re-attaches to a run's stream (`plait.protocols.agent_protocol.replay`);
`on_disconnect="cancel"` cancels a streamed run whose client leaves before it ends. Each
run has a record in its thread's runs document: its thread, assistant, metadata, times,
the server's checkpoint id it runs under and, once it ended, its status. A run that names
a `webhook` has that record POSTed there when it ends (`plait.server.webhooks`: checked
when the run starts, signed, retried, beside the run); one with `after_seconds` waits,
`pending`, until a worker's scheduler starts it
(`plait.protocols.agent_protocol.delayed`).

Not served yet (`501`, saying so): `after_seconds` on a streamed run,
`interrupt_before`/`interrupt_after` (`not_served`) and a `checkpoint` before the thread's
state now (`state`). Stateless runs (`/runs…`) run here on a temporary thread
(`plait.protocols.agent_protocol.stateless`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse

from plait.agents.options import RunOption
from plait.messages import Message
from plait.protocols.agent_protocol.assistants import Assistant, check_fields, find_assistant
from plait.protocols.agent_protocol.delayed import clock_now, delay_run, drop_delayed
from plait.protocols.agent_protocol.documents import Document, now
from plait.protocols.agent_protocol.messages import new_id, split_input, state_at_start
from plait.protocols.agent_protocol.multitask import (
    finish,
    finish_run,
    keep_stopped_turns,
    mark_stop,
    rewind,
    stop_runs,
)
from plait.protocols.agent_protocol.not_served import NOT_YET, refuse_options
from plait.protocols.agent_protocol.records import (
    FINAL,
    check_webhook,
    find_run,
    new_record,
    run_ended,
    run_json,
    thread_values,
)
from plait.protocols.agent_protocol.replay import ResumableStream, RunLog, RunLogs, event_id
from plait.protocols.agent_protocol.shapes import RunCreate, errors
from plait.protocols.agent_protocol.state import check_checkpoint, resume_targets
from plait.protocols.agent_protocol.stream import ProtocolRelay, final_log, stream_modes
from plait.protocols.agent_protocol.thread_records import runs_document, thread_document
from plait.protocols.agent_protocol.threads import (
    find_or_make_thread,
    find_thread,
    forget_run,
    last_step,
    note_run,
    thread_session,
    thread_status,
)
from plait.protocols.agent_protocol.workers import reserve_run, start_next
from plait.run.sessions import decode_session
from plait.server.bodies import RunSummary
from plait.server.caller import CHECKPOINT_HEADER, Caller
from plait.server.limits import ApiError
from plait.server.runs import LiveRun

__all__ = [
    "RunCreate",
    "cancel_run",
    "create_run",
    "join_run",
    "runs_router",
    "start_queued",
    "start_run",
    "stream_run",
    "wait_run",
]


def _options(body: RunCreate, assistant_options: list[RunOption]) -> list[RunOption]:
    """Return the run's options: the assistant's, then the run's own."""
    fields = {**((body.config or {}).get("configurable") or {}), **(body.context or {})}
    if fields:  # (none to check when the run adds no option)
        check_fields(fields)
    return [*assistant_options, RunOption(**fields)] if fields else assistant_options


async def _thread(
    who: Caller, thread_id: str, body: RunCreate, document: Document
) -> dict[str, Any]:
    if body.if_not_exists == "create":
        return await find_or_make_thread(who, thread_id, document)
    return await find_thread(who, thread_id, document)


@dataclass(slots=True)
class _Started:
    """A run just started: its protocol id, thread, server run and its log of events."""

    run_id: str
    thread_id: str
    live: LiveRun
    log: RunLog


@dataclass(slots=True)
class _Reserved:
    """A run `_begin` reserved: its assistant, its options and stream modes (as checked),
    the stopped turns it is to keep, and its thread's two documents as the reservation left
    them (its changes start from there)."""

    assistant: Assistant
    options: list[RunOption]
    modes: frozenset[str]
    stopped: dict[str, str]
    thread: Document
    runs: Document


async def _begin(
    who: Caller, thread_id: str, body: RunCreate, logs: RunLogs, run_id: str | None = None
) -> _Started | str:
    """Start (or resume) a run of the thread as `body` asks (as run `run_id`, a delayed
    run's, or a new one) and return it once it has started, or queue it on a busy thread
    (`multitask_strategy`) and return its id."""
    refuse_options(body)
    modes = stream_modes(body.stream_mode)
    documents = thread_document(who, thread_id), runs_document(who, thread_id)
    if body.if_not_exists == "create":  # (as `_thread` does)
        thread = await find_or_make_thread(who, thread_id, documents[0])
    else:
        thread = await find_thread(who, thread_id, documents[0])
    if body.checkpoint is not None or body.checkpoint_id is not None:
        await check_checkpoint(who, thread_id, body.checkpoint, body.checkpoint_id)
    assistant = await find_assistant(who, body.assistant_id)
    if assistant.graph_id not in who.server.agents:
        raise ApiError(404, f"no graph '{assistant.graph_id[:128]}'")
    options = _options(body, assistant.options())
    if body.webhook is not None:
        await check_webhook(who, body.webhook)
    strategy = body.multitask_strategy or "reject"
    ran = thread.get("run") is not None  # (a thread with no run yet is idle)
    if strategy == "reject" and ran and (await thread_status(who, thread))[0] == "busy":
        raise ApiError(409, f"thread '{thread_id}' is busy; its run must end first")
    run_id = run_id or new_id()
    record = new_record(thread_id, assistant.assistant_id, body)
    request = partial(body.model_dump, mode="json")  # kept with a queued run only
    fresh = bool(thread.get("new"))  # made by this request
    stop, stopped = await reserve_run(
        who, thread_id, run_id, record, strategy, request, documents[1], fresh
    )
    if stop is None:
        kept = _Reserved(assistant, options, modes, stopped, *documents)
        return await _launch(who, thread_id, run_id, body, logs, kept)
    await stop_runs(who, stop)
    await start_next(who, thread_id, _launcher(who, thread_id, logs))  # it may be free now
    return run_id


def _launcher(
    who: Caller, thread_id: str, logs: RunLogs
) -> Callable[[str, dict[str, Any]], Awaitable[object]]:
    """Return how a queued run of the thread is started, from its stored request."""

    async def launch(run_id: str, request: dict[str, Any]) -> object:
        return await _launch(who, thread_id, run_id, RunCreate.model_validate(request), logs)

    return launch


async def _launch(
    who: Caller,
    thread_id: str,
    run_id: str,
    body: RunCreate,
    logs: RunLogs,
    reserved: _Reserved | None = None,
) -> _Started:
    """Start the run `run_id` reserved on the thread (`reserved`: as `_begin` did it; else a
    queued run claimed); when it ends, its record says so (a rolled-back run's turn is
    removed) and the thread's next queued run starts."""
    thread_doc = reserved.thread if reserved else thread_document(who, thread_id)
    document = reserved.runs if reserved else runs_document(who, thread_id)
    if reserved is None or reserved.stopped:
        await keep_stopped_turns(who, thread_id, reserved.stopped if reserved else None)
    before = await who.store.get_session(thread_id)

    queued = [True]  # the thread had queued runs as this one ended: `then` starts one

    async def ended(final: str, summary: RunSummary) -> None:
        at = summary.checkpoint_id if summary.status == "cancelled" else None
        edit = partial(finish_run, thread_id=thread_id, run_id=run_id, status=final, at=at)
        found, queued[0] = await document.change(edit, document.last)
        if found is not None and found.get("stop") == "rollback":
            await rewind(who, thread_id, before)
            await forget_run(who, thread_id, found.get("checkpoint"))
        if body.webhook is not None:
            await run_ended(who, thread_id, run_id, body.webhook)

    async def then() -> None:
        if queued[0]:
            await start_next(who, thread_id, _launcher(who, thread_id, logs))

    resume = body.command is not None and "resume" in body.command
    taken = ([], {}) if resume else split_input(body.input)  # its messages and values
    session = decode_session(thread_id, before)
    if resume:  # the thread as it waits: its paused run's turn is not in its session yet
        session = await thread_session(who, thread_id, await find_thread(who, thread_id))
    state = state_at_start(thread_id, session, *taken)
    log = logs.open(run_id)
    modes = reserved.modes if reserved else stream_modes(body.stream_mode)
    relay = ProtocolRelay(run_id, thread_id, modes, state, ended, log, then)
    try:
        if reserved is None:
            assistant = await find_assistant(who, body.assistant_id)
            options = _options(body, assistant.options())
        else:
            assistant, options = reserved.assistant, reserved.options
        live = await _start(who, thread_id, body, (assistant, options, thread_doc), relay, taken)
    except BaseException:
        await document.change(lambda stored: stored.pop(run_id, None), document.last)
        log.end()
        raise
    started = {"checkpoint": live.checkpoint_id, "status": "running"}
    stop = await document.change(
        lambda stored: _set(stored, run_id, started_only=True, **started), document.last
    )
    if stop is not None:  # a double text or a cancel came while it started
        await who.server.runs.cancel(who.store, live.checkpoint_id)
    return _Started(run_id, thread_id, live, log)


async def _start(
    who: Caller,
    thread_id: str,
    body: RunCreate,
    of: tuple[Assistant, list[RunOption], Document],
    relay: ProtocolRelay,
    given: tuple[list[Message], dict[str, Any]],
) -> LiveRun:
    """Start the server's run of `body` on the thread (or resume its pause), `of` the
    assistant with the run's options and the thread's document; it is noted there."""
    assistant, options, document = of
    after = 0  # the steps its checkpoint kept before it: none for a new run
    if body.command is not None and "resume" in body.command:
        thread = await find_thread(who, thread_id)
        _, pending = await thread_status(who, thread)
        resumed = await _resume(who, thread, pending, body.command["resume"], relay, options)
        live, after = resumed
    else:
        live = await who.server.runs.start(
            who.store,
            assistant.graph_id,
            given[0],
            session_id=thread_id,
            session_values=given[1] or None,
            streaming=bool({"messages-tuple", "messages"} & relay.modes),
            relay=relay,
            options=options,
            queue=body.multitask_strategy == "enqueue",  # a user's full quota queues it too
        )
    kept = (live.checkpoint_id, relay.run_id, after)  # its steps, for the thread's history
    await note_run(who, thread_id, live.run_id, assistant.graph_id, kept, document)
    return live


async def start_queued(who: Caller, thread_id: str) -> None:
    """Start the thread's next queued run if the thread is free (a worker's sweep)."""
    await start_next(who, thread_id, _launcher(who, thread_id, RunLogs()))


async def start_run(who: Caller, thread_id: str, body: RunCreate, run_id: str | None = None) -> str:
    """Start a background run of the thread as `body` asks (a cron's firing, or delayed
    run `run_id` now due); return its run id. Raises what `runs.create` answers with
    (`ApiError`); a delayed run that cannot start ends `error`."""
    try:
        begun = await _begin(who, thread_id, body, RunLogs(), run_id=run_id)
        return begun if isinstance(begun, str) else begun.run_id
    except ApiError:
        if run_id is not None:
            await runs_document(who, thread_id).change(
                lambda stored: _set(stored, run_id, status="error")
            )
        raise


async def _delay(who: Caller, thread_id: str, body: RunCreate) -> dict[str, Any]:
    """Check a run with `after_seconds` and keep it, `pending`, until it is due
    (`delayed`); return its record."""
    await _thread(who, thread_id, body, thread_document(who, thread_id))
    assistant = await find_assistant(who, body.assistant_id)
    _options(body, assistant.options())
    await check_webhook(who, body.webhook)
    run_id = new_id()
    record = new_record(thread_id, assistant.assistant_id, body)
    await runs_document(who, thread_id).change(lambda stored: stored.update({run_id: record}))
    at = clock_now(who.server) + timedelta(seconds=body.after_seconds or 0)
    given = body.model_dump(mode="json", exclude={"after_seconds"}, exclude_none=True)
    await delay_run(who.server.store, run_id, who.user, thread_id, given, at)
    return {"run_id": run_id, **record}


def _set(
    stored: dict[str, Any], run_id: str, *, started_only: bool = False, **fields: Any
) -> str | None:
    """Change the record of run `run_id` (`started_only`: unless it has ended already);
    return how it is to be stopped, if a double text or a cancel asked."""
    found = stored.get(run_id)
    if found is None or (started_only and found["status"] in FINAL):
        if found is not None and started_only:
            stored[run_id] = {**found, "checkpoint": fields.get("checkpoint")}
        return None
    stored[run_id] = {**found, **fields, "updated_at": now()}
    return found.get("stop")  # type: ignore[no-any-return]


async def _resume(
    who: Caller,
    thread: dict[str, Any],
    pending: list[dict[str, Any]],
    value: Any,
    relay: ProtocolRelay,
    options: list[RunOption],
) -> tuple[LiveRun, int]:
    """Resume the thread's paused run with `value` (or `{interrupt id: value}`); return it
    and the number of the last step its checkpoint kept before."""
    if not pending or thread.get("run") is None:
        raise ApiError(409, "the thread has no pending interrupt to resume")
    summary = await who.server.runs.summary(who.store, thread["run"])
    if summary.checkpoint_id is None:
        raise ApiError(409, "the thread has no pending interrupt to resume")
    targets, answer = resume_targets(value, {p["id"] for p in pending})
    after = await last_step(who, summary.checkpoint_id)
    live = await who.server.runs.resume(
        who.store, summary.checkpoint_id, targets, answer, relay=relay, options=options
    )
    return live, after


async def join_run(who: Caller, thread_id: str, run_id: str, logs: RunLogs) -> dict[str, Any]:
    """Wait for the run to end (whichever process runs it; a queued one is started when
    its thread is free); return the thread's values."""
    while True:
        run = await find_run(who, thread_id, run_id)
        if run["status"] not in ("pending", "running"):
            return await thread_values(who, thread_id)
        if run.get("queued"):
            await start_next(who, thread_id, _launcher(who, thread_id, logs))
        log = logs.get(run_id)
        if log is not None and not log.ended:
            await log.wait_end()
        else:  # the run may be another process's: its end is seen in the store
            await asyncio.sleep(who.server.runs.cancel_poll)


async def _follow(
    who: Caller,
    thread_id: str,
    run_id: str,
    logs: RunLogs,
    after: int | None,
    modes: frozenset[str],
    on_leave: Callable[[], Awaitable[None]] | None,
) -> Response:
    """Stream the run's events after event id `after` in `modes` (all: empty) and as they
    come, once it has started; a run this process does not hold is waited for, and its
    stream is `metadata`, the thread's final values and `end`."""
    headers = {"content-location": f"/threads/{thread_id}/runs/{run_id}"}
    while True:
        log = await logs.wait(run_id, who.server.runs.cancel_poll)
        if log is not None:
            return ResumableStream(log.follow(after, modes), headers, log, on_leave)
        run = await find_run(who, thread_id, run_id)
        if run["status"] != "pending":
            break
        if run.get("queued"):
            await start_next(who, thread_id, _launcher(who, thread_id, logs))
    log = final_log(run_id, await join_run(who, thread_id, run_id, logs))
    return ResumableStream(log.follow(None, frozenset()), headers, log, None)


async def cancel_run(who: Caller, thread_id: str, run_id: str, action: str) -> None:
    """Stop the run at its next safe point (`rollback`: then remove its turn from the
    thread); a queued run leaves the queue."""
    await find_run(who, thread_id, run_id)
    document = runs_document(who, thread_id)
    checkpoint = await document.change(lambda stored: mark_stop(stored, run_id, action))
    if checkpoint is not None:
        await stop_runs(who, [(run_id, checkpoint)])
    elif await drop_delayed(who.server.store, run_id, who.user):  # a delayed run: it never starts
        await document.change(lambda stored: finish(stored, run_id, "interrupted"))


def _leaving(
    who: Caller, thread_id: str, run_id: str, cancel: bool
) -> Callable[[], Awaitable[None]] | None:
    """Return what a stream's client leaving before the run ends does (`cancel`: cancel
    the run, as `on_disconnect="cancel"` asks)."""
    if not cancel:
        return None

    async def leave() -> None:
        await cancel_run(who, thread_id, run_id, "interrupt")

    return leave


async def stream_run(who: Caller, thread_id: str, body: RunCreate, logs: RunLogs) -> Response:
    begun = await _begin(who, thread_id, body, logs)
    run_id = begun if isinstance(begun, str) else begun.run_id
    leave = _leaving(who, thread_id, run_id, True) if body.on_disconnect == "cancel" else None
    if isinstance(begun, str):
        return await _follow(who, thread_id, begun, logs, None, frozenset(), leave)
    return ResumableStream(begun.live, _headers(begun), begun.log, leave)


async def wait_run(who: Caller, thread_id: str, body: RunCreate, logs: RunLogs) -> Response:
    if body.after_seconds:  # whichever worker starts it, its end is seen in the store
        delayed = await _delay(who, thread_id, body)
        return JSONResponse(await join_run(who, thread_id, delayed["run_id"], logs))
    started = await _begin(who, thread_id, body, logs)
    if isinstance(started, str):
        headers = {"content-location": f"/threads/{thread_id}/runs/{started}"}
        return JSONResponse(await join_run(who, thread_id, started, logs), headers=headers)
    summary, _ = await started.live.outcome()
    headers = _headers(started)
    if summary.status == "failed" and summary.error is not None:
        error = {"error": summary.error.type, "message": summary.error.message}
        return JSONResponse({"__error__": error}, headers=headers)
    return JSONResponse(await thread_values(who, thread_id), headers=headers)


async def create_run(who: Caller, thread_id: str, body: RunCreate, logs: RunLogs) -> JSONResponse:
    """Start a background run of the thread (after `after_seconds`); answer its record."""
    if body.after_seconds:
        return JSONResponse(run_json(await _delay(who, thread_id, body)))
    begun = await _begin(who, thread_id, body, logs)
    run_id = begun if isinstance(begun, str) else begun.run_id
    run = await find_run(who, thread_id, run_id)
    headers = {"content-location": f"/threads/{thread_id}/runs/{run_id}"}
    if isinstance(begun, _Started):
        headers = _headers(begun)
    return JSONResponse(run_json(run), headers=headers)


def _headers(started: _Started) -> dict[str, str]:
    return {
        CHECKPOINT_HEADER: started.live.checkpoint_id,
        "content-location": f"/threads/{started.thread_id}/runs/{started.run_id}",
    }


def runs_router(caller: Callable[..., Any], logs: RunLogs) -> APIRouter:
    """Return a thread's run routes; `caller` is the app's dependency that checks the API
    key, `logs` keeps the events of this process's runs, for clients that re-attach."""
    router = APIRouter(tags=["agent protocol: runs"])
    who_dep: Any = Depends(caller)
    _starting_routes(router, who_dep, logs)
    _run_routes(router, who_dep, logs)
    _ending_routes(router, who_dep, logs)
    return router


_STARTING = errors(401, 404, 409, 422, 501)


def _starting_routes(router: APIRouter, who_dep: Any, logs: RunLogs) -> None:
    """Add the routes that start (or resume) a thread's run."""

    @router.post("/threads/{thread_id}/runs/stream", summary="Stream a run", responses=_STARTING)
    async def stream(thread_id: str, body: RunCreate, who: Caller = who_dep) -> Response:
        """Run the assistant on the thread; answer with its events in `stream_mode`."""
        if body.after_seconds:
            raise ApiError(501, f"after_seconds on a streamed run {NOT_YET}")
        return await stream_run(who, thread_id, body, logs)

    @router.post("/threads/{thread_id}/runs/wait", summary="Run and wait", responses=_STARTING)
    async def wait(thread_id: str, body: RunCreate, who: Caller = who_dep) -> Response:
        """Run the assistant on the thread; answer with the thread's values at its end."""
        return await wait_run(who, thread_id, body, logs)

    @router.post("/threads/{thread_id}/runs", summary="Start a run", responses=_STARTING)
    async def create(thread_id: str, body: RunCreate, who: Caller = who_dep) -> JSONResponse:
        """Start a background run of the assistant on the thread (after `after_seconds`);
        answer at once."""
        return await create_run(who, thread_id, body, logs)


def _run_routes(router: APIRouter, who_dep: Any, logs: RunLogs) -> None:
    """Add the routes that list, read, join, cancel and delete a thread's runs."""

    @router.get("/threads/{thread_id}/runs", summary="List runs", responses=errors(401, 404))
    async def list_runs(
        thread_id: str,
        who: Caller = who_dep,
        limit: int = 10,
        offset: int = 0,
        status: str | None = None,
    ) -> list[dict[str, Any]]:
        """Return the thread's runs, newest first."""
        await find_thread(who, thread_id)
        stored = await runs_document(who, thread_id).read()
        keys = [key for key, run in stored.items() if run["thread_id"] == thread_id]
        runs = [await find_run(who, thread_id, key) for key in reversed(keys)]
        runs = [run for run in runs if status is None or run["status"] == status]
        return [run_json(run) for run in runs[offset : offset + limit]]

    @router.get(
        "/threads/{thread_id}/runs/{run_id}", summary="Read a run", responses=errors(401, 404)
    )
    async def get(thread_id: str, run_id: str, who: Caller = who_dep) -> dict[str, Any]:
        """Return the run with its status."""
        return run_json(await find_run(who, thread_id, run_id))

    @router.get(
        "/threads/{thread_id}/runs/{run_id}/join",
        summary="Wait for a run",
        responses=errors(401, 404),
    )
    async def join(thread_id: str, run_id: str, who: Caller = who_dep) -> dict[str, Any]:
        """Wait for the run to end; return the thread's values."""
        return await join_run(who, thread_id, run_id, logs)

    @router.get(
        "/threads/{thread_id}/runs/{run_id}/stream",
        summary="Re-attach to a run's stream",
        responses=errors(401, 404, 422),
    )
    async def join_stream(
        thread_id: str,
        run_id: str,
        request: Request,
        who: Caller = who_dep,
        cancel_on_disconnect: bool = False,
        stream_mode: list[str] | None = Query(None),  # noqa: B008 - FastAPI's way
    ) -> Response:
        """Stream the run's events after `Last-Event-ID` (all without it), then as they
        come, to its end."""
        await find_run(who, thread_id, run_id)
        after = event_id(request.headers.get("last-event-id"))
        modes = frozenset(mode for mode in stream_mode or () if mode)
        leave = _leaving(who, thread_id, run_id, cancel_on_disconnect)
        return await _follow(who, thread_id, run_id, logs, after, modes, leave)


def _ending_routes(router: APIRouter, who_dep: Any, logs: RunLogs) -> None:
    """Add the routes that cancel and delete a thread's runs."""

    @router.post(
        "/threads/{thread_id}/runs/{run_id}/cancel",
        summary="Cancel a run",
        responses=errors(401, 404, 501),
    )
    async def cancel(
        thread_id: str,
        run_id: str,
        who: Caller = who_dep,
        wait: int = 0,
        action: Literal["interrupt", "rollback"] = "interrupt",
    ) -> Any:
        """Stop the run at its next safe point, keeping a resumable checkpoint
        (`rollback`: its turn is then removed from the thread)."""
        await cancel_run(who, thread_id, run_id, action)
        if wait:
            await join_run(who, thread_id, run_id, logs)
        return run_json(await find_run(who, thread_id, run_id))

    @router.delete(
        "/threads/{thread_id}/runs/{run_id}",
        status_code=204,
        summary="Delete a run",
        responses=errors(401, 404, 409),
    )
    async def delete(thread_id: str, run_id: str, who: Caller = who_dep) -> Response:
        """Delete the record of an ended run."""
        run = await find_run(who, thread_id, run_id)
        if run["status"] in ("pending", "running"):
            raise ApiError(409, f"run '{run_id}' is running; cancel it first")
        await runs_document(who, thread_id).change(lambda stored: stored.pop(run_id, None))
        return Response(status_code=204)
