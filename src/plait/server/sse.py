"""A run's answer as server-sent events, written straight to the ASGI server.

One `event: agent_event` per event (data: the event's JSON), then one `event: run_end`
(data: the run summary). A run asked for deltas (`"deltas": true`, `DeltaRelay`) also
sends, before the `agent_event` of a streamed message, one `event: agent_delta` per chunk
of its text as the model writes it: `{"agent_name", "run_path", "depth", "delta"}`. A
comment line (`: ping`) every `PING_INTERVAL` seconds keeps a quiet stream open through
proxies. A client that leaves ends the stream, not the run.

Each stream costs one small task (it listens for the client leaving) and one timer (the
next ping); the run's queue wakes it for everything else (`plait.server.runs.Nudge`).
Whatever the queue holds when the stream wakes is sent in one write.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
from collections.abc import Mapping
from typing import Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from plait.events import AgentEvent
from plait.server.bodies import RunSummary
from plait.server.runs import Item, Nudge, Relay
from plait.server.summary import encode_event

__all__ = ["PING_INTERVAL", "DeltaRelay", "EventStream", "Feed", "encode", "server_exiting"]

#: Seconds between two comment lines of a stream.
PING_INTERVAL = 15.0

_PING = b": ping\r\n\r\n"
_AGENT_EVENT = b"event: agent_event\r\n"
_RUN_END = b"event: run_end\r\n"
_AGENT_DELTA = b"event: agent_delta\r\n"


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


class Feed(Protocol):
    """What a stream reads: a live run (`LiveRun`), or another source of its queue's items
    (a client re-attached to a run's kept events)."""

    queue: asyncio.Queue[Item]
    relay: Relay

    def nudge(self, nudge: Nudge) -> None:
        """Wake the reader of the queue with `nudge`."""


class EventStream(Response):
    """The `text/event-stream` answer of a live run (see the module's docstring)."""

    media_type = "text/event-stream"

    def __init__(self, run: Feed, headers: Mapping[str, str]) -> None:
        self.run = run
        self.status_code = 200
        self.background = None
        defaults = {"cache-control": "no-store", "connection": "keep-alive"}
        self.init_headers({**defaults, "x-accel-buffering": "no", **headers})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the run's events as they come, then its summary; stop if the client leaves."""
        run = self.run
        loop = asyncio.get_running_loop()
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        listener = loop.create_task(_listen(receive, run))
        ping = loop.call_later(PING_INTERVAL, run.nudge, Nudge.PING)
        try:
            while True:
                chunks: list[bytes] = []
                item = await run.queue.get()
                while True:  # what is queued already goes out in one write
                    if isinstance(item, str):
                        chunks.append(encode(_AGENT_EVENT, item))
                    elif isinstance(item, bytes):  # framed by the run's relay
                        chunks.append(item)
                    elif isinstance(item, RunSummary):
                        end = run.relay.closing(item)
                        chunks.append(
                            encode(_RUN_END, item.model_dump_json()) if end is None else end
                        )
                        body = b"".join(chunks)
                        await send({"type": "http.response.body", "body": body, "more_body": False})
                        return
                    elif item is Nudge.PING:
                        chunks.append(_PING)
                        ping = loop.call_later(PING_INTERVAL, run.nudge, Nudge.PING)
                    else:  # the client left: nobody reads any more
                        return
                    if run.queue.empty():
                        break
                    item = run.queue.get_nowait()
                body = b"".join(chunks)
                await send({"type": "http.response.body", "body": body, "more_body": True})
        finally:
            ping.cancel()
            listener.cancel()


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
