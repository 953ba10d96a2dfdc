"""A thread's runs (`/threads/{thread_id}/runs…`): each is a run of the server
(`plait.server.runs.Runs`) in the thread's session.

`stream`, `wait` and `create` (a background run: it answers at once) start a run of the
assistant's agent with the assistant's options (and the run's own `config.configurable` or
`context`, the same `RunOption` fields), on `input` (`{"messages": [...]}`; any other key
is a session value). `command={"resume": value}` resumes the thread's pending interrupt
instead (`{interrupt id: value}` answers several), exactly once: a second resume of the
same pause is `409`. A busy thread refuses a new run (`409`, the `reject` strategy).
`cancel` with `action="interrupt"` stops the run at its next safe point, keeping a
resumable checkpoint; the thread goes on with the next run's input. Each run has a record
in the user's `runs` document: its thread, assistant, metadata, times, the server's
checkpoint id it runs under and, once it ended, its status. A run that names a `webhook`
has that record POSTed there when it ends (`plait.server.webhooks`: checked when the run
starts, signed, retried, beside the run).

Not served yet (`501`, saying so): the `enqueue`, `interrupt` and `rollback` strategies,
`action="rollback"`, `after_seconds` on a streamed run, `interrupt_before`/`interrupt_after`,
`join_stream`, stateless runs (`/runs…`) and the store (`/store…`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from plait.agents.options import RunOption
from plait.errors import CheckpointNotFound
from plait.messages import Message
from plait.protocols.agent_protocol.assistants import check_fields, find_assistant
from plait.protocols.agent_protocol.delayed import clock_now, delay_run, drop_delayed
from plait.protocols.agent_protocol.documents import Document, now
from plait.protocols.agent_protocol.messages import input_messages, message_id, to_sdk
from plait.protocols.agent_protocol.shapes import errors
from plait.protocols.agent_protocol.stream import MODES, ProtocolRelay, run_status
from plait.protocols.agent_protocol.threads import (
    find_thread,
    make_thread,
    note_run,
    thread_status,
)
from plait.run.sessions import SessionDocument
from plait.server.caller import CHECKPOINT_HEADER, Caller
from plait.server.limits import ApiError
from plait.server.runs import LiveRun
from plait.server.sse import EventStream

__all__ = ["RunCreate", "runs_router", "start_run"]

_DOC = "runs"
_FINAL = ("success", "error", "interrupted", "timeout")
_NOT_YET = "is not served by plait yet"


class RunCreate(BaseModel):
    """What `runs.create`, `stream` and `wait` send (the options plait honours)."""

    model_config = ConfigDict(extra="ignore")

    assistant_id: str
    input: Any = None
    command: dict[str, Any] | None = None
    stream_mode: str | list[str] = "values"
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    if_not_exists: Literal["create", "reject"] | None = None
    webhook: str | None = None
    after_seconds: float | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None


def _refuse_what_is_not_served(body: RunCreate) -> None:
    if body.multitask_strategy not in (None, "reject"):
        raise ApiError(501, f"multitask_strategy '{body.multitask_strategy}' {_NOT_YET}")
    for name in ("interrupt_before", "interrupt_after"):
        if getattr(body, name) is not None:
            raise ApiError(501, f"{name} {_NOT_YET}")


def _modes(body: RunCreate) -> frozenset[str]:
    modes = frozenset([body.stream_mode] if isinstance(body.stream_mode, str) else body.stream_mode)
    unknown = sorted(modes - MODES)
    if unknown:
        raise ApiError(422, f"stream_mode {unknown} is not one of {sorted(MODES)}")
    return modes


def _options(body: RunCreate, assistant_options: list[RunOption]) -> list[RunOption]:
    """Return the run's options: the assistant's, then the run's own."""
    fields = {**((body.config or {}).get("configurable") or {}), **(body.context or {})}
    check_fields(fields)
    return [*assistant_options, RunOption(**fields)] if fields else assistant_options


async def _thread(who: Caller, thread_id: str, body: RunCreate) -> dict[str, Any]:
    try:
        return await find_thread(who, thread_id)
    except ApiError:
        if body.if_not_exists != "create":
            raise
    return await make_thread(who, thread_id, {}, "do_nothing")


class _Started:
    """A run just started: its protocol id, thread, server run and record."""

    def __init__(self, run_id: str, thread_id: str, live: LiveRun, record: dict[str, Any]):
        self.run_id = run_id
        self.thread_id = thread_id
        self.live = live
        self.record = record


async def _begin(
    who: Caller, thread_id: str, body: RunCreate, stream: bool, run_id: str | None = None
) -> _Started:
    """Start (or resume) a run of the thread as `body` asks (as run `run_id`, a delayed
    run's, or a new one); return once it has started."""
    _refuse_what_is_not_served(body)
    modes = _modes(body) if stream else frozenset()
    thread = await _thread(who, thread_id, body)
    assistant = await find_assistant(who, body.assistant_id)
    if assistant.graph_id not in who.server.agents:
        raise ApiError(404, f"no graph '{assistant.graph_id[:128]}'")
    options = _options(body, assistant.options())
    await _check_webhook(who, body.webhook)
    status, pending = await thread_status(who, thread)
    if status == "busy":
        raise ApiError(409, f"thread '{thread_id}' is busy; its run must end first")
    run_id = run_id or str(uuid.uuid4())
    document = Document(who, _DOC)
    record = _record(thread_id, assistant.assistant_id, body)
    await document.change(lambda stored: _reserve(stored, thread_id, run_id, record))

    async def ended(final: str) -> None:
        await document.change(lambda stored: _set(stored, run_id, status=final))
        await _run_ended(who, thread_id, run_id, body.webhook)

    resume = body.command is not None and "resume" in body.command
    given, extra = ([], {}) if resume else _input(body.input)
    state = await _state_at_start(who, thread_id, given, extra)
    relay = ProtocolRelay(run_id, thread_id, modes, state, ended)
    streaming = bool({"messages-tuple", "messages"} & modes)
    try:
        if resume:
            assert body.command is not None
            live = await _resume(who, thread, pending, body.command["resume"], relay, options)
        else:
            live = await who.server.runs.start(
                who.store,
                assistant.graph_id,
                given,
                session_id=thread_id,
                session_values=extra or None,
                streaming=streaming,
                relay=relay,
                options=options,
            )
    except BaseException:
        await document.change(lambda stored: stored.pop(run_id, None))
        raise
    await note_run(who, thread_id, live.run_id, assistant.graph_id)
    started = {"checkpoint": live.checkpoint_id, "status": "running"}
    await document.change(lambda stored: _set(stored, run_id, started_only=True, **started))
    return _Started(run_id, thread_id, live, record)


async def _check_webhook(who: Caller, webhook: str | None) -> None:
    """Refuse (`422`) a webhook plait does not send to (`plait.server.webhooks`)."""
    if webhook is not None:
        await who.server.webhooks.check(webhook)


async def _run_ended(who: Caller, thread_id: str, run_id: str, webhook: str | None) -> None:
    """Do what a run's end calls for once its status is recorded: send its record, as
    `get` answers it, to its webhook."""
    if webhook is not None:
        who.server.webhooks.send(webhook, _run_json(await _find_run(who, thread_id, run_id)))


def _record(thread_id: str, assistant_id: str, body: RunCreate) -> dict[str, Any]:
    """Return the record of a new run, `pending`."""
    return {
        "thread_id": thread_id,
        "assistant_id": assistant_id,
        "created_at": now(),
        "updated_at": now(),
        "metadata": body.metadata or {},
        "multitask_strategy": "reject",
        "status": "pending",
        "checkpoint": None,
    }


async def start_run(who: Caller, thread_id: str, body: RunCreate, run_id: str | None = None) -> str:
    """Start a background run of the thread as `body` asks (a cron's firing, or delayed
    run `run_id` now due); return its run id. Raises what `runs.create` answers with
    (`ApiError`); a delayed run that cannot start ends `error`."""
    try:
        return (await _begin(who, thread_id, body, stream=False, run_id=run_id)).run_id
    except ApiError:
        if run_id is not None:
            await Document(who, _DOC).change(lambda stored: _set(stored, run_id, status="error"))
        raise


async def _delay(who: Caller, thread_id: str, body: RunCreate) -> dict[str, Any]:
    """Check a run with `after_seconds` and keep it, `pending`, until it is due
    (`delayed`); return its record."""
    await _thread(who, thread_id, body)
    assistant = await find_assistant(who, body.assistant_id)
    _options(body, assistant.options())
    await _check_webhook(who, body.webhook)
    run_id = str(uuid.uuid4())
    record = {**_record(thread_id, assistant.assistant_id, body)}
    await Document(who, _DOC).change(lambda stored: stored.update({run_id: record}))
    at = clock_now(who.server) + timedelta(seconds=body.after_seconds or 0)
    given = body.model_dump(mode="json", exclude={"after_seconds"}, exclude_none=True)
    await delay_run(who.server.store, run_id, who.user, thread_id, given, at)
    return {"run_id": run_id, **record}


#: How long a run's record alone keeps its thread busy: past it, the thread's real run says
#: (a record left by a process that died while starting a run does not block the thread).
_RESERVED_SECONDS = 60.0


def _reserve(stored: dict[str, Any], thread_id: str, run_id: str, record: dict[str, Any]) -> None:
    """Add `record` as the thread's new run, in the same write that checks no other run of
    the thread is starting or running: of two runs started at once, one is refused."""
    for key, other in stored.items():
        if (
            key != run_id
            and other.get("thread_id") == thread_id
            and other.get("status") in ("pending", "running")
        ):
            age = datetime.now(UTC) - datetime.fromisoformat(other["created_at"])
            if age.total_seconds() < _RESERVED_SECONDS:
                raise ApiError(409, f"thread '{thread_id}' is busy; its run must end first")
    stored[run_id] = record


def _input(value: Any) -> tuple[list[Message], dict[str, Any]]:
    """Return the messages of a run's input and its other keys (session values)."""
    extra = (
        {k: v for k, v in value.items() if k != "messages"} if isinstance(value, Mapping) else {}
    )
    return input_messages(value), extra


async def _state_at_start(
    who: Caller, thread_id: str, given: list[Message], extra: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Return the thread's messages (in the SDK's shape) and values as a run starts."""
    session = await who.sessions.read(thread_id) or SessionDocument()
    kept = [*session.messages, *(("user", m) for m in given)]
    messages = [to_sdk(m, message_id(thread_id, i), a) for i, (a, m) in enumerate(kept)]
    return messages, {**session.values, **extra}


def _set(stored: dict[str, Any], run_id: str, *, started_only: bool = False, **fields: Any) -> None:
    """Change the record of run `run_id` (`started_only`: unless it has ended already)."""
    found = stored.get(run_id)
    if found is None or (started_only and found["status"] in _FINAL):
        if found is not None and started_only:
            stored[run_id] = {**found, "checkpoint": fields.get("checkpoint")}
        return
    stored[run_id] = {**found, **fields, "updated_at": now()}


async def _resume(
    who: Caller,
    thread: dict[str, Any],
    pending: list[dict[str, Any]],
    value: Any,
    relay: ProtocolRelay,
    options: list[RunOption],
) -> LiveRun:
    """Resume the thread's paused run with `value` (or `{interrupt id: value}`)."""
    if not pending or thread.get("run") is None:
        raise ApiError(409, "the thread has no pending interrupt to resume")
    summary = await who.server.runs.summary(who.store, thread["run"])
    if summary.checkpoint_id is None:
        raise ApiError(409, "the thread has no pending interrupt to resume")
    ids = {p["id"] for p in pending}
    if isinstance(value, dict) and value and set(value) <= ids:
        targets: dict[str, Any] | None = dict(value)
        answer = None
    else:
        targets, answer = None, (value,)
    return await who.server.runs.resume(
        who.store, summary.checkpoint_id, targets, answer, relay=relay, options=options
    )


async def _find_run(who: Caller, thread_id: str, run_id: str) -> dict[str, Any]:
    """Return the caller's run `run_id` of thread `thread_id`, its status up to date.

    Raises:
        ApiError: `404`, no such run of this user's thread.
    """
    found = (await Document(who, _DOC).read()).get(run_id)
    if found is None or found["thread_id"] != thread_id:
        raise ApiError(404, f"no run '{run_id[:128]}' of thread '{thread_id[:128]}'")
    if found["status"] not in _FINAL and found["checkpoint"] is not None:
        try:
            summary = await who.server.runs.summary(who.store, found["checkpoint"])
            found = {**found, "status": run_status(summary)}
        except CheckpointNotFound:
            pass
    return {"run_id": run_id, **found}


def _run_json(run: dict[str, Any]) -> dict[str, Any]:
    """Return a run record as the SDK reads it."""
    shown = {k: v for k, v in run.items() if k != "checkpoint"}
    return {**shown, "kwargs": {}}


async def _thread_values(who: Caller, thread_id: str) -> dict[str, Any]:
    """Return the thread's values, with `__interrupt__` while it waits for an answer."""
    thread = await find_thread(who, thread_id)
    session = await who.sessions.read(thread_id) or SessionDocument()
    messages = [to_sdk(m, message_id(thread_id, i), a) for i, (a, m) in enumerate(session.messages)]
    values: dict[str, Any] = {**session.values, "messages": messages}
    status, pending = await thread_status(who, thread)
    if status == "interrupted":
        values["__interrupt__"] = pending
    return values


async def _join(who: Caller, thread_id: str, run_id: str) -> dict[str, Any]:
    """Wait for the run to end (whichever process runs it); return the thread's values."""
    # the run may be another process's: its end is seen in the store
    while (await _find_run(who, thread_id, run_id))["status"] in ("pending", "running"):  # noqa: ASYNC110
        await asyncio.sleep(who.server.runs.cancel_poll)
    return await _thread_values(who, thread_id)


async def _wait(who: Caller, thread_id: str, body: RunCreate) -> Response:
    if body.after_seconds:  # whichever worker starts it, its end is seen in the store
        delayed = await _delay(who, thread_id, body)
        return JSONResponse(await _join(who, thread_id, delayed["run_id"]))
    started = await _begin(who, thread_id, body, stream=False)
    summary, _ = await started.live.outcome()
    headers = _headers(started)
    if summary.status == "failed" and summary.error is not None:
        error = {"error": summary.error.type, "message": summary.error.message}
        return JSONResponse({"__error__": error}, headers=headers)
    return JSONResponse(await _thread_values(who, thread_id), headers=headers)


def _headers(started: _Started) -> dict[str, str]:
    return {
        CHECKPOINT_HEADER: started.live.checkpoint_id,
        "content-location": f"/threads/{started.thread_id}/runs/{started.run_id}",
    }


def runs_router(caller: Callable[..., Any]) -> APIRouter:
    """Return a thread's run routes (and the `501`s of what is not served yet); `caller`
    is the app's dependency that checks the API key."""
    router = APIRouter(tags=["agent protocol: runs"])
    who_dep: Any = Depends(caller)
    _starting_routes(router, who_dep)
    _run_routes(router, who_dep)
    _ending_routes(router, who_dep)
    _not_yet_routes(router, who_dep)
    return router


_STARTING = errors(401, 404, 409, 422, 501)


def _starting_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes that start (or resume) a thread's run."""

    @router.post("/threads/{thread_id}/runs/stream", summary="Stream a run", responses=_STARTING)
    async def stream(thread_id: str, body: RunCreate, who: Caller = who_dep) -> Response:
        """Run the assistant on the thread; answer with its events in `stream_mode`."""
        if body.after_seconds:
            raise ApiError(501, f"after_seconds on a streamed run {_NOT_YET}")
        started = await _begin(who, thread_id, body, stream=True)
        return EventStream(started.live, _headers(started))

    @router.post("/threads/{thread_id}/runs/wait", summary="Run and wait", responses=_STARTING)
    async def wait(thread_id: str, body: RunCreate, who: Caller = who_dep) -> Response:
        """Run the assistant on the thread; answer with the thread's values at its end."""
        return await _wait(who, thread_id, body)

    @router.post("/threads/{thread_id}/runs", summary="Start a run", responses=_STARTING)
    async def create(thread_id: str, body: RunCreate, who: Caller = who_dep) -> JSONResponse:
        """Start a background run of the assistant on the thread (after `after_seconds`);
        answer at once."""
        if body.after_seconds:
            return JSONResponse(_run_json(await _delay(who, thread_id, body)))
        started = await _begin(who, thread_id, body, stream=False)
        run = await _find_run(who, thread_id, started.run_id)
        return JSONResponse(_run_json(run), headers=_headers(started))


def _run_routes(router: APIRouter, who_dep: Any) -> None:
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
        stored = await Document(who, _DOC).read()
        keys = [key for key, run in stored.items() if run["thread_id"] == thread_id]
        runs = [await _find_run(who, thread_id, key) for key in reversed(keys)]
        runs = [run for run in runs if status is None or run["status"] == status]
        return [_run_json(run) for run in runs[offset : offset + limit]]

    @router.get(
        "/threads/{thread_id}/runs/{run_id}", summary="Read a run", responses=errors(401, 404)
    )
    async def get(thread_id: str, run_id: str, who: Caller = who_dep) -> dict[str, Any]:
        """Return the run with its status."""
        return _run_json(await _find_run(who, thread_id, run_id))

    @router.get(
        "/threads/{thread_id}/runs/{run_id}/join",
        summary="Wait for a run",
        responses=errors(401, 404),
    )
    async def join(thread_id: str, run_id: str, who: Caller = who_dep) -> dict[str, Any]:
        """Wait for the run to end; return the thread's values."""
        return await _join(who, thread_id, run_id)


def _ending_routes(router: APIRouter, who_dep: Any) -> None:
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
        """Stop the run at its next safe point, keeping a resumable checkpoint."""
        if action == "rollback":
            raise ApiError(501, f"cancel with action 'rollback' {_NOT_YET}")
        run = await _find_run(who, thread_id, run_id)
        if run["status"] in ("pending", "running") and run["checkpoint"] is not None:
            await who.server.runs.cancel(who.store, run["checkpoint"])
        elif await drop_delayed(who.server.store, run_id, who.user):  # it never starts
            await Document(who, _DOC).change(lambda s: _set(s, run_id, status="interrupted"))
        if wait:
            await _join(who, thread_id, run_id)
        return _run_json(await _find_run(who, thread_id, run_id))

    @router.delete(
        "/threads/{thread_id}/runs/{run_id}",
        status_code=204,
        summary="Delete a run",
        responses=errors(401, 404, 409),
    )
    async def delete(thread_id: str, run_id: str, who: Caller = who_dep) -> Response:
        """Delete the record of an ended run."""
        run = await _find_run(who, thread_id, run_id)
        if run["status"] in ("pending", "running"):
            raise ApiError(409, f"run '{run_id}' is running; cancel it first")
        await Document(who, _DOC).change(lambda stored: stored.pop(run_id, None))
        return Response(status_code=204)


def _not_yet_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes of what is not served yet: each answers `501`, naming it."""

    def refuse(what: str) -> Callable[..., Any]:
        async def not_yet(who: Caller = who_dep) -> None:
            raise ApiError(501, f"{what} {_NOT_YET}")

        not_yet.__doc__ = f"Answer `501`: {what} {_NOT_YET}."
        return not_yet

    for method, path, what in (
        ("GET", "/threads/{thread_id}/runs/{run_id}/stream", "join_stream"),
        ("POST", "/runs", "a stateless run"),
        ("POST", "/runs/stream", "a stateless run"),
        ("POST", "/runs/wait", "a stateless run"),
        ("POST", "/runs/batch", "a batch of stateless runs"),
        ("PUT", "/store/items", "the store"),
        ("GET", "/store/items", "the store"),
        ("DELETE", "/store/items", "the store"),
        ("POST", "/store/items/search", "the store"),
        ("POST", "/store/namespaces", "the store"),
    ):
        router.add_api_route(
            path,
            refuse(what),
            methods=[method],
            summary=f"Not served yet: {what}",
            responses=errors(401, 501),
        )
