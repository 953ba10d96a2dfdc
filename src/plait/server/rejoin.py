"""Re-attaching to a run's live events on `/v1`: `GET /v1/runs/{run_id}/stream`.

Every run that `/v1` starts, resumes or forks (`kept_relay`) keeps what its response sends
— each `agent_event`, each `agent_delta` and the `run_end` — in a log of the process that
runs it (the Agent Protocol's `RunLog`, `plait.protocols.agent_protocol.replay`), each item
numbered from 0: the n-th item of the run's `POST` stream has id n. A resumed run keeps a
new log from its resume on, under the same run id. `GET /v1/runs/{id}/stream` (the run's
`run_id`, or any checkpoint id of it) sends the log's items after the client's
`Last-Event-ID` (all of them without one), each with its `id:`, then each new item as it
comes, to the `run_end`. A client that leaves ends its stream, never the run.

A process keeps the logs of its live runs and of the last `KEPT` that ended. A run of
another process (or one whose log is gone) is followed through the store: the stream waits
for the run to leave "running" (looking every `cancel_poll` seconds, with the stream's
pings meanwhile) and sends one `run_end` with its summary.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from starlette.types import Receive, Scope, Send

from plait._util.json import to_json
from plait._util.per_object import PerObject
from plait.errors import CheckpointNotFound
from plait.protocols.agent_protocol.replay import ResumableStream, RunLog, RunLogs
from plait.server.bodies import RunSummary, error_responses
from plait.server.caller import CHECKPOINT_HEADER
from plait.server.limits import ApiError
from plait.server.run_queue import RunQueue
from plait.server.runs import Item, LiveRun, Nudge, Relay, Runs
from plait.server.sse import DeltaRelay, encode
from plait.server.users import is_safe_id

__all__ = ["kept_relay", "rejoin_router"]

_EVENT = b"event: agent_event\r\n"
_END = b"event: run_end\r\n"

#: The logs of each app's runs in this process, by the app's `Runs`.
_logs: PerObject[Runs, RunLogs] = PerObject(RunLogs)


def _key(user: str, run_id: str) -> str:
    return f"{user}\n{run_id}"


def _frame(item: str | bytes | tuple[str, bytes] | RunSummary) -> tuple[str, bytes]:
    """Return the name of an item of a run's queue and the frame its stream sends."""
    if isinstance(item, str):
        return "agent_event", encode(_EVENT, item)
    if isinstance(item, bytes):  # an `agent_delta`, framed by the run's relay
        return "agent_delta", item
    if isinstance(item, tuple):  # an event's text, framed already
        return "agent_event", item[1]
    return "run_end", encode(_END, to_json(item))


def _framed(item: str | bytes | RunSummary, event_id: int) -> tuple[str, bytes]:
    """Return an item of a run's queue as its stream sends it, with its `id:`."""
    name, frame = _frame(item)
    return name, b"id: %d\r\n" % event_id + frame


class _Kept(RunQueue[Item]):
    """A run's queue that also keeps each item it carries (not the nudges) in `log`.

    What it frames for the log goes on to the stream: an event's text with its frame (sent
    as it is), and the frame of the `run_end` in `end` (for the relay's `closing`).
    """

    __slots__ = ("end", "log")

    def __init__(self, log: RunLog) -> None:
        super().__init__()
        self.log = log
        self.end: tuple[RunSummary, bytes] | None = None

    def put_nowait(self, item: Item) -> None:
        """Keep `item` in the log (framed, with its id), then queue it."""
        log = self.log
        if isinstance(item, str):
            if not log.ended:
                frame = encode(_EVENT, item)
                log.add("agent_event", b"id: %d\r\n" % len(log.events) + frame)
                item = (item, frame)
        elif log.ended or isinstance(item, Nudge):
            pass
        else:
            name, frame = _frame(item)
            log.add(name, b"id: %d\r\n" % len(log.events) + frame)
            if isinstance(item, RunSummary):
                self.end = (item, frame)
                log.end()
        self._items.append(item)  # (`RunQueue.put_nowait`, inline)
        waiter = self._waiter
        if waiter is not None and not self._held and not waiter.done():
            waiter.set_result(None)


class _Keeping(Relay):
    """A relay whose run keeps its stream in the app's logs (see the module's docstring)."""

    def __init__(self, logs: RunLogs) -> None:
        self._logs = logs
        self._kept: _Kept | None = None

    def attach(self, run: LiveRun) -> None:
        """Serve `run`, keeping what its queue carries in a new log of its run id."""
        run.queue = self._kept = _Kept(self._logs.open(_key(run.store.user, run.run_id)))
        super().attach(run)

    def closing(self, summary: RunSummary) -> bytes | None:
        """Return the `run_end` of `summary` as the log keeps it (framed once)."""
        end = None if self._kept is None else self._kept.end
        return end[1] if end is not None and end[0] is summary else None


class _KeepingDeltas(_Keeping, DeltaRelay):
    """`_Keeping`, sending each streamed text chunk as it comes (`DeltaRelay`)."""


def kept_relay(runs: Runs, deltas: bool) -> Relay:
    """Return the relay of a `/v1` run of `runs` (`deltas`: with its text chunks), whose
    stream a client can re-attach to."""
    return _KeepingDeltas(_logs(runs)) if deltas else _Keeping(_logs(runs))


class _Awaited(ResumableStream):
    """The stream of a run this process keeps no log of: its `run_end`, once it ended."""

    def __init__(
        self, log: RunLog, headers: dict[str, str], until_end: Callable[[], Awaitable[None]]
    ) -> None:
        super().__init__(log.follow(None, frozenset()), headers, log, None)
        self._until_end = until_end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send pings until the run ends, then its `run_end`."""
        waiting = asyncio.ensure_future(self._until_end())
        try:
            await super().__call__(scope, receive, send)
        finally:
            waiting.cancel()
            with contextlib.suppress(BaseException):
                await waiting


def _after(request: Request) -> int | None:
    """Return the id of the last event the client has (`Last-Event-ID`; None: none)."""
    given = request.headers.get("last-event-id", "").strip()
    if given and not given.isdigit():
        raise ApiError(422, f"Last-Event-ID '{given[:32]}' is not an event id")
    return int(given) if given else None


async def _follow_store(who: Any, run_id: str, log: RunLog) -> None:
    """Wait until run `run_id` is no longer running (as the store says); end `log` with
    its `run_end`."""
    runs: Runs = who.server.runs
    try:
        while True:
            summary = await runs.summary(who.store, run_id)
            if summary.status != "running":
                break
            await asyncio.sleep(runs.cancel_poll)
        log.add(*_framed(summary, 0))
    finally:  # a store that fails ends the stream (the client may ask again)
        log.end()


_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "`text/event-stream`: the run's `agent_event`s, `agent_delta`s and `run_end`, "
            "each with its `id:`, from after `Last-Event-ID`."
        ),
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    **error_responses(
        {401: "No valid API key.", 404: "Unknown run.", 422: "A bad `Last-Event-ID`."},
        401,
        404,
        422,
    ),
}


def rejoin_router(caller: Callable[..., Any]) -> APIRouter:
    """Return `GET /v1/runs/{run_id}/stream`; `caller` is the app's dependency that checks
    the API key."""
    router = APIRouter(tags=["runs"])
    caller_dep: Any = Depends(caller)

    @router.get(
        "/v1/runs/{run_id}/stream", summary="Re-attach to a run's events", responses=_RESPONSES
    )
    async def rejoin(run_id: str, request: Request, who: Any = caller_dep) -> Response:
        """Stream the run's events after `Last-Event-ID` (all without one), then as they
        come, to its `run_end`; a run of another process: its `run_end` once it ends."""
        if not is_safe_id(run_id):
            raise CheckpointNotFound(f"no run '{run_id[:128]}'")
        after = _after(request)
        record = await who.server.runs.record(who.store, run_id)
        first = record.run_id or run_id
        headers = {CHECKPOINT_HEADER: record.checkpoint_id or first}
        logs = _logs(who.server.runs)
        log = logs.get(_key(who.user, first))
        if log is None and record.status == "running":  # it may be opening its log now
            log = await logs.wait(_key(who.user, first), who.server.runs.cancel_poll)
        if log is not None:
            return ResumableStream(log.follow(after, frozenset()), headers, log, None)
        awaited = RunLog(first)
        return _Awaited(awaited, headers, lambda: _follow_store(who, first, awaited))

    return router
