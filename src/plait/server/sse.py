"""A run's answer as server-sent events, written straight to the ASGI server.

One `event: agent_event` per event (data: the event's JSON), then one `event: run_end`
(data: the run summary). A run asked for deltas (`"deltas": true`, `DeltaRelay`) also
sends, before the `agent_event` of a streamed message, one `event: agent_delta` per chunk
of its text as the model writes it: `{"agent_name", "run_path", "depth", "delta"}`. A
comment line (`: ping`) every `PING_INTERVAL` seconds keeps a quiet stream open through
proxies. A client that leaves ends the stream, not the run.

Each stream costs one small task (it listens for the client leaving) and a place in the
loop's list of pings (one timer for all the loop's streams, `_Timers`); the run's queue
wakes it for everything else (`plait.server.runs.Nudge`). Whatever the queue holds when
the stream wakes is sent in one write.

The head of the answer (its status and headers) goes out with the run's first event, in
the same write, as Go's and Node's HTTP servers send a head with the first bytes of its
body: a client is woken once for both, not twice. A run slow to give its first event (a
model that takes its time) does not keep the head: it goes out alone once `HEAD_HOLD`
seconds have passed. What a protocol's relay queues before the run's events (the Agent
Protocol's `metadata` event, `Relay.opening`) waits with the head.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
from collections import deque
from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Any, Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from plait._util.json import to_json
from plait.events import AgentEvent
from plait.server.bodies import RunSummary
from plait.server.runs import Item, Nudge, Relay
from plait.server.summary import encode_event

__all__ = [
    "HEAD_HOLD",
    "PING_INTERVAL",
    "DeltaRelay",
    "EventStream",
    "Feed",
    "ItemQueue",
    "encode",
    "server_exiting",
]

#: Seconds between two comment lines of a stream.
PING_INTERVAL = 15.0

#: Seconds at most a stream's head (its status and headers) waits for the run's first
#: event, to be written with it (see the module's docstring).
HEAD_HOLD = 0.1

_PING = b": ping\r\n\r\n"
_AGENT_EVENT = b"event: agent_event\r\n"
_RUN_END = b"event: run_end\r\n"
_AGENT_DELTA = b"event: agent_delta\r\n"

_MEDIA_TYPE = "text/event-stream"
#: The headers of every stream, before those given (the given ones may not change these).
_DEFAULTS = {"cache-control": "no-store", "connection": "keep-alive", "x-accel-buffering": "no"}
_HEADERS = tuple((name.encode(), value.encode()) for name, value in _DEFAULTS.items())
_CONTENT_TYPE = (b"content-type", f"{_MEDIA_TYPE}; charset=utf-8".encode())
_SET_HERE = frozenset({*_DEFAULTS, "content-type", "content-length"})


#: Characters that some clients take for line ends (`str.splitlines`, httpx's
#: `iter_lines`) though SSE does not. JSON holds them only inside strings, where the
#: escape means the same character, so they are sent escaped and no client can see a
#: line end that the server did not write.
_ESCAPES = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
_LINE_ENDS = re.compile(r"\r\n|\r|\n")


def encode(name: bytes, data: str) -> bytes:
    """Return one event: its `event:` line, a `data:` line per line of `data`, a blank line.

    `data` is JSON text: the characters that only some clients split lines on (U+0085,
    U+2028, U+2029) are written as JSON escapes.
    """
    if not data.isascii():  # (an ASCII text, as most JSON is, holds none of them)
        data = data.translate(_ESCAPES)
    if "\n" not in data and "\r" not in data:
        return b"%bdata: %b\r\n\r\n" % (name, data.encode())
    lines = b"".join(b"data: %b\r\n" % line.encode() for line in _LINE_ENDS.split(data))
    return name + lines + b"\r\n"


class DeltaRelay(Relay):
    """Send each streamed text chunk as it comes (`agent_delta`), then the whole event."""

    async def relay(self, event: AgentEvent) -> None:
        """Queue an `agent_delta` per text chunk of a streamed message, then the event."""
        variant = event.message
        if variant is not None and variant.stream is not None:
            head: dict[str, object] = {
                "agent_name": event.agent_name,
                "run_path": list(event.run_path),
                "depth": event.depth,
            }
            with contextlib.suppress(Exception):  # the stream's error is the run's to report
                async for chunk in variant.stream:
                    if chunk.content:
                        data = json.dumps({**head, "delta": chunk.content})
                        self.put(encode(_AGENT_DELTA, data))
        self.put(await encode_event(event))


class ItemQueue(Protocol):
    """The queue a stream reads (a `RunQueue`, or an `asyncio.Queue`)."""

    def empty(self) -> bool:
        """Whether no item is queued."""

    def qsize(self) -> int:
        """Return the number of items queued."""

    def get_nowait(self) -> Item:
        """Return the first item queued (`asyncio.QueueEmpty`: none)."""

    async def get(self) -> Item:
        """Return the first item queued, once there is one."""


class Feed(Protocol):
    """What a stream reads: a live run (`LiveRun`), or another source of its queue's items
    (a client re-attached to a run's kept events)."""

    @property
    def queue(self) -> ItemQueue:
        """The queue of what the stream sends."""

    relay: Relay

    def nudge(self, nudge: Nudge) -> None:
        """Wake the reader of the queue with `nudge`."""


class EventStream(Response):
    """The `text/event-stream` answer of a live run (see the module's docstring)."""

    media_type = _MEDIA_TYPE

    def __init__(self, run: Feed, headers: Mapping[str, str]) -> None:
        self.run = run
        self.status_code = 200
        self.background = None
        raw = list(_HEADERS)  # what `init_headers` makes of them, made here for less
        fixed = self.media_type == _MEDIA_TYPE and self.charset == "utf-8"
        for name, value in headers.items():
            key = name.lower()
            if key in _SET_HERE or not fixed:  # (a header given in place of one of these)
                self.init_headers({**_DEFAULTS, **headers})
                return
            raw.append((key.encode("latin-1"), value.encode("latin-1")))
        if not fixed:
            self.init_headers(_DEFAULTS)
            return
        raw.append(_CONTENT_TYPE)
        self.raw_headers = raw

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the run's events as they come, then its summary; stop if the client leaves."""
        run = self.run
        queue = run.queue
        loop = asyncio.get_running_loop()
        head: dict[str, Any] | None = {
            "type": "http.response.start",
            "status": 200,
            "headers": self.raw_headers,
        }
        listener = loop.create_task(_listen(receive, run))
        pings, holds = _timers(loop)
        ping = pings.add(run.nudge)
        # the head waits for the run's first event, to go out in one write with it (or
        # alone once `HEAD_HOLD` has passed): what the relay queued first may wait with it
        opening = run.relay.opening
        hold = holds.add(run.nudge) if queue.qsize() <= opening else None
        chunks: list[bytes] = []
        try:
            while True:
                taken, then = self._gather(await queue.get(), chunks)
                if then is _LEFT:  # the client left: nobody reads any more
                    if head is not None:  # (sent to nobody: the answer is whole)
                        await send(head)
                    return
                if head is not None:
                    opening = -1 if then is _OPEN else opening - taken
                    if opening >= 0 and then is None:  # only what the relay queued first
                        continue
                    await send(head)
                    head = None
                    if hold is not None:
                        hold[1] = None  # no more waiting
                if then is _END:
                    body = b"".join(chunks)
                    await send({"type": "http.response.body", "body": body, "more_body": False})
                    return
                if chunks:
                    body = b"".join(chunks)
                    chunks = []
                    await send({"type": "http.response.body", "body": body, "more_body": True})
        finally:
            ping[1] = None  # no more pings
            listener.cancel()
            if hold is not None:
                hold[1] = None

    def _gather(self, item: Item, chunks: list[bytes]) -> tuple[int, object]:
        """Add to `chunks` what `item` and the items queued after it send (what is queued
        already goes out in one write); return how many items were taken, and `_END` (the
        summary was added last), `_LEFT` (the client left), `_OPEN` (the head must go out)
        or None."""
        run = self.run
        queue = run.queue
        taken, then = 0, None
        while True:
            taken += 1
            if isinstance(item, tuple):  # an event's text with its frame
                chunks.append(item[1])
            elif isinstance(item, str):
                chunks.append(encode(_AGENT_EVENT, item))
            elif isinstance(item, bytes):  # framed by the run's relay
                chunks.append(item)
            elif isinstance(item, RunSummary):
                end = run.relay.closing(item)
                chunks.append(encode(_RUN_END, to_json(item)) if end is None else end)
                return taken, _END
            elif item is Nudge.PING:
                chunks.append(_PING)
            elif item is Nudge.OPEN:
                then = _OPEN
            else:
                return taken, _LEFT
            if queue.empty():
                return taken, then
            item = queue.get_nowait()


_END, _LEFT, _OPEN = object(), object(), object()  # what `EventStream._gather` found last


class _Timers:
    """Nudges of the streams of one loop, with one timer for them all: each stream's comes
    `interval()` seconds after it was added (and again every `interval()` when `repeat`).

    Each stream has an entry, `[when, nudge]`, in the order of `when` (every stream waits
    the same interval); the timer wakes at the first, nudges each stream whose time has
    come (a stream that no longer waits has no `nudge` left, and is dropped) and, when
    `repeat`, puts it back an interval later. The timer wakes at most every eighth of the
    interval: a nudge may come that much later.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        nudge: Nudge = Nudge.PING,
        interval: Callable[[], float] = lambda: PING_INTERVAL,
        *,
        repeat: bool = True,
    ) -> None:
        self.loop = loop
        self.nudge = nudge
        self.interval = interval
        self.repeat = repeat
        self.due: deque[list[Any]] = deque()
        self.timer: asyncio.TimerHandle | None = None

    def add(self, nudge: Callable[[Nudge], None]) -> list[Any]:
        """Nudge by `nudge` after the interval, until the entry returned loses it."""
        entry: list[Any] = [self.loop.time() + self.interval(), nudge]
        due = self.due
        if due and entry[0] < due[-1][0]:
            self._put(entry)
        else:  # (in order: what `_put` does)
            due.append(entry)
        timer = self.timer
        if timer is None or entry[0] < timer.when():
            if timer is not None:
                timer.cancel()
            self.timer = self.loop.call_at(entry[0], self._wake)
        return entry

    def _put(self, entry: list[Any]) -> None:
        due = self.due
        if due and entry[0] < due[-1][0]:  # (the interval was made shorter meanwhile)
            self.due = deque(sorted([*due, entry], key=itemgetter(0)))
        else:
            due.append(entry)

    def _wake(self) -> None:
        now = self.loop.time()
        due = self.due
        interval = self.interval()
        for _ in range(len(due)):  # (each stream at most once a wake)
            if due[0][0] > now:
                break
            entry = due.popleft()
            nudge = entry[1]
            if nudge is not None:  # (the stream still waits)
                if self.repeat:
                    entry[0] = now + interval
                    self._put(entry)
                    due = self.due
                nudge(self.nudge)
        self.timer = None
        if due:
            then = max(due[0][0], now + interval / 8)
            self.timer = self.loop.call_at(then, self._wake)


#: The pings of the streams of the loop that started a stream last, and their heads'
#: waits (each loop's, as streams start on it).
_pings: _Timers | None = None
_holds: _Timers | None = None


def _timers(loop: asyncio.AbstractEventLoop) -> tuple[_Timers, _Timers]:
    """Return the pings and the heads' waits of the streams of `loop`."""
    global _pings, _holds
    if _pings is None or _holds is None or _pings.loop is not loop:
        _pings = _Timers(loop)
        _holds = _Timers(loop, Nudge.OPEN, lambda: HEAD_HOLD, repeat=False)
    return _pings, _holds


async def _listen(receive: Receive, run: Feed) -> None:
    """Wait for the client to leave; then wake the stream so that it stops."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            run.nudge(Nudge.STOP)
            return


def server_exiting() -> bool:
    """Whether the uvicorn server of this process was asked to stop (SIGINT or SIGTERM).

    uvicorn waits for open responses before it shuts the app down; the app watches this
    to stop its runs first, so that their streams end. Only a server running in the main
    thread (the `uvicorn` command, `uvicorn.run`) installs the signal handler looked at.
    """
    with contextlib.suppress(Exception):  # no handler, or not uvicorn's
        handler = signal.getsignal(signal.SIGTERM)
        return getattr(getattr(handler, "__self__", None), "should_exit", False) is True
    return False
