"""A thread run's record as the SDK reads it, and the thread's values when a run ends.

A run's record is in its thread's runs document
(`plait.protocols.agent_protocol.thread_records`); while it is not final its status is read
from the server's run it runs under.
"""

from __future__ import annotations

from typing import Any

from plait.errors import CheckpointNotFound
from plait.protocols.agent_protocol.documents import now
from plait.protocols.agent_protocol.stream import run_status
from plait.protocols.agent_protocol.thread_records import runs_document
from plait.protocols.agent_protocol.threads import (
    find_thread,
    thread_session,
    thread_status,
)
from plait.protocols.agent_protocol.threads import thread_values as values_of
from plait.server.caller import Caller
from plait.server.limits import ApiError
from plait.server.users import id_problem

__all__ = [
    "FINAL",
    "check_webhook",
    "find_run",
    "new_record",
    "run_ended",
    "run_json",
    "thread_values",
]

#: The statuses of a run that has ended.
FINAL = ("success", "error", "interrupted", "timeout")


async def find_run(who: Caller, thread_id: str, run_id: str) -> dict[str, Any]:
    """Return the caller's run `run_id` of thread `thread_id`, its status up to date.

    Raises:
        ApiError: `404`, no such run of this user's thread.
    """
    found = None
    if not id_problem(thread_id):
        found = (await runs_document(who, thread_id).read()).get(run_id)
    if found is None or found["thread_id"] != thread_id:
        raise ApiError(404, f"no run '{run_id[:128]}' of thread '{thread_id[:128]}'")
    if found["status"] not in FINAL and found["checkpoint"] is not None:
        try:
            summary = await who.server.runs.summary(who.store, found["checkpoint"])
            found = {**found, "status": run_status(summary)}
        except CheckpointNotFound:
            pass
    return {"run_id": run_id, **found}


#: What a run's record keeps that the SDK's run does not show.
_UNSHOWN = (
    "checkpoint",
    "request",
    "queued",
    "stop",
    "reserved_at",
    "stopped_at",
    "worker",
    "webhook",
)


def run_json(run: dict[str, Any]) -> dict[str, Any]:
    """Return a run record as the SDK reads it."""
    shown = {k: v for k, v in run.items() if k not in _UNSHOWN}
    return {**shown, "kwargs": run.get("request") or {}}


async def thread_values(who: Caller, thread_id: str) -> dict[str, Any]:
    """Return the thread's values, with `__interrupt__` while it waits for an answer (its
    paused run's turn included, as `threads.get` shows it)."""
    thread = await find_thread(who, thread_id)
    values = values_of(thread_id, await thread_session(who, thread_id, thread))
    status, pending = await thread_status(who, thread)
    if status == "interrupted":
        values["__interrupt__"] = pending
    return values


async def check_webhook(who: Caller, webhook: str | None) -> None:
    """Refuse (`422`) a webhook plait does not send to (`plait.server.webhooks`)."""
    if webhook is not None:
        await who.server.webhooks.check(webhook)


async def run_ended(who: Caller, thread_id: str, run_id: str, webhook: str | None) -> None:
    """Do what a run's end calls for once its status is recorded: send its record, as
    `get` answers it, to its webhook."""
    if webhook is not None:
        who.server.webhooks.send(webhook, run_json(await find_run(who, thread_id, run_id)))


def new_record(thread_id: str, assistant_id: str, body: Any) -> dict[str, Any]:
    """Return the record of a new run, `pending` (a queued run's keeps its `request` too:
    `multitask.reserve`)."""
    stamp = now()
    return {
        "thread_id": thread_id,
        "assistant_id": assistant_id,
        "created_at": stamp,
        "updated_at": stamp,
        "metadata": body.metadata or {},
        "multitask_strategy": body.multitask_strategy or "reject",
        "status": "pending",
        "checkpoint": None,
        "webhook": body.webhook,
    }
