"""What a run yields: `AgentEvent`, its output and action types, and `RunResult`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from plait._util.json import JSONMixin, json_bytes
from plait._util.record import record
from plait._util.words import counted
from plait.errors import PlaitError, RunCancelled, SerializationError
from plait.messages import Message, Usage, merge_chunks

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema

__all__ = [
    "AgentAction",
    "AgentEvent",
    "AgentOutput",
    "BreakLoopAction",
    "HandoffLog",
    "InterruptCtx",
    "InterruptInfo",
    "MessageStream",
    "MessageVariant",
    "RunResult",
    "TransferToAgentAction",
]


class MessageStream:
    """A buffered stream of message chunks from a model.

    Iterating yields the model's chunks one to one; each `async for` starts from the first
    chunk, so the stream can be read several times and after the run has ended. The run never
    waits for a reader: the producing agent drains the source itself when it needs the whole
    message (`collect()`).
    """

    __slots__ = (
        "_buf",
        "_busy",
        "_done",
        "_error",
        "_merged",
        "_on_error",
        "_puller",
        "_src",
        "_stopped",
        "_wake",
    )

    def __init__(
        self,
        source: AsyncIterator[Message] | None = None,
        *,
        chunks: Sequence[Message] = (),
        on_error: Callable[[Exception], BaseException] | None = None,
    ) -> None:
        self._src = source
        self._buf: list[Message] = list(chunks)
        self._done = source is None
        self._error: BaseException | None = None
        self._on_error = on_error
        self._merged: Message | None = None
        self._busy = False
        self._wake: asyncio.Future[None] | None = None
        self._puller: asyncio.Task[Any] | None = None  # the task reading the source now
        self._stopped = False

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._read()

    async def _read(self) -> AsyncIterator[Message]:
        """Yield every chunk from the first, pulling from the source when the buffer ends."""
        buf = self._buf
        i = 0
        while True:
            if i < len(buf):
                yield buf[i]
                i += 1
            elif self._done:
                if self._error is not None:
                    raise self._error
                return
            elif self._busy:  # another task is reading the source: wait for its chunk
                if self._wake is None:
                    self._wake = asyncio.get_running_loop().create_future()
                await asyncio.shield(self._wake)
            else:
                self._busy = True
                self._puller = asyncio.current_task()
                try:
                    chunk = await self._src.__anext__()  # type: ignore[union-attr]
                except StopAsyncIteration:
                    self._done = True
                except Exception as exc:
                    self._done = True
                    self._error = self._on_error(exc) if self._on_error is not None else exc
                except BaseException:
                    if self._stopped and self._uncancel():  # `stop()` cut the read short
                        continue
                    self._done = True
                    self._error = RunCancelled("the stream was cancelled before the model finished")
                    raise
                else:
                    buf.append(chunk)
                finally:
                    self._busy = False
                    self._puller = None
                    if self._wake is not None:
                        self._wake_readers()

    def stop(self) -> None:
        """End the stream now, as a run that is asked to stop does: a read of the source in
        flight is cut short, readers get `RunCancelled` after the chunks received so far,
        and `stopped` becomes true (call this on the stream's event loop)."""
        if self._done:
            return
        self._stopped = True
        self._done = True
        self._error = RunCancelled("the run was stopped while the model was writing")
        puller = self._puller
        if puller is not None and not puller.done():
            puller.cancel()
        self._wake_readers()

    def _uncancel(self) -> bool:
        """Take back the cancellation `stop()` sent to the reading task; False when the task
        is being cancelled by someone else too."""
        task = asyncio.current_task()
        return task is not None and task.uncancel() == 0

    @property
    def stopped(self) -> bool:
        """Whether `stop()` ended the stream before the model finished."""
        return self._stopped

    @property
    def done(self) -> bool:
        """Whether the source has ended (normally or with an error)."""
        return self._done

    @property
    def chunks(self) -> tuple[Message, ...]:
        """Return the chunks received so far."""
        return tuple(self._buf)

    async def collect(self) -> Message:
        """Drain the source and return the chunks merged into one message."""
        if not self._done:
            async for _ in self._read():
                pass
        if self._error is not None:
            raise self._error
        if self._merged is None:
            self._merged = merge_chunks(self._buf)
        return self._merged

    def merged(self) -> Message:
        """Return the whole message of a finished stream without awaiting."""
        if not self._done or self._error is not None:
            raise SerializationError(
                "a streaming message was not fully received and cannot be encoded", path="stream"
            )
        if self._merged is None:
            self._merged = merge_chunks(self._buf)
        return self._merged

    async def aclose(self) -> None:
        """Stop reading the source and close it; readers waiting for more get
        `RunCancelled`."""
        if not self._done or self._stopped:
            if not self._done:
                self._done = True
                self._error = RunCancelled("the stream was closed before the model finished")
            src, self._src = self._src, None
            aclose = getattr(src, "aclose", None)
            if aclose is not None:
                await aclose()
        self._wake_readers()

    def _wake_readers(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = None
            if not wake.done():
                wake.set_result(None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageStream):
            return NotImplemented
        return self._done and other._done and self._buf == other._buf

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        state = "done" if self._done else "open"
        return f"MessageStream({len(self._buf)} chunks, {state})"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        from pydantic_core import core_schema

        chunks_schema = handler.generate_schema(list[Message])

        def validate(value: Any) -> MessageStream:
            if isinstance(value, MessageStream):
                return value
            return MessageStream(chunks=value)

        def serialize(value: MessageStream) -> list[Message]:
            value.merged()  # refuse an unfinished stream
            return value._buf

        return core_schema.no_info_after_validator_function(
            validate,
            core_schema.union_schema([core_schema.is_instance_schema(cls), chunks_schema]),
            serialization=core_schema.plain_serializer_function_ser_schema(
                serialize, return_schema=chunks_schema
            ),
        )


@record
class MessageVariant(JSONMixin):
    """A message in an event: whole (`message`) or streaming (`stream`).

    `role` and `tool_name` classify it without reading the stream.
    """

    is_streaming: bool
    role: Literal["assistant", "tool"]
    tool_name: str | None = None
    message: Message | None = None
    stream: MessageStream | None = None

    async def get_message(self) -> Message:
        """Return the whole message, draining the stream if needed."""
        if self.message is not None:
            return self.message
        if self.stream is None:
            raise ValueError("a MessageVariant needs a message or a stream")
        return await self.stream.collect()


@record
class AgentOutput(JSONMixin):
    """What an event carries: a message, a custom value, or both."""

    message: MessageVariant | None = None
    custom: Any = None


@record
class TransferToAgentAction(JSONMixin):
    """Hand control to another agent."""

    dest_agent_name: str
    message: str = ""
    reason: str = ""


@record
class BreakLoopAction(JSONMixin):
    """Stop the enclosing `LoopAgent` after the current sub-agent finishes."""

    from_agent: str
    done: bool = False
    current_iterations: int = 0


@record
class InterruptCtx(JSONMixin):
    """One pending interrupt: a fresh `id`, a readable `address`, and the `info` given."""

    id: str
    address: str
    info: Any = None


@record
class InterruptInfo(JSONMixin):
    """Every interrupt pending when a run paused, and the checkpoint to resume from."""

    contexts: tuple[InterruptCtx, ...]
    checkpoint_id: str | None = None


@record
class AgentAction(JSONMixin):
    """A control action attached to an event."""

    exit: bool = False
    interrupted: InterruptInfo | None = None
    transfer_to_agent: TransferToAgentAction | None = None
    break_loop: BreakLoopAction | None = None
    custom: Any = None

    def merge(self, other: AgentAction) -> AgentAction:
        """Combine two actions; fields set in `other` win."""
        return AgentAction(
            exit=self.exit or other.exit,
            interrupted=other.interrupted or self.interrupted,
            transfer_to_agent=other.transfer_to_agent or self.transfer_to_agent,
            break_loop=other.break_loop or self.break_loop,
            custom=other.custom if other.custom is not None else self.custom,
        )


@record
class HandoffLog(JSONMixin):
    """One handoff between team members; `timestamp` is timezone-aware UTC."""

    timestamp: datetime
    from_agent: str
    to_agent: str
    message: str = ""
    reason: str = ""
    step_count: int = 0
    tokens_used: int = 0

    def render(self) -> str:
        """Render one line: `[14:30:01] triage → security: "…" (3 steps, 450 tokens)`, the
        counts in their number (`1 step`), without `: "…"` when there is no message."""
        text = f"[{self.timestamp:%H:%M:%S}] {self.from_agent} → {self.to_agent}"
        said = f': "{self.message}"' if self.message else ""
        counts = f"{counted(self.step_count, 'step')}, {counted(self.tokens_used, 'token')}"
        return f"{text}{said} ({counts})"


@record
class AgentEvent(JSONMixin):
    """One step of a run, as seen by the caller.

    `run_path` names the agents from the root to the one that produced the event; `depth`
    counts how many agent-as-tool boundaries lie above it. An event with `error` set is the
    last event of its stream.
    """

    agent_name: str
    run_path: tuple[str, ...]
    depth: int = 0
    output: AgentOutput | None = None
    action: AgentAction | None = None
    error: PlaitError | None = None
    handoff: HandoffLog | None = None

    @property
    def message(self) -> MessageVariant | None:
        """Return the event's message variant, if it carries one."""
        output = self.output
        return None if output is None else output.message

    def to_json(self) -> str:
        """Encode this event as JSON text (`SerializationError` names a value that can't
        be)."""
        return event_json_bytes(self).decode()


#: The event encoded last, with its JSON: a run's step save encodes the event its stream
#: sent just before (to the server's response, say) without encoding it again.
_ENCODED: tuple[AgentEvent | None, bytes] = (None, b"")


def event_json_bytes(event: AgentEvent) -> bytes:
    """Return the JSON of `event` (`AgentEvent.to_json`, encoded), the same bytes when
    asked again for the event encoded last.

    Raises:
        SerializationError: A value of the event is not JSON (named by its path).
    """
    global _ENCODED
    last, data = _ENCODED
    if last is event:
        return data
    data = json_bytes(event, AgentEvent, root="AgentEvent")
    _ENCODED = (event, data)
    return data


@record
class RunResult(JSONMixin):
    """Everything a finished (or paused, or failed) run produced (`metadata`: the run's,
    as `ctx.metadata` showed it). `usage` and `handoffs` are the whole run's: a resumed
    run's include those made before its pauses; `events` are this leg's."""

    events: tuple[AgentEvent, ...] = ()
    final_output: Any = None
    error: PlaitError | None = None
    interrupts: tuple[InterruptCtx, ...] = ()
    checkpoint_id: str | None = None
    handoffs: tuple[HandoffLog, ...] = ()
    usage: Usage = field(default_factory=Usage)
    metadata: dict[str, Any] = field(default_factory=dict)

    def raise_for_error(self) -> RunResult:
        """Raise the run's error, if any; otherwise return self."""
        if self.error is not None:
            raise self.error
        return self
