"""A thread's state and its checkpoints: `threads.get_state` (now, or at a checkpoint),
`update_state` and `get_history`.

The server runs every run with `durability="step"`, so each step of a run (for a
`ChatModelAgent` a model call and its tool round, for a graph a super-step) is kept as a
step snapshot (`plait.run.time_travel`, the last 100 of each run, until the run's
checkpoint expires). A thread's checkpoints are those snapshots, of the runs it noted
(`threads.note_run`, the last 100 runs), and, newest of all, its *head*: the thread as it
is now (its session). Newest first, each is a state as the SDK reads it:
- `values`: the thread's messages (in the SDK's shape, ids by position) and session values
  at that point: the messages before the run, then what the run's turn had said by the step;
- `checkpoint`: `{"thread_id", "checkpoint_ns": "", "checkpoint_id"}`; a step's id is its
  snapshot's id in the store (`<run checkpoint id>.step-<n>`, what `GET
  /v1/runs/{id}/history` and `POST /v1/runs/{id}/fork` name as run `id`, step `n`), the
  head's a UUID5 of the thread, its session's version and its latest run's id and status,
  new at each write of the session and as a run starts, pauses or ends;
- `parent_checkpoint`: the checkpoint just older (None for the oldest kept);
- `metadata`: `source` (`"loop"`; the head: `"update"` after `update_state`), `step` (its
  place in the thread, from 1, oldest first), `run_id` (the protocol's run that took it),
  `run_step` (its number in that run), `agent` (the agent that took it) and `writes` (what
  the last event before it wrote: `{agent: {"messages": [message]}}`, a graph node's
  `{node: update}`, else None);
- `next` and `tasks`: the agent that goes on from a step; at the head, the thread's agent
  while it waits for an answer, with its pending `interrupts`;
- `created_at`: when the run that took the step started (the head: when the session was
  last written).
`update_state` writes at the head only: naming an earlier checkpoint (forking the thread
there) answers `501`, as a run started from one does.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter

from plait.core.checkpoint import Checkpoint
from plait.core.history import USER
from plait.errors import CheckpointNotFound
from plait.events import AgentEvent
from plait.protocols.agent_protocol.messages import message_id, to_sdk
from plait.protocols.agent_protocol.not_served import NOT_YET
from plait.protocols.agent_protocol.shapes import Body, errors, router_of
from plait.protocols.agent_protocol.stream import node_update
from plait.protocols.agent_protocol.threads import (
    StateWrite,
    find_thread,
    thread_session,
    thread_status,
    thread_values,
    write_state,
)
from plait.run.time_travel import StepSnapshot, find_step, read_history, step_id
from plait.server.caller import Caller
from plait.server.limits import ApiError
from plait.stores.base import GuardedStore

__all__ = ["check_checkpoint", "resume_targets", "state_router"]

_STEP = ".step-"
#: What an interrupt's id looks like (plait's ids: 32 hex digits).
_INTERRUPT_ID = re.compile(r"[0-9a-f]{32}")


class StateUpdate(Body):
    """What `threads.update_state` sends."""

    values: dict[str, Any] | None = None
    as_node: str | None = None
    checkpoint_id: str | None = None
    checkpoint: dict[str, Any] | None = None


class HistoryRequest(Body):
    """What `threads.get_history` sends."""

    limit: int = 10
    before: str | dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None


class StateRequest(Body):
    """What `threads.get_state` with a `checkpoint` sends."""

    checkpoint: dict[str, Any]
    subgraphs: bool = False


@dataclasses.dataclass(frozen=True)
class _Kept:
    """One kept step of the thread: the run that took it and its snapshot."""

    run_checkpoint: str  # the server's checkpoint id the run's steps are kept under
    run_id: str | None  # the protocol's run id
    started_at: str | None
    snapshot: StepSnapshot

    @property
    def checkpoint_id(self) -> str:
        return step_id(self.run_checkpoint, self.snapshot.step)


def _checkpoint(thread_id: str, checkpoint_id: str | None) -> dict[str, Any] | None:
    if checkpoint_id is None:
        return None
    return {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}


def _given_id(checkpoint: dict[str, Any] | None, checkpoint_id: str | None) -> str | None:
    """Return the checkpoint id a request names (`checkpoint` or `checkpoint_id`)."""
    if checkpoint and checkpoint.get("checkpoint_ns"):
        raise ApiError(501, f"checkpoint_ns (a subgraph's state) {NOT_YET}: plait has none")
    found = (checkpoint or {}).get("checkpoint_id") or checkpoint_id
    return str(found) if found else None


async def _head_id(who: Caller, thread_id: str, record: dict[str, Any]) -> str:
    """Return the id of the thread's state now: new at each write of its session, and as
    its latest run starts, pauses or ends."""
    found = await who.store.get_session_record(thread_id)
    version = 0 if found is None else found.version
    status, _ = await thread_status(who, record)
    now = f"plait:{thread_id}@{version}/{record.get('run')}/{status}"
    return str(uuid.uuid5(uuid.NAMESPACE_URL, now))


async def _kept(who: Caller, record: dict[str, Any]) -> list[_Kept]:
    """Return the thread's kept steps, oldest first."""
    store = GuardedStore(who.store)
    found = []
    for kept in record.get("checkpoints") or ():
        runs = kept["runs"]  # each protocol run that went on there, from step `after` on
        for snapshot in await read_history(store, kept["checkpoint"]):
            run = [r for r in runs if r["after"] < snapshot.step][-1:] or runs[:1]
            found.append(_Kept(kept["checkpoint"], run[0]["run_id"], run[0]["at"], snapshot))
    return found


class _Thread:
    """What the states of one thread are built from, read once per request."""

    def __init__(self, who: Caller, thread_id: str, record: dict[str, Any]) -> None:
        self.who = who
        self.thread_id = thread_id
        self.record = record
        self.kept: list[_Kept] = []
        self.head = ""

    async def load(self) -> _Thread:
        self.kept = await _kept(self.who, self.record)
        self.head = await _head_id(self.who, self.thread_id, self.record)
        return self

    def ids(self) -> list[str]:
        """Return the thread's checkpoint ids, newest (the head) first."""
        return [self.head, *(k.checkpoint_id for k in reversed(self.kept))]

    async def state(self, checkpoint_id: str, parent: str | None) -> dict[str, Any]:
        """Return the state at `checkpoint_id`, one of `ids()`."""
        if checkpoint_id == self.head:
            return await self._head(parent)
        place = next(i for i, k in enumerate(self.kept) if k.checkpoint_id == checkpoint_id)
        return await self._step(self.kept[place], place + 1, parent)

    async def _head(self, parent: str | None) -> dict[str, Any]:
        who, thread_id = self.who, self.thread_id
        session = await thread_session(who, thread_id, self.record)
        status, pending = await thread_status(who, self.record)
        waiting = []
        if status == "interrupted":  # its latest run waits: the agent of that run goes on
            waiting = [(await who.server.runs.summary(who.store, self.record["run"])).agent]
        metadata = {
            "source": self.record.get("head", "loop"),
            "step": len(self.kept) + 1,
            "writes": None,
            "parents": {},
        }
        return _state(
            thread_id,
            (thread_values(thread_id, session), waiting, pending),
            (self.head, parent),
            metadata,
            None if session.updated_at is None else session.updated_at.isoformat(),
        )

    async def _step(self, kept: _Kept, place: int, parent: str | None) -> dict[str, Any]:
        store = GuardedStore(self.who.store)
        try:
            _, checkpoint = await find_step(store, kept.run_checkpoint, kept.snapshot.step)
        except CheckpointNotFound:  # it expired since the history was read
            raise ApiError(404, f"checkpoint '{kept.checkpoint_id}' expired") from None
        values = _step_values(self.thread_id, checkpoint, kept.snapshot.session_values)
        metadata = {
            "source": "loop",
            "step": place,
            "run_id": kept.run_id,
            "run_step": kept.snapshot.step,
            "agent": kept.snapshot.agent,
            "writes": _writes(self.thread_id, kept, values["messages"]),
            "parents": {},
        }
        return _state(
            self.thread_id,
            (values, [kept.snapshot.agent], []),
            (kept.checkpoint_id, parent),
            metadata,
            kept.started_at,
        )


def _state(
    thread_id: str,
    now: tuple[dict[str, Any], list[str], list[dict[str, Any]]],
    ids: tuple[str, str | None],
    metadata: dict[str, Any],
    created_at: str | None,
) -> dict[str, Any]:
    """Return a state as the SDK reads it: `now` is its values, the agents that go on and
    the interrupts they wait on; `ids` its checkpoint's and its parent's."""
    values, going_on, pending = now
    checkpoint_id, parent = ids
    tasks = [
        {
            "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"plait:{checkpoint_id}/{name}")),
            "name": name,
            "path": [],
            "error": None,
            "interrupts": pending,
            "checkpoint": None,
            "state": None,
            "result": None,
        }
        for name in going_on
    ]
    return {
        "values": values,
        "next": going_on,
        "tasks": tasks,
        "checkpoint": _checkpoint(thread_id, checkpoint_id),
        "parent_checkpoint": _checkpoint(thread_id, parent),
        "metadata": metadata,
        "created_at": created_at,
        "interrupts": pending,
    }


def _step_values(
    thread_id: str, checkpoint: Checkpoint, session_values: dict[str, Any]
) -> dict[str, Any]:
    """Return the thread's values at a step: the messages before its run (the run's input
    less the turn's own), then the turn's messages so far, and the session values."""
    turn = checkpoint.session_turn
    given = next((i for i, (author, _) in enumerate(turn) if author != USER), len(turn))
    saved = checkpoint.snapshot()
    authors = saved.root_authors or (USER,) * len(saved.root_input)
    prior = list(zip(authors, saved.root_input, strict=True))
    kept = [*prior[: len(prior) - given], *turn]
    messages = [to_sdk(m, message_id(thread_id, i), a) for i, (a, m) in enumerate(kept)]
    return {**session_values, "messages": messages}


def _writes(thread_id: str, kept: _Kept, messages: list[dict[str, Any]]) -> Any:
    """Return what the last event before a step wrote (None: nothing known)."""
    event: AgentEvent | None = kept.snapshot.event
    if event is None or event.output is None:
        return None
    variant = event.output.message
    if variant is not None and variant.message is not None:
        said = variant.message
        if event.depth == 0 and messages and messages[-1]["content"] == said.content:
            return {event.agent_name: {"messages": [messages[-1]]}}
        key = message_id(thread_id, -1)
        return {event.agent_name: {"messages": [to_sdk(said, key, event.agent_name)]}}
    return node_update(event.output.custom)


async def _history(who: Caller, thread_id: str, body: HistoryRequest) -> list[dict[str, Any]]:
    record = await find_thread(who, thread_id)
    thread = await _Thread(who, thread_id, record).load()
    ids = thread.ids()
    parents = dict(zip(ids, [*ids[1:], None], strict=True))
    only = _given_id(body.checkpoint, None)
    if only is not None:
        ids = [only] if only in ids else []
    before = body.before.get("checkpoint_id") if isinstance(body.before, dict) else body.before
    if before is not None:
        ids = ids[ids.index(before) + 1 :] if before in ids else []
    wanted = body.metadata or {}
    states: list[dict[str, Any]] = []
    for key in ids:
        if len(states) >= body.limit:
            break
        state = await thread.state(key, parents[key])
        if all(state["metadata"].get(k) == v for k, v in wanted.items()):
            states.append(state)
    return states


async def _state_at(who: Caller, thread_id: str, checkpoint_id: str | None) -> dict[str, Any]:
    """Return the thread's state at `checkpoint_id` (None: now)."""
    record = await find_thread(who, thread_id)
    thread = await _Thread(who, thread_id, record).load()
    ids = thread.ids()
    key = checkpoint_id or thread.head
    if key not in ids:
        raise ApiError(404, f"thread '{thread_id}' has no checkpoint '{key[:128]}'")
    at = ids.index(key)
    return await thread.state(key, ids[at + 1] if at + 1 < len(ids) else None)


async def check_checkpoint(
    who: Caller, thread_id: str, checkpoint: dict[str, Any] | None, given: str | None
) -> None:
    """Refuse (`501`) a write or a run from a checkpoint (`checkpoint` or its id `given`)
    that is not the thread's state now: forking a thread is not served; `404` for a
    checkpoint the thread does not have."""
    checkpoint_id = _given_id(checkpoint, given)
    if checkpoint_id is None:
        return
    record = await find_thread(who, thread_id)
    if checkpoint_id == await _head_id(who, thread_id, record):
        return
    run, _, step = checkpoint_id.rpartition(_STEP)
    if not step.isdigit() or run not in {r["checkpoint"] for r in record.get("checkpoints") or ()}:
        raise ApiError(404, f"thread '{thread_id}' has no checkpoint '{checkpoint_id[:128]}'")
    raise ApiError(
        501,
        f"going on from an earlier checkpoint of a thread (forking it) {NOT_YET}; "
        f"POST /v1/runs/{run}/fork with step {step} starts a new run from that step",
    )


def resume_targets(
    value: Any, pending: set[str]
) -> tuple[dict[str, Any] | None, tuple[Any] | None]:
    """Return how `command.resume` answers the thread's `pending` interrupts: as targets
    (`{interrupt id: value}`, some of them) or as the one-tuple of a value for its one
    interrupt.

    Raises:
        ApiError: `409`, it names interrupts by id that are not pending (answered already).
    """
    keys = set(value) if isinstance(value, dict) else set()
    if keys and keys <= pending:
        return dict(value), None
    if keys and (keys & pending or all(_INTERRUPT_ID.fullmatch(str(k)) for k in keys)):
        raise ApiError(
            409,
            f"interrupt(s) {sorted(keys - pending)} are not pending on the thread (each is "
            f"answered once); pending: {sorted(pending)}",
        )
    return None, (value,)


async def _update_state(who: Caller, thread_id: str, body: StateUpdate) -> dict[str, Any]:
    record = await find_thread(who, thread_id)
    await check_checkpoint(who, thread_id, body.checkpoint, body.checkpoint_id)
    await write_state(who, thread_id, StateWrite.of(body.values), body.as_node)
    return {"checkpoint": _checkpoint(thread_id, await _head_id(who, thread_id, record))}


def state_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the routes of a thread's state; `caller` is the app's dependency that checks
    the API key."""
    return router_of("threads", caller, _reading_routes, _writing_routes)


def _reading_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes that read a thread's state and history."""

    @router.get(
        "/threads/{thread_id}/state", summary="Read a thread's state", responses=errors(401, 404)
    )
    async def get_state(thread_id: str, who: Caller = who_dep) -> dict[str, Any]:
        """Return the thread's values, pending interrupts and what runs next."""
        return await _state_at(who, thread_id, None)

    @router.get(
        "/threads/{thread_id}/state/{checkpoint_id}",
        summary="Read a thread's state at a checkpoint",
        responses=errors(401, 404),
    )
    async def get_state_at(
        thread_id: str, checkpoint_id: str, who: Caller = who_dep
    ) -> dict[str, Any]:
        """Return the thread's state at one of its checkpoints (`get_history` lists them)."""
        return await _state_at(who, thread_id, checkpoint_id)

    @router.post(
        "/threads/{thread_id}/state/checkpoint",
        summary="Read a thread's state at a checkpoint",
        responses=errors(401, 404, 501),
    )
    async def post_state_at(
        thread_id: str, body: StateRequest, who: Caller = who_dep
    ) -> dict[str, Any]:
        """Return the thread's state at `checkpoint` (now, without a `checkpoint_id`)."""
        return await _state_at(who, thread_id, _given_id(body.checkpoint, None))

    @router.post(
        "/threads/{thread_id}/history",
        summary="List a thread's states",
        responses=errors(401, 404, 501),
    )
    async def history(
        thread_id: str, body: HistoryRequest, who: Caller = who_dep
    ) -> list[dict[str, Any]]:
        """Return the thread's checkpoints, newest first: its state now, then the steps its
        runs kept."""
        return await _history(who, thread_id, body)


def _writing_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the route that writes a thread's state."""

    @router.post(
        "/threads/{thread_id}/state",
        summary="Write a thread's state",
        responses=errors(401, 404, 422, 501),
    )
    async def update_state(
        thread_id: str, body: StateUpdate, who: Caller = who_dep
    ) -> dict[str, Any]:
        """Write session values and append `messages` to the thread (at its state now)."""
        return await _update_state(who, thread_id, body)
