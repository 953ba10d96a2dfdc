"""Stateless runs (`/runs`, `/runs/stream`, `/runs/wait`, `/runs/batch`): each runs on a
temporary thread of its own, made for it, with the options of a thread's run
(`plait.protocols.agent_protocol.runs`).

When the run ends, its thread (its session) and the run's record are deleted, as
`on_completion="delete"`, the default, asks; `on_completion="keep"` keeps them, so the
thread named in the run's record can be read, run on and joined as any other.
`/runs/batch` starts several background runs at once, each on its own thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse

from plait.protocols.agent_protocol.replay import RunLogs
from plait.protocols.agent_protocol.runs import (
    RunCreate,
    create_run,
    join_run,
    stream_run,
    wait_run,
)
from plait.protocols.agent_protocol.shapes import errors
from plait.protocols.agent_protocol.thread_records import runs_document
from plait.protocols.agent_protocol.threads import delete_thread, make_thread
from plait.server.caller import Caller
from plait.server.limits import ApiError

__all__ = ["stateless_router"]

_log = logging.getLogger(__name__)

#: The most runs one `/runs/batch` starts.
MAX_BATCH = 100


class _Temporary:
    """The temporary threads of this process's stateless runs, and the tasks that delete
    each once its run ends."""

    def __init__(self, logs: RunLogs):
        self.logs = logs
        self._tasks: set[asyncio.Task[None]] = set()

    async def open(self, who: Caller, body: RunCreate) -> str:
        """Make the run's thread; return its id."""
        if body.command is not None and "resume" in body.command:
            raise ApiError(422, "a stateless run has no pause to resume; name its thread")
        return str((await make_thread(who, None, {}, None))["thread_id"])

    def drop_later(self, who: Caller, thread_id: str, body: RunCreate) -> None:
        """Delete the thread once its runs end, unless `on_completion="keep"`."""
        if body.on_completion != "keep":
            task = asyncio.create_task(self._drop_quietly(who, thread_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _drop_quietly(self, who: Caller, thread_id: str) -> None:
        try:
            await self.drop(who, thread_id)
        except Exception as exc:  # a failure is logged: no one waits for this task
            _log.warning("temporary thread %s was not deleted: %s", thread_id, exc)

    async def drop(self, who: Caller, thread_id: str) -> None:
        """Wait for the thread's runs to end, then delete it and their records."""
        document = runs_document(who, thread_id)
        keys = list(await document.read())
        for run_id in keys:
            await join_run(who, thread_id, run_id, self.logs)
            log = self.logs.get(run_id)
            if log is not None:
                await log.wait_end()
        await document.delete()  # the records first: a thread seen gone has none left
        with contextlib.suppress(ApiError):  # deleted already
            await delete_thread(who, thread_id)

    async def failed(self, who: Caller, thread_id: str) -> None:
        """Delete the thread of a run that did not start."""
        with contextlib.suppress(ApiError):
            await delete_thread(who, thread_id)


_STARTING = errors(401, 404, 409, 422, 501)


def stateless_router(caller: Callable[..., Any], logs: RunLogs) -> APIRouter:
    """Return the stateless run routes; `caller` is the app's dependency that checks the
    API key, `logs` the events of this process's runs (shared with a thread's runs)."""
    router = APIRouter(tags=["agent protocol: runs"])
    who_dep: Any = Depends(caller)
    temporary = _Temporary(logs)

    async def started(who: Caller, body: RunCreate, start: Any, ended: bool = False) -> Any:
        """Answer `start` on a new temporary thread (`ended`: the run has ended once it
        answers, so its thread is deleted before the answer goes)."""
        thread_id = await temporary.open(who, body)
        try:
            answer = await start(who, thread_id, body, logs)
        except BaseException:
            await temporary.failed(who, thread_id)
            raise
        if ended and body.on_completion != "keep":
            await temporary.drop(who, thread_id)
        else:
            temporary.drop_later(who, thread_id, body)
        return answer

    @router.post("/runs/stream", summary="Stream a stateless run", responses=_STARTING)
    async def stream(body: RunCreate, who: Caller = who_dep) -> Response:
        """Run the assistant on a temporary thread; answer with its events."""
        if body.after_seconds:
            raise ApiError(501, "after_seconds on a streamed run is not served by plait yet")
        return await started(who, body, stream_run)  # type: ignore[no-any-return]

    @router.post("/runs/wait", summary="Run statelessly and wait", responses=_STARTING)
    async def wait(body: RunCreate, who: Caller = who_dep) -> Response:
        """Run the assistant on a temporary thread; answer with its values at the end."""
        return await started(who, body, wait_run, ended=True)  # type: ignore[no-any-return]

    @router.post("/runs", summary="Start a stateless run", responses=_STARTING)
    async def create(body: RunCreate, who: Caller = who_dep) -> JSONResponse:
        """Start a background run on a temporary thread; answer its record at once."""
        return await started(who, body, create_run)  # type: ignore[no-any-return]

    @router.post("/runs/batch", summary="Start stateless runs", responses=_STARTING)
    async def batch(bodies: list[RunCreate], who: Caller = who_dep) -> list[Any]:
        """Start a background run on a temporary thread for each payload; answer their
        records."""
        if len(bodies) > MAX_BATCH:
            raise ApiError(422, f"a batch has at most {MAX_BATCH} runs, not {len(bodies)}")
        answers = [await started(who, body, create_run) for body in bodies]
        return [json.loads(bytes(answer.body)) for answer in answers]

    return router
