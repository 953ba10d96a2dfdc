"""A thread run's stream kept while it runs, so a client can re-attach (`join_stream`).

Every event a run's `ProtocolRelay` sends carries an `id:` (0, 1, 2, ... per run) and is
kept in the run's `RunLog`, in the process that runs it. `join_stream` sends what the log
holds after the client's `Last-Event-ID` (all of it without one), then each new event as
it comes, to the run's `end` or `error`. The logs of the live runs are kept, and those of
the last `KEPT` runs that ended. A run of another process (or one that ended longer ago)
has no log here: re-attaching to it waits for its end and sends the thread's final
values (`plait.protocols.agent_protocol.runs`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping

from starlette.types import Receive, Scope, Send

from plait.server.bodies import RunSummary
from plait.server.limits import ApiError
from plait.server.runs import Item, Nudge, Relay
from plait.server.sse import EventStream, Feed

__all__ = ["KEPT", "Follower", "ResumableStream", "RunLog", "RunLogs", "event_id"]

#: How many ended runs' logs a process keeps.
KEPT = 256
#: The stream mode each event belongs to (events not listed are always sent).
_MODE_OF = {"messages": {"messages-tuple", "messages"}}


def event_id(given: str | None) -> int | None:
    """Return the event id of a `Last-Event-ID` header (None: none given).

    Raises:
        ApiError: `422`, not an event id.
    """
    if not given:
        return None
    try:
        return int(given)
    except ValueError:
        raise ApiError(422, f"Last-Event-ID '{given[:32]}' is not an event id") from None


class RunLog:
    """The events of one run, as sent (framed, with their ids), and who follows them."""

    def __init__(self, run_id: str, on_end: Callable[[RunLog], None] | None = None) -> None:
        self.run_id = run_id
        self.events: list[tuple[str, bytes]] = []  # (event name, framed event)
        self.ended = False
        self._followers: set[Follower] = set()
        self._done: asyncio.Event | None = None  # made for the first who waits for the end
        self._on_end = on_end  # told once, when the run's last event was added

    def add(self, name: str, framed: bytes) -> None:
        """Keep the event `name` (`framed`, with its id) and pass it to the followers."""
        if self.ended:
            return
        self.events.append((name, framed))
        if self._followers:
            for follower in list(self._followers):
                follower.take(name, framed)

    def end(self) -> None:
        """The run's last event was added: its followers' streams end."""
        if not self.ended and self._on_end is not None:
            self._on_end(self)
        self.ended = True
        if self._done is not None:
            self._done.set()
        if self._followers:
            for follower in list(self._followers):
                follower.finish()
            self._followers.clear()

    def follow(self, after: int | None, modes: frozenset[str]) -> Follower:
        """Return a follower of this log, holding what came after event id `after` (None:
        everything) in `modes` (empty: every mode), which then gets each new event."""
        follower = Follower(self, modes)
        start = 0 if after is None else after + 1
        for name, framed in self.events[start:]:
            follower.take(name, framed)
        if self.ended:
            follower.finish()
        else:
            self._followers.add(follower)
        return follower

    async def wait_end(self) -> None:
        """Wait until the run's last event was added."""
        if self.ended:
            return
        if self._done is None:
            self._done = asyncio.Event()
        await self._done.wait()

    def leave(self, follower: Follower) -> None:
        """Stop passing events to `follower` (its client left)."""
        self._followers.discard(follower)


class _Closing(Relay):
    """A follower's stream ends with what its log sent last (already queued)."""

    def closing(self, summary: RunSummary) -> bytes | None:
        """Return nothing more: the run's `end` or `error` was sent from the log."""
        return b""


class Follower:
    """One client re-attached to a run: the queue its stream reads (`EventStream`)."""

    def __init__(self, log: RunLog, modes: frozenset[str]) -> None:
        self.log = log
        self.modes = modes
        self.queue: asyncio.Queue[Item] = asyncio.Queue()
        self.relay: Relay = _Closing()

    def take(self, name: str, framed: bytes) -> None:
        """Queue an event of the run, if its stream mode was asked for."""
        wanted = _MODE_OF.get(name, {name})
        if not self.modes or name in ("metadata", "end", "error") or wanted & self.modes:
            self.queue.put_nowait(framed)

    def finish(self) -> None:
        """The run ended: end the stream after what is queued."""
        self.queue.put_nowait(RunSummary(status="completed", agent=""))

    def nudge(self, nudge: Nudge) -> None:
        """Wake the reader of the queue with `nudge`."""
        self.queue.put_nowait(nudge)


class RunLogs:
    """The run logs of one app in this process: the live runs' and the last ended ones'."""

    def __init__(self) -> None:
        self._logs: dict[str, RunLog] = {}
        self._ended: OrderedDict[str, RunLog] = OrderedDict()  # the ended logs, oldest first
        self._waiting: dict[str, set[asyncio.Event]] = {}

    def open(self, run_id: str) -> RunLog:
        """Return a new log for run `run_id` (the oldest ended ones past `KEPT` are
        forgotten as runs end)."""
        log = RunLog(run_id, self._ended_log)
        self._logs[run_id] = log
        self._ended.pop(run_id, None)
        waiting = self._waiting.pop(run_id, None) if self._waiting else None
        for waiter in waiting or ():
            waiter.set()
        return log

    def _ended_log(self, log: RunLog) -> None:
        """Keep `log` among the ended ones; forget the oldest past `KEPT`."""
        if self._logs.get(log.run_id) is not log:
            return  # a log this one no longer keeps
        self._ended[log.run_id] = log
        while len(self._ended) > KEPT:
            key, _ = self._ended.popitem(last=False)
            del self._logs[key]

    def get(self, run_id: str) -> RunLog | None:
        """Return the log of run `run_id`, if this process keeps it."""
        return self._logs.get(run_id)

    async def wait(self, run_id: str, seconds: float) -> RunLog | None:
        """Return the log of run `run_id` once this process opens it, or None after
        `seconds`."""
        found = self._logs.get(run_id)
        if found is not None:
            return found
        opened = asyncio.Event()
        self._waiting.setdefault(run_id, set()).add(opened)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(opened.wait(), seconds)
        finally:
            waiters = self._waiting.get(run_id)
            if waiters is not None:
                waiters.discard(opened)
                if not waiters:
                    del self._waiting[run_id]
        return self._logs.get(run_id)


class ResumableStream(EventStream):
    """A run's event stream that, when its client leaves before the run ends, calls
    `on_leave` (a cancel, for `on_disconnect="cancel"`) and stops following the log."""

    def __init__(
        self,
        feed: Feed,
        headers: Mapping[str, str],
        log: RunLog,
        on_leave: Callable[[], Awaitable[None]] | None,
    ) -> None:
        super().__init__(feed, headers)
        self._log = log
        self._on_leave = on_leave

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the stream; on a client that left early, stop following and call `on_leave`."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            if isinstance(self.run, Follower):
                self._log.leave(self.run)
            if not self._log.ended and self._on_leave is not None:
                await self._on_leave()
