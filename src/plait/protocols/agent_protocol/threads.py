"""Threads (`/threads…`): a thread is a plait session (`thread_id` = session id).

The session holds the thread's messages and values; the user's `threads` document
(`plait.protocols.agent_protocol.documents`) holds what a session does not: each thread's
metadata, times, and its latest run (the server's run id), whose summary gives the
thread's status (`busy` while it runs, `interrupted` while it waits for an answer, `error`
after a failure, else `idle`) and pending interrupts. A thread's values are
`{"messages": [...]}` (in the SDK's shape, `plait.protocols.agent_protocol.messages`) plus
the session values. `update_state` writes session values and appends messages (the
caller's as the user's; any other as `as_node`'s, or the thread's `graph_id`'s).
`get_history` lists the thread after each of its turns, newest first, from the session's
messages (only the newest carries the session values: a session keeps the latest ones).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Response

from plait.core.history import USER
from plait.errors import CheckpointNotFound
from plait.messages import Message
from plait.protocols.agent_protocol.documents import Document, now
from plait.protocols.agent_protocol.messages import from_sdk, message_id, to_sdk
from plait.protocols.agent_protocol.shapes import (
    Body,
    SortedPage,
    errors,
    router_of,
    search_routes,
)
from plait.run.sessions import SessionDocument, SessionTurn
from plait.server.caller import Caller
from plait.server.limits import ApiError
from plait.server.users import id_problem

__all__ = [
    "delete_thread",
    "find_thread",
    "make_thread",
    "note_run",
    "thread_status",
    "threads_router",
]

_DOC = "threads"
#: A run's status in the server's summary -> its thread's status.
_STATUS = {"running": "busy", "paused": "interrupted", "failed": "error"}


class ThreadCreate(Body):
    """What `threads.create` sends."""

    thread_id: str | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    supersteps: list[Any] | None = None


class ThreadPatch(Body):
    """What `threads.update` sends."""

    metadata: dict[str, Any] | None = None


class ThreadSearch(SortedPage):
    """What `threads.search` and `count` send."""

    values: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None


class StateUpdate(Body):
    """What `threads.update_state` sends."""

    values: dict[str, Any] | None = None
    as_node: str | None = None
    checkpoint_id: str | None = None


class HistoryRequest(Body):
    """What `threads.get_history` sends."""

    limit: int = 10
    before: str | dict[str, Any] | None = None


async def find_thread(who: Caller, thread_id: str) -> dict[str, Any]:
    """Return the caller's thread record `thread_id`.

    Raises:
        ApiError: `404`, no such thread of this user.
    """
    found = (await Document(who, _DOC).read()).get(thread_id)
    if found is None:
        raise ApiError(404, f"no thread '{thread_id[:128]}'")
    return dict(found)


async def make_thread(
    who: Caller, thread_id: str | None, metadata: dict[str, Any], if_exists: str | None
) -> dict[str, Any]:
    """Create the caller's thread `thread_id` (None: a new UUID4); return its record with
    its id (`if_exists` "do_nothing": an existing one as it is, else `409`)."""
    key = thread_id or str(uuid.uuid4())
    problem = id_problem(key)
    if problem is not None:
        raise ApiError(422, f"thread_id: {problem}")

    def edit(stored: dict[str, Any]) -> dict[str, Any]:
        if key in stored:
            if if_exists == "do_nothing":
                return {**stored[key], "thread_id": key}
            raise ApiError(409, f"thread '{key}' exists")
        stamp = now()
        stored[key] = {"metadata": metadata, "created_at": stamp, "updated_at": stamp, "run": None}
        return {**stored[key], "thread_id": key}

    return await Document(who, _DOC).change(edit)


async def note_run(who: Caller, thread_id: str, run_id: str, graph_id: str) -> None:
    """Record `run_id` (the server's run id) as the thread's latest run, of `graph_id`."""

    def edit(stored: dict[str, Any]) -> None:
        found = stored.get(thread_id)
        if found is not None:
            metadata = {"graph_id": graph_id, **found["metadata"]}
            stored[thread_id] = {**found, "run": run_id, "metadata": metadata, "updated_at": now()}

    await Document(who, _DOC).change(edit)


async def thread_status(who: Caller, record: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """Return a thread's status and its pending interrupts (`{"value", "id"}` each)."""
    run = record.get("run")
    if run is None:
        return "idle", []
    try:
        summary = await who.server.runs.summary(who.store, run)
    except CheckpointNotFound:
        return "idle", []
    pending = [{"value": i.info, "id": i.id} for i in summary.interrupts]
    return _STATUS.get(summary.status, "idle"), pending


async def _session(who: Caller, thread_id: str) -> SessionDocument:
    return await who.sessions.read(thread_id) or SessionDocument()


def _values(thread_id: str, session: SessionDocument, upto: int | None = None) -> dict[str, Any]:
    kept = session.messages if upto is None else session.messages[:upto]
    messages = [to_sdk(m, message_id(thread_id, i), a) for i, (a, m) in enumerate(kept)]
    values = session.values if upto is None else {}
    return {**values, "messages": messages}


async def _thread_json(who: Caller, thread_id: str, record: dict[str, Any]) -> dict[str, Any]:
    status, pending = await thread_status(who, record)
    return {
        "thread_id": thread_id,
        "created_at": record["created_at"],
        "updated_at": record["updated_at"],
        "metadata": record["metadata"],
        "status": status,
        "values": _values(thread_id, await _session(who, thread_id)),
        "interrupts": {record["run"]: pending} if pending else {},
    }


def _checkpoint(thread_id: str, checkpoint_id: str) -> dict[str, Any]:
    return {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}


def _turn_ends(session: SessionDocument) -> list[int]:
    """Return where each turn of the session ends (a turn starts at the user's messages)."""
    ends = []
    for i, (author, _) in enumerate(session.messages):
        if author == USER and i > 0 and session.messages[i - 1][0] != USER:
            ends.append(i)
    return [*ends, len(session.messages)] if session.messages else []


def _state(
    thread_id: str, session: SessionDocument, end: int, newest: bool, pending: list[Any]
) -> dict[str, Any]:
    """Return the thread's state after the turn that ends at message `end`."""
    checkpoint = message_id(thread_id, -end - 1)
    return {
        "values": _values(thread_id, session, None if newest else end),
        "next": [],
        "checkpoint": _checkpoint(thread_id, checkpoint),
        "metadata": {"step": end},
        "created_at": None if session.updated_at is None else session.updated_at.isoformat(),
        "parent_checkpoint": None,
        "tasks": [],
        "interrupts": pending if newest else [],
    }


async def _get_state(who: Caller, thread_id: str) -> dict[str, Any]:
    record = await find_thread(who, thread_id)
    session = await _session(who, thread_id)
    status, pending = await thread_status(who, record)
    state = _state(thread_id, session, len(session.messages), True, pending)
    if status == "interrupted":
        state["next"] = [record["metadata"].get("graph_id", "")]
    return state


async def _history(who: Caller, thread_id: str, body: HistoryRequest) -> list[dict[str, Any]]:
    record = await find_thread(who, thread_id)
    session = await _session(who, thread_id)
    _, pending = await thread_status(who, record)
    ends = _turn_ends(session)
    states = [_state(thread_id, session, e, e == ends[-1], pending) for e in reversed(ends)]
    before = body.before.get("checkpoint_id") if isinstance(body.before, dict) else body.before
    if before is not None:
        found = [s["checkpoint"]["checkpoint_id"] for s in states]
        states = states[found.index(before) + 1 :] if before in found else []
    return states[: body.limit]


async def _update_state(who: Caller, thread_id: str, body: StateUpdate) -> dict[str, Any]:
    record = await find_thread(who, thread_id)
    values = dict(body.values or {})
    given = values.pop("messages", [])
    author = body.as_node or record["metadata"].get("graph_id") or "assistant"
    added: list[tuple[str, Message]] = []
    for data in given if isinstance(given, list) else [given]:
        message = from_sdk(data)
        added.append((USER if message.role == "user" else author, message))
    turn = await SessionTurn.load(who.store, thread_id, [])
    turn.turn = added
    stamp = datetime.now(UTC)
    await turn.save(who.store, values, [], None, stamp=stamp)
    await who.store.session_catalog().touch(thread_id, stamp)
    size = len(turn.prior) + len(added)
    return {"checkpoint": _checkpoint(thread_id, message_id(thread_id, -size - 1))}


async def _copy(who: Caller, thread_id: str) -> dict[str, Any]:
    record = await find_thread(who, thread_id)
    made = await make_thread(who, None, dict(record["metadata"]), None)
    raw = await who.store.get_session(thread_id)
    if raw is not None:
        await who.store.put_session(made["thread_id"], raw)
        await who.store.session_catalog().touch(made["thread_id"], datetime.now(UTC))
    return await _thread_json(who, made["thread_id"], made)


def _matches(thread: dict[str, Any], body: ThreadSearch) -> bool:
    metadata, values = body.metadata or {}, body.values or {}
    return (
        (body.ids is None or thread["thread_id"] in body.ids)
        and (body.status is None or thread["status"] == body.status)
        and all(thread["metadata"].get(k) == v for k, v in metadata.items())
        and all(thread["values"].get(k) == v for k, v in values.items())
    )


async def _search(who: Caller, body: ThreadSearch) -> list[dict[str, Any]]:
    stored = await Document(who, _DOC).read()
    every = [await _thread_json(who, key, record) for key, record in stored.items()]
    found = [thread for thread in every if _matches(thread, body)]
    key = body.sort_by if body.sort_by in ("thread_id", "status", "created_at") else "updated_at"
    found.sort(key=lambda thread: str(thread[key]), reverse=body.sort_order != "asc")
    return found


async def delete_thread(who: Caller, thread_id: str) -> None:
    """Delete the caller's thread and its session (`404`: no such thread)."""

    def edit(stored: dict[str, Any]) -> None:
        if stored.pop(thread_id, None) is None:
            raise ApiError(404, f"no thread '{thread_id[:128]}'")

    await Document(who, _DOC).change(edit)
    await who.sessions.delete(thread_id)


async def _update(who: Caller, thread_id: str, metadata: dict[str, Any]) -> dict[str, Any]:
    def edit(stored: dict[str, Any]) -> dict[str, Any]:
        found = stored.get(thread_id)
        if found is None:
            raise ApiError(404, f"no thread '{thread_id[:128]}'")
        merged = {**found["metadata"], **metadata}
        stored[thread_id] = {**found, "metadata": merged, "updated_at": now()}
        return dict(stored[thread_id])

    return await _thread_json(who, thread_id, await Document(who, _DOC).change(edit))


def threads_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the `/threads…` routes (runs aside); `caller` is the app's dependency that
    checks the API key."""
    return router_of("threads", caller, _thread_routes, _state_routes)


def _thread_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes that create, find, change and delete threads."""

    @router.post("/threads", summary="Create a thread", responses=errors(401, 409, 422, 501))
    async def create(body: ThreadCreate, who: Caller = who_dep) -> dict[str, Any]:
        """Create a thread (an empty session) with `metadata`."""
        if body.supersteps:
            raise ApiError(501, "threads.create with supersteps is not served by plait yet")
        made = await make_thread(who, body.thread_id, body.metadata or {}, body.if_exists)
        return await _thread_json(who, made["thread_id"], made)

    search_routes(router, who_dep, "threads", ThreadSearch, _search)

    @router.get("/threads/{thread_id}", summary="Read a thread", responses=errors(401, 404))
    async def get(thread_id: str, who: Caller = who_dep) -> dict[str, Any]:
        """Return the thread with its status, values and pending interrupts."""
        return await _thread_json(who, thread_id, await find_thread(who, thread_id))

    @router.patch("/threads/{thread_id}", summary="Update a thread", responses=errors(401, 404))
    async def update(thread_id: str, body: ThreadPatch, who: Caller = who_dep) -> dict[str, Any]:
        """Merge `metadata` into the thread's."""
        return await _update(who, thread_id, body.metadata or {})

    @router.delete(
        "/threads/{thread_id}",
        status_code=204,
        summary="Delete a thread",
        responses=errors(401, 404),
    )
    async def delete(thread_id: str, who: Caller = who_dep) -> Response:
        """Delete the thread and its session (its runs' summaries stay)."""
        await delete_thread(who, thread_id)
        return Response(status_code=204)

    @router.post("/threads/{thread_id}/copy", summary="Copy a thread", responses=errors(401, 404))
    async def copy(thread_id: str, who: Caller = who_dep) -> dict[str, Any]:
        """Make a new thread with this one's metadata, messages and values."""
        return await _copy(who, thread_id)


def _state_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes that read and write a thread's state."""

    @router.get(
        "/threads/{thread_id}/state", summary="Read a thread's state", responses=errors(401, 404)
    )
    async def get_state(thread_id: str, who: Caller = who_dep) -> dict[str, Any]:
        """Return the thread's values, pending interrupts and what runs next."""
        return await _get_state(who, thread_id)

    @router.post(
        "/threads/{thread_id}/state",
        summary="Write a thread's state",
        responses=errors(401, 404, 422),
    )
    async def update_state(
        thread_id: str, body: StateUpdate, who: Caller = who_dep
    ) -> dict[str, Any]:
        """Write session values and append `messages` to the thread."""
        return await _update_state(who, thread_id, body)

    @router.post(
        "/threads/{thread_id}/history", summary="List a thread's states", responses=errors(401, 404)
    )
    async def history(
        thread_id: str, body: HistoryRequest, who: Caller = who_dep
    ) -> list[dict[str, Any]]:
        """Return the thread after each of its turns, newest first."""
        return await _history(who, thread_id, body)
