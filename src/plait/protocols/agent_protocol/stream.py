"""A thread run's events as the SDK streams them (`stream_mode`), and its end recorded.

`ProtocolRelay` is the run's relay (`plait.server.runs.Relay`): the server's run sends its
events through it, so the SSE writer, the queue and the run itself are the server's. It
sends `metadata` first (`{"run_id", "attempt"}`), then per mode asked:
- `values`: the thread's values (`{"messages": [...], **session values}`) at the start
  and after each message of the root agent (the session values as the run has them);
- `updates`: `{agent name: {"messages": [message]}}` per message of any agent, and a graph
  node's `{node: update}` as the node finishes;
- `messages-tuple` (and `messages`): `[chunk, {"langgraph_node": agent, ...}]` per chunk
  of text a model streams, then the whole message;
- `custom`: what a tool sends with `ctx.emit(value)` (the `custom` value of its event; a
  graph's final state too);
- `debug`: each event's own JSON, as `{"type": "event", "payload": ...}`.
A pause adds `{"__interrupt__": [{"value", "id"}]}` to `values` and `updates`. The stream
ends with `end`, or with `error` (`{"error": <plait error class>, "message"}`) when the
run failed. Values go out as compact JSON, plait messages in them in the SDK's shape. Each event
has an `id:` (its place in the run's stream, from 0) and is kept in the run's log
(`plait.protocols.agent_protocol.replay`) for clients that re-attach. When
the run ends its status is written to the protocol's run record, then its last event is
kept, then `then` (if any) runs: the thread's next queued run starts there.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from json.encoder import encode_basestring_ascii
from typing import Any

from plait._util.json import plain_json
from plait.core.agent import AgentInput
from plait.core.agent_context import HookContext
from plait.events import AgentEvent, MessageVariant, RunResult
from plait.messages import Message
from plait.protocols.agent_protocol.messages import message_id, to_sdk
from plait.protocols.agent_protocol.replay import RunLog
from plait.server.bodies import RunSummary
from plait.server.limits import ApiError
from plait.server.runs import LiveRun, Relay
from plait.server.sse import encode
from plait.server.summary import summarize

__all__ = [
    "MODES",
    "ProtocolRelay",
    "final_log",
    "node_update",
    "plain",
    "run_status",
    "stream_modes",
]

_log = logging.getLogger("plait.server")

#: The stream modes served.
MODES = frozenset({"values", "updates", "messages-tuple", "messages", "custom", "debug"})
#: A server run's status -> the protocol's run status.
_STATUS = {
    "running": "running",
    "completed": "success",
    "paused": "interrupted",
    "cancelled": "interrupted",
    "failed": "error",
}


def stream_modes(stream_mode: str | list[str]) -> frozenset[str]:
    """Return the stream modes a run asks for (`stream_mode`: one, or a list).

    Raises:
        ApiError: `422`, a mode not served.
    """
    modes = frozenset([stream_mode] if isinstance(stream_mode, str) else stream_mode)
    unknown = sorted(modes - MODES)
    if unknown:
        raise ApiError(422, f"stream_mode {unknown} is not one of {sorted(MODES)}")
    return modes


def run_status(summary: RunSummary) -> str:
    """Return the protocol's status of a run whose server summary is `summary`."""
    return _STATUS[summary.status]


def plain(value: Any) -> Any:
    """Return `value` with the plait messages in it in the SDK's shape (each with an id of
    its own)."""
    if isinstance(value, Message):
        return to_sdk(value, str(uuid.uuid4()))
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def node_update(custom: object) -> dict[str, Any] | None:
    """Return a graph node's update as `{node: update}`, if `custom` (an event's custom
    value) is one (`plait.graph`: `{"node": name, "update": update}`), else None."""
    if isinstance(custom, dict) and set(custom) == {"node", "update"}:
        if isinstance(custom["node"], str):
            return {custom["node"]: plain(custom["update"])}
    return None


def _event(name: str, data: object, event_id: int) -> bytes:
    return _framed(name, _json(data), event_id)


#: An event with an id whose data is one line of ASCII JSON text.
_FRAME = "id: %d\r\nevent: %s\r\ndata: %s\r\n\r\n"


def _framed(name: str, text: str, event_id: int) -> bytes:
    """Return the event `name` with id `event_id` whose data is the compact JSON text
    `text` (no line end: JSON writes those in strings as escapes), as
    `plait.server.sse.encode` frames it."""
    if text.isascii():  # (one `data:` line, without characters to escape)
        return (_FRAME % (event_id, name, text)).encode()
    return encode(f"id: {event_id}\r\nevent: {name}\r\n".encode(), text)


#: Values go out as compact JSON; what JSON does not hold, as its `str`.
_ENCODER = json.JSONEncoder(default=str, separators=(",", ":"))


def _json(data: object) -> str:
    return _ENCODER.encode(data)


def _closing_event(summary: RunSummary) -> tuple[str, str]:
    """Return the last event of a run that ended as `summary` says, `error` or `end`, with
    its JSON text."""
    if summary.status == "failed" and summary.error is not None:
        return "error", _json({"error": summary.error.type, "message": summary.error.message})
    return "end", "null"


def final_log(run_id: str, values: dict[str, Any]) -> RunLog:
    """Return an ended log of a run held by another process: `metadata`, the thread's
    `values` at the run's end, then `end`."""
    log = RunLog(run_id)
    for name, data in (("metadata", {"run_id": run_id, "attempt": 1}), ("values", values)):
        log.add(name, _event(name, data, len(log.events)))
    log.add("end", _framed("end", "null", len(log.events)))
    log.end()
    return log


class ProtocolRelay(Relay):
    """Send a thread run's events in the SDK's stream modes; record its end."""

    def __init__(
        self,
        run_id: str,
        thread_id: str,
        modes: frozenset[str],
        state: tuple[list[dict[str, Any]], dict[str, Any]],
        ended: Callable[[str, RunSummary], Awaitable[None]],
        log: RunLog,
        then: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.modes = modes
        self.messages, self.values = state
        self._texts: list[str] = []  # the JSON text of each of `messages` encoded so far
        self._tuples = not modes.isdisjoint(("messages-tuple", "messages"))
        self._values_on = "values" in modes
        self._debug_on = "debug" in modes
        self._updates_on = "updates" in modes
        self.log = log
        self._ended = ended
        self._then = then
        self._last = b""

    def _send(self, name: str, data: object) -> None:
        """Queue the event `name` with the next id, and keep it in the run's log."""
        self._send_text(name, _json(data))

    def _send_text(self, name: str, text: str) -> None:
        """`_send` the event `name` whose data is the JSON text `text`."""
        log = self.log
        if text.isascii():  # (as `_framed` frames it)
            framed = (_FRAME % (len(log.events), name, text)).encode()
        else:
            framed = _framed(name, text, len(log.events))
        log.add(name, framed)
        self.put(framed)

    def _keep_last(self, summary: RunSummary) -> None:
        """Keep the run's last event (`end` or `error`) in its log, once, and end the log."""
        if self.log.ended:
            return
        name, text = _closing_event(summary)
        self._last = _framed(name, text, len(self.log.events))
        self.log.add(name, self._last)
        self.log.end()

    def attach(self, run: LiveRun) -> None:
        """Serve `run`: queue the `metadata` event (and the thread's values) first."""
        super().attach(run)
        run_id = encode_basestring_ascii(self.run_id)
        self._send_text("metadata", f'{{"run_id":{run_id},"attempt":1}}')  # (as `_json` would)
        self._send_values()
        self.opening = run.queue.qsize()  # these may wait for the run's first event

    async def before_run(self, ctx: HookContext, input: AgentInput) -> None:
        """The run starts: its session values, as its agents change them, are the thread's."""
        self.values = ctx.session_values

    def _send_values(self, extra: dict[str, Any] | None = None) -> None:
        if not self._values_on:
            return
        if extra is None and not self.values:  # (as `_values_json` writes it, at once)
            texts, messages = self._texts, self.messages
            texts.extend(map(bytes.decode, map(plain_json, messages[len(texts) :])))
            self._send_text("values", '{"messages":[' + ",".join(texts) + "]}")
        else:
            values = plain(self.values) if self.values else None
            self._send_text("values", self._values_json(values, extra))

    def _values_json(self, values: dict[str, Any] | None, extra: dict[str, Any] | None) -> str:
        """Return the JSON text of `{**values, "messages": messages, **extra}`, encoding
        each message once per run: a message in the thread does not change, so a step
        encodes only its own (`to_sdk`'s shape holds JSON values only)."""
        texts = self._texts
        if values is None and extra is None:
            texts.extend(map(bytes.decode, map(plain_json, self.messages[len(texts) :])))
            return '{"messages":[' + ",".join(texts) + "]}"
        values, extra = values or {}, extra or {}
        if "messages" in values or "messages" in extra:
            return _json({**values, "messages": self.messages, **extra})
        texts.extend(map(bytes.decode, map(plain_json, self.messages[len(texts) :])))
        listed = '"messages":[' + ",".join(texts) + "]"
        if not values and not extra:
            return "{" + listed + "}"
        parts = [_json(values)[1:-1]] if values else []
        parts.append(listed)
        if extra:
            parts.append(_json(extra)[1:-1])
        return "{" + ",".join(parts) + "}"

    async def relay(self, event: AgentEvent) -> None:
        """Queue what each stream mode asked sends for `event` (`debug`: once a streamed
        message is whole, so its event can be encoded)."""
        output, debug = event.output, self._debug_on
        if output is not None:
            message = output.message
            streamed = message is not None and message.stream is not None
            if debug and not streamed:
                self._debug(event)
            if output.custom is not None:
                self._custom(output.custom)
            if message is not None:
                await self._message(event, message)
                if debug and streamed:
                    self._debug(event)
        elif debug:
            self._debug(event)
        action = event.action
        paused = action.interrupted if action is not None else None
        if paused is not None:
            pending = {"__interrupt__": [{"value": c.info, "id": c.id} for c in paused.contexts]}
            if "updates" in self.modes:
                self._send("updates", pending)
            self._send_values(pending)

    def _debug(self, event: AgentEvent) -> None:
        self._send("debug", {"type": "event", "payload": json.loads(event.to_json())})

    def _custom(self, custom: object) -> None:
        """Send a custom value: a graph node's update in `updates`, any other in `custom`."""
        update = node_update(custom)
        if update is not None:
            if "updates" in self.modes:
                self._send("updates", update)
        elif "custom" in self.modes:
            self._send("custom", plain(custom))

    async def _message(self, event: AgentEvent, variant: MessageVariant) -> None:
        """Send the message of `event` (`variant`) in the modes asked."""
        key = message_id(self.thread_id, len(self.messages))
        tuples = self._tuples
        if variant.stream is not None and tuples:
            meta = {"langgraph_node": event.agent_name, "run_path": list(event.run_path)}
            with contextlib.suppress(Exception):  # the stream's error is the run's to report
                async for chunk in variant.stream:
                    if chunk.content:
                        part = {"type": "AIMessageChunk", "content": chunk.content, "id": key}
                        self._send("messages", [part, meta])
        message = to_sdk(await variant.get_message(), key, event.agent_name)
        if tuples and variant.stream is None:
            self._send("messages", [message, {"langgraph_node": event.agent_name}])
        if self._updates_on:
            self._send("updates", {event.agent_name: {"messages": [message]}})
        if event.depth == 0:
            self.messages.append(message)
            self._send_values()

    async def after_run(self, ctx: HookContext, result: RunResult) -> None:
        """Record the run's status in its protocol record, keep its last event, then run
        `then` (a failure of either is logged)."""
        summary = summarize(result, agent=ctx.agent_name, session_id=None)
        try:
            await self._ended(run_status(summary), summary)
        except Exception:
            _log.exception("could not record the end of run %s", self.run_id)
        self._keep_last(summary)
        if self._then is not None:
            try:
                await self._then()
            except Exception:
                _log.exception("could not go on after run %s", self.run_id)

    def closing(self, summary: RunSummary) -> bytes | None:
        """Return `error` for a failed run, else `end` (as kept in the run's log)."""
        self._keep_last(summary)
        return self._last
