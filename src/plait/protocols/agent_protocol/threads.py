"""Threads (`/threads…`): a thread is a plait session (`thread_id` = session id).

The session holds the thread's messages and values; the thread's own document
(`plait.protocols.agent_protocol.thread_records`) holds what a session does not: its
metadata, times, its latest run (the server's run id), whose summary gives the thread's
status (`busy` while it runs, `interrupted` while it waits for an answer, `error` after a
failure, else `idle`) and pending interrupts, and the checkpoints of its last runs, whose
kept steps are its history (`plait.protocols.agent_protocol.state`). A thread's values
are `{"messages": [...]}` (in the SDK's shape, `plait.protocols.agent_protocol.messages`)
plus the session values. `prune` deletes threads, or (`keep_latest`) forgets their
history before their state now.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Response

from plait.core.checkpoint import Checkpoint
from plait.core.history import USER
from plait.errors import CheckpointNotFound
from plait.messages import Message
from plait.protocols.agent_protocol.documents import Document, now
from plait.protocols.agent_protocol.messages import from_sdk, message_id, to_sdk
from plait.protocols.agent_protocol.not_served import NOT_YET
from plait.protocols.agent_protocol.shapes import (
    Body,
    SortedPage,
    errors,
    router_of,
    search_routes,
)
from plait.protocols.agent_protocol.thread_records import (
    list_thread,
    thread_document,
    thread_ids,
    unlist_thread,
)
from plait.run.sessions import SessionDocument, SessionTurn
from plait.run.time_travel import read_history
from plait.server.caller import Caller
from plait.server.limits import ApiError
from plait.server.users import id_problem
from plait.stores.base import GuardedStore

__all__ = [
    "StateWrite",
    "delete_thread",
    "find_or_make_thread",
    "find_thread",
    "forget_run",
    "last_step",
    "make_thread",
    "note_run",
    "thread_session",
    "thread_status",
    "thread_values",
    "threads_router",
    "write_state",
]

#: The most runs whose checkpoints a thread keeps in its history.
KEPT_RUNS = 100
#: A run's status in the server's summary -> its thread's status.
_STATUS = {"running": "busy", "paused": "interrupted", "failed": "error"}


class ThreadCreate(Body):
    """What `threads.create` sends."""

    thread_id: str | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    supersteps: list[dict[str, Any]] | None = None
    ttl: Any = None


class ThreadPatch(Body):
    """What `threads.update` sends."""

    metadata: dict[str, Any] | None = None
    ttl: Any = None


class ThreadPrune(Body):
    """What `threads.prune` sends."""

    thread_ids: list[str]
    strategy: Literal["delete", "keep_latest"] = "delete"


class ThreadSearch(SortedPage):
    """What `threads.search` and `count` send."""

    values: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None


async def find_thread(
    who: Caller, thread_id: str, document: Document | None = None
) -> dict[str, Any]:
    """Return the caller's thread record `thread_id` (read with `document`, its document,
    if given).

    Raises:
        ApiError: `404`, no such thread of this user.
    """
    found = None
    if not id_problem(thread_id):
        found = (await (document or thread_document(who, thread_id)).snapshot()).value()
    if not found:
        raise ApiError(404, f"no thread '{thread_id[:128]}'")
    return found


async def find_or_make_thread(who: Caller, thread_id: str, document: Document) -> dict[str, Any]:
    """Return the caller's thread record `thread_id`, made first if there is none (a run's
    `if_not_exists="create"`): one read of its `document` for a thread that exists, one
    write more for one that does not.

    Raises:
        ApiError: `422`, `thread_id` cannot be a thread's id.
    """
    if id_problem(thread_id) is None:
        found = (await document.snapshot()).value()
        if found:
            return found
        return await _make(who, thread_id, {}, "do_nothing", document)  # (its id checked)
    return await make_thread(who, thread_id, {}, "do_nothing", document)


async def make_thread(
    who: Caller,
    thread_id: str | None,
    metadata: dict[str, Any],
    if_exists: str | None,
    document: Document | None = None,
) -> dict[str, Any]:
    """Create the caller's thread `thread_id` (None: a new UUID4); return its record with
    its id, and `new` when it was made (`if_exists` "do_nothing": an existing one as it is,
    else `409`; `document`: its document, the change starting from what it last read)."""
    key = thread_id or str(uuid.uuid4())
    problem = id_problem(key)
    if problem is not None:
        raise ApiError(422, f"thread_id: {problem}")
    return await _make(who, key, metadata, if_exists, document)


async def _make(
    who: Caller,
    key: str,
    metadata: dict[str, Any],
    if_exists: str | None,
    document: Document | None,
) -> dict[str, Any]:
    """`make_thread` the thread `key`, an id a thread can have."""
    stamp = now()

    def edit(stored: dict[str, Any]) -> dict[str, Any]:
        if stored:
            if if_exists == "do_nothing":
                return {**stored, "thread_id": key}
            raise ApiError(409, f"thread '{key}' exists")
        stored.update(metadata=metadata, created_at=stamp, updated_at=stamp, run=None)
        return {**stored, "thread_id": key, "new": True}

    await list_thread(who, key, stamp)  # listed first: every thread there is is listed
    document = document or thread_document(who, key)
    return await document.change(edit, document.last)


async def last_step(who: Caller, checkpoint: str) -> int:
    """Return the number of the last step kept under the server's `checkpoint` (0: none)."""
    steps = await read_history(GuardedStore(who.store), checkpoint)
    return steps[-1].step if steps else 0


async def note_run(
    who: Caller,
    thread_id: str,
    run_id: str,
    graph_id: str,
    kept: tuple[str, str, int],
    document: Document | None = None,
) -> None:
    """Record `run_id` (the server's run id) as the thread's latest run, of `graph_id`;
    `kept` is the server's checkpoint id its steps are kept under, the protocol's run id
    and the last step kept there before it (a resume keeps its steps where its run did),
    for the thread's history (`document`: the thread's, the change starting from what it
    last read or wrote)."""
    checkpoint, protocol_run, after = kept

    def edit(found: dict[str, Any]) -> None:
        if not found:
            return
        listed = found.get("checkpoints")
        runs = [dict(run) for run in listed] if listed else []
        stamp = now()
        run = {"run_id": protocol_run, "at": stamp, "after": after}
        same = [kept for kept in runs if kept["checkpoint"] == checkpoint] if runs else []
        if same:  # its steps from `after` on are this run's
            same[0]["runs"] = [*same[0]["runs"], run]
        else:
            runs.append({"checkpoint": checkpoint, "runs": [run]})
        metadata = {"graph_id": graph_id, **found["metadata"]}
        found.update(
            run=run_id,
            metadata=metadata,
            updated_at=stamp,
            checkpoints=runs[-KEPT_RUNS:],
            head="loop",
        )

    document = document or thread_document(who, thread_id)
    await document.change(edit, document.last)


async def forget_run(who: Caller, thread_id: str, checkpoint: str | None) -> None:
    """Drop the steps kept under `checkpoint` from the thread's history (a rolled-back
    run's)."""

    def edit(found: dict[str, Any]) -> None:
        if found and checkpoint is not None:
            runs = [r for r in found.get("checkpoints") or () if r["checkpoint"] != checkpoint]
            found["checkpoints"] = runs

    await thread_document(who, thread_id).change(edit)


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


async def thread_session(who: Caller, thread_id: str, record: dict[str, Any]) -> SessionDocument:
    """Return the thread's session; while the thread waits for an answer, with the turn of
    its paused run added (what it said before the pause, and its session values then),
    as the session will hold it once the resumed run ends."""
    session = await who.sessions.read(thread_id) or SessionDocument()
    run = record.get("run")
    try:
        summary = None if run is None else await who.server.runs.summary(who.store, run)
    except CheckpointNotFound:
        summary = None
    if summary is None or summary.status != "paused" or summary.checkpoint_id is None:
        return session
    found = await GuardedStore(who.store).get_checkpoint(summary.checkpoint_id)
    if found is not None:
        paused = Checkpoint.decode(found.data, summary.checkpoint_id)
        session.messages = [*session.messages, *paused.session_turn]
        session.values = {**session.values, **paused.snapshot().session_values}
    return session


@dataclasses.dataclass
class StateWrite:
    """What a state update writes: session values, and messages to append."""

    values: dict[str, Any]
    messages: list[Message]

    @classmethod
    def of(cls, values: object) -> StateWrite:
        """Return the update of `values` as the SDK sends it (`messages` in its shape).

        Raises:
            ApiError: `422`, not an object, or a message that is not one.
        """
        if not isinstance(values, Mapping | None):
            raise ApiError(422, "a state update's values are an object")
        rest = dict(values or {})
        given = rest.pop("messages", [])
        return cls(
            rest, [from_sdk(data) for data in (given if isinstance(given, list) else [given])]
        )


async def write_state(who: Caller, thread_id: str, update: StateWrite, as_node: str | None) -> None:
    """Write `update` to the thread's session: its values, and its messages appended (the
    user's as the user's, any other as `as_node`'s, or the thread's `graph_id`'s)."""
    record = await find_thread(who, thread_id)
    author = as_node or record["metadata"].get("graph_id") or "assistant"
    turn = await SessionTurn.load(who.store, thread_id, [])
    turn.turn = [(USER if m.role == "user" else author, m) for m in update.messages]
    stamp = datetime.now(UTC)
    await turn.save(who.store, update.values, [], None, stamp=stamp)
    await who.store.session_catalog().touch(thread_id, stamp)

    def edit(found: dict[str, Any]) -> None:
        if found:
            found.update(head="update", updated_at=now())

    await thread_document(who, thread_id).change(edit)


def thread_values(thread_id: str, session: SessionDocument) -> dict[str, Any]:
    """Return a thread's values: its session's values and messages (in the SDK's shape)."""
    kept = session.messages
    messages = [to_sdk(m, message_id(thread_id, i), a) for i, (a, m) in enumerate(kept)]
    return {**session.values, "messages": messages}


async def _thread_json(who: Caller, thread_id: str, record: dict[str, Any]) -> dict[str, Any]:
    status, pending = await thread_status(who, record)
    return {
        "thread_id": thread_id,
        "created_at": record["created_at"],
        "updated_at": record["updated_at"],
        "metadata": record["metadata"],
        "status": status,
        "values": thread_values(thread_id, await thread_session(who, thread_id, record)),
        "interrupts": {record["run"]: pending} if pending else {},
    }


def _updates(supersteps: list[dict[str, Any]]) -> list[tuple[StateWrite, str | None]]:
    """Return the updates of `threads.create`'s `supersteps`, checked, in order."""
    found = []
    for superstep in supersteps:
        for update in superstep.get("updates") or ():
            if not isinstance(update, dict) or update.get("command") is not None:
                raise ApiError(501, f"a superstep update with a command {NOT_YET}")
            as_node = update.get("as_node")
            found.append((StateWrite.of(update.get("values")), as_node))
    return found


async def _create(who: Caller, body: ThreadCreate) -> dict[str, Any]:
    """Create the thread `body` asks for, then write its supersteps' updates."""
    if body.ttl is not None:
        raise ApiError(501, f"threads.create with ttl {NOT_YET}")
    updates = _updates(body.supersteps or [])
    made = await make_thread(who, body.thread_id, body.metadata or {}, body.if_exists)
    key = made["thread_id"]
    if not made.get("new"):  # it existed (`if_exists="do_nothing"`): it stays as it is
        updates = []
    for values, as_node in updates:
        await write_state(who, key, values, as_node)
    return await _thread_json(who, key, await find_thread(who, key) if updates else made)


async def _copy(who: Caller, thread_id: str) -> dict[str, Any]:
    record = await find_thread(who, thread_id)
    made = await make_thread(who, None, dict(record["metadata"]), None)
    raw = await who.store.get_session(thread_id)
    if raw is not None:
        await who.store.put_session(made["thread_id"], raw)
        await who.store.session_catalog().touch(made["thread_id"], datetime.now(UTC))
    kept = {"checkpoints": record.get("checkpoints") or [], "head": record.get("head", "loop")}
    await thread_document(who, made["thread_id"]).change(lambda stored: stored.update(kept))
    return await _thread_json(who, made["thread_id"], {**made, **kept})


async def _prune(who: Caller, body: ThreadPrune) -> int:
    """Delete the caller's threads `body` names (`keep_latest`: forget their history
    before their state now); return how many it found."""
    if body.strategy == "delete":
        found = 0
        for key in dict.fromkeys(body.thread_ids):
            with contextlib.suppress(ApiError):  # not a thread of the caller's
                await delete_thread(who, key)
                found += 1
        return found

    def edit(stored: dict[str, Any]) -> int:
        if stored:
            stored["checkpoints"] = []
        return 1 if stored else 0

    ids = [key for key in dict.fromkeys(body.thread_ids) if not id_problem(key)]
    return sum([await thread_document(who, key).change(edit) for key in ids])


def _matches(thread: dict[str, Any], body: ThreadSearch) -> bool:
    metadata, values = body.metadata or {}, body.values or {}
    return (
        (body.ids is None or thread["thread_id"] in body.ids)
        and (body.status is None or thread["status"] == body.status)
        and all(thread["metadata"].get(k) == v for k, v in metadata.items())
        and all(thread["values"].get(k) == v for k, v in values.items())
    )


async def _search(who: Caller, body: ThreadSearch) -> list[dict[str, Any]]:
    every = []
    for key in await thread_ids(who):
        record = await thread_document(who, key).read()
        if record:  # a thread listed as it was made, or left listed as it was deleted
            every.append(await _thread_json(who, key, record))
    found = [thread for thread in every if _matches(thread, body)]
    key = body.sort_by if body.sort_by in ("thread_id", "status", "created_at") else "updated_at"
    found.sort(key=lambda thread: str(thread[key]), reverse=body.sort_order != "asc")
    return found


async def delete_thread(who: Caller, thread_id: str) -> None:
    """Delete the caller's thread and its session (`404`: no such thread)."""

    def edit(stored: dict[str, Any]) -> None:
        if not stored:
            raise ApiError(404, f"no thread '{thread_id[:128]}'")
        stored.clear()  # of deletes at once, one finds the thread

    if id_problem(thread_id):
        raise ApiError(404, f"no thread '{thread_id[:128]}'")
    document = thread_document(who, thread_id)
    await document.change(edit)
    await document.delete()
    await unlist_thread(who, thread_id)
    await who.sessions.delete(thread_id)


async def _update(who: Caller, thread_id: str, metadata: dict[str, Any]) -> dict[str, Any]:
    def edit(found: dict[str, Any]) -> dict[str, Any]:
        if not found:
            raise ApiError(404, f"no thread '{thread_id[:128]}'")
        found.update(metadata={**found["metadata"], **metadata}, updated_at=now())
        return dict(found)

    await find_thread(who, thread_id)  # 404 for an id no thread can have
    return await _thread_json(who, thread_id, await thread_document(who, thread_id).change(edit))


def threads_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the `/threads…` routes (runs aside); `caller` is the app's dependency that
    checks the API key."""
    return router_of("threads", caller, _thread_routes)


def _thread_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes that create, find, change and delete threads."""

    @router.post("/threads", summary="Create a thread", responses=errors(401, 409, 422, 501))
    async def create(body: ThreadCreate, who: Caller = who_dep) -> dict[str, Any]:
        """Create a thread (an empty session) with `metadata`, then write each of its
        `supersteps`' updates in order, as `update_state` does."""
        return await _create(who, body)

    @router.post("/threads/prune", summary="Prune threads", responses=errors(401, 422))
    async def prune(body: ThreadPrune, who: Caller = who_dep) -> dict[str, int]:
        """Delete the caller's threads named (`keep_latest`: forget their history)."""
        return {"pruned_count": await _prune(who, body)}

    search_routes(router, who_dep, "threads", ThreadSearch, _search)

    @router.get("/threads/{thread_id}", summary="Read a thread", responses=errors(401, 404))
    async def get(thread_id: str, who: Caller = who_dep) -> dict[str, Any]:
        """Return the thread with its status, values and pending interrupts."""
        return await _thread_json(who, thread_id, await find_thread(who, thread_id))

    @router.patch(
        "/threads/{thread_id}", summary="Update a thread", responses=errors(401, 404, 501)
    )
    async def update(thread_id: str, body: ThreadPatch, who: Caller = who_dep) -> dict[str, Any]:
        """Merge `metadata` into the thread's."""
        if body.ttl is not None:
            raise ApiError(501, f"threads.update with ttl {NOT_YET}")
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
