"""One model call of a ChatModelAgent: its reply (or why there is none), the streaming call,
and the errors a model's failure or wrong output becomes."""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable

from plait._util.alongside import Prefetch
from plait.agents._chunks import CheckedChunks, streaming_output
from plait.core.context import RunContext
from plait.core.hooks import ModelRequest
from plait.errors import PlaitError
from plait.events import AgentEvent, InterruptCtx, MessageStream
from plait.messages import Message
from plait.models.base import ChatModel, model_error, wrong_output
from plait.models.call_ids import CallIds

__all__ = ["Reply", "stream_reply"]


class Reply:
    """The model's reply to one call, or why there is none (and, when hooks see the call,
    its request)."""

    # Defaults on the class, immutable, set on an instance only when they change: a new
    # Reply is made on every model call and costs no `__init__` call.
    request: ModelRequest | None = None
    events: list[AgentEvent] | tuple[()] = ()  # what `before_model` hooks passed up
    message: Message | None = None
    error: PlaitError | None = None
    refused: PlaitError | None = None  # the call could not be made (a limit)
    paused: tuple[InterruptCtx, ...] = ()  # a hook paused the run before the call
    stopped: bool = False  # the run was asked to stop while the model wrote: no reply


async def stream_reply(
    model: ChatModel,
    name: str,
    request: ModelRequest,
    ctx: RunContext,
    box: Reply,
    during: Callable[[], Awaitable[None]] | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """Yield the streaming event first, then drain the model's stream into `box`.

    With `during` (the `during_model` hooks), the stream is read ahead while it runs, and
    the event comes only once it has returned; when it raises, the stream is closed and
    its error is the reply's."""
    box.message = None
    try:
        source = model.stream(request.messages, tools=request.tools, **request.options)
    except Exception as exc:
        box.error = model_error(name, exc)
        return
    if not isinstance(source, AsyncIterator):
        if inspect.iscoroutine(source):  # `async def stream` that returns, not yields
            source.close()
        box.error = wrong_output(
            model, name, "stream() returned", source, "an async iterator of Messages"
        )
        return
    if during is not None:
        source = Prefetch(source)
        try:
            await during()
        except BaseException as exc:
            await source.aclose()
            if not isinstance(exc, PlaitError):
                raise
            box.error = exc
            return
    ids = CallIds(ctx.ids.new_id)
    chunks = CheckedChunks(
        source,
        lambda chunk: wrong_output(model, name, "stream() yielded", chunk, "Message chunks"),
        ids.chunk,
    )
    stream = MessageStream(chunks, on_error=lambda exc: model_error(name, exc))
    stopper = _Stopper(stream)
    run = ctx.run_state()
    run.guards.add(stopper)
    if run.cancel_requested:
        stream.stop()
    try:
        yield ctx.event(output=streaming_output(stream))
        try:
            box.message = await stream.collect()
        except PlaitError as exc:
            box.error = exc
        if stream.stopped:
            box.message, box.error, box.stopped = None, None, True
    finally:
        run.guards.discard(stopper)
        await stream.aclose()


class _Stopper:
    """What stops a streamed model call when the run is asked to stop (one of the run's
    guards, as a tool call's `CallGuard` is)."""

    __slots__ = ("stream",)

    def __init__(self, stream: MessageStream) -> None:
        self.stream = stream

    def stop_soon(self) -> None:
        """End the model's stream now: the reply is dropped, and asked for again on resume."""
        self.stream.stop()
