"""A thread run's record as the SDK reads it, and the thread's values when a run ends.

A run's record is in the user's `runs` document (`plait.protocols.agent_protocol.runs`);
while it is not final its status is read from the server's run it runs under.
"""

from __future__ import annotations

from typing import Any

from plait.errors import CheckpointNotFound
from plait.protocols.agent_protocol.documents import Document
from plait.protocols.agent_protocol.messages import message_id, to_sdk
from plait.protocols.agent_protocol.stream import run_status
from plait.protocols.agent_protocol.threads import find_thread, thread_status
from plait.run.sessions import SessionDocument
from plait.server.caller import Caller
from plait.server.limits import ApiError

__all__ = ["FINAL", "find_run", "run_json", "thread_values"]

_DOC = "runs"
#: The statuses of a run that has ended.
FINAL = ("success", "error", "interrupted", "timeout")


async def find_run(who: Caller, thread_id: str, run_id: str) -> dict[str, Any]:
    """Return the caller's run `run_id` of thread `thread_id`, its status up to date.

    Raises:
        ApiError: `404`, no such run of this user's thread.
    """
    found = (await Document(who, _DOC).read()).get(run_id)
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
_UNSHOWN = ("checkpoint", "request", "queued", "stop", "reserved_at")


def run_json(run: dict[str, Any]) -> dict[str, Any]:
    """Return a run record as the SDK reads it."""
    shown = {k: v for k, v in run.items() if k not in _UNSHOWN}
    return {**shown, "kwargs": run.get("request") or {}}


async def thread_values(who: Caller, thread_id: str) -> dict[str, Any]:
    """Return the thread's values, with `__interrupt__` while it waits for an answer."""
    thread = await find_thread(who, thread_id)
    session = await who.sessions.read(thread_id) or SessionDocument()
    messages = [to_sdk(m, message_id(thread_id, i), a) for i, (a, m) in enumerate(session.messages)]
    values: dict[str, Any] = {**session.values, "messages": messages}
    status, pending = await thread_status(who, thread)
    if status == "interrupted":
        values["__interrupt__"] = pending
    return values
