"""The model calls of a ChatModelAgent: one call's reply (or why there is none), the limits
and hooks around a call, the call itself, streaming or not, and the errors a model's failure
or wrong output becomes."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from types import MappingProxyType
from typing import Any, Protocol

from plait._util.alongside import Prefetch, alongside
from plait._util.tasks import current_task
from plait.agents._chunks import CheckedChunks, CheckedModel, streaming_output
from plait.core.context import Frame
from plait.core.context_events import message_event
from plait.core.hooks import HookChain, ModelRequest, call_hook, concurrently
from plait.core.kernel import Interrupted, call_in
from plait.core.run_state import CallGuard, RunState
from plait.core.wrapped import ChainStream, WrappedModel
from plait.errors import MaxIterationsExceeded, PlaitError
from plait.events import AgentEvent, InterruptCtx, MessageStream
from plait.messages import Message
from plait.models.base import ChatModel, model_error, wrong_output
from plait.models.call_ids import CallIds, unique_ids
from plait.tools.base import ToolInfo

__all__ = ["CallingAgent", "ModelCalls", "Reply", "stream_reply"]


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
    ctx: Frame,
    box: Reply,
    during: Callable[[], Awaitable[None]] | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """Yield the streaming event first, then drain the model's stream into `box`.

    With `during` (the `during_model` hooks), the stream is read ahead while it runs, and
    the event comes only once it has returned; when it raises, the stream is closed and
    its error is the reply's. A reply `wrap_model` hooks gave in place of the streamed one
    is the reply the agent keeps."""
    box.message = None
    source = _open_stream(model, name, request, box)
    if source is None:
        return
    wrapped = source if isinstance(source, ChainStream) else None
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
    ids = CallIds(ctx.run.ids.new_id)
    chunks = CheckedChunks(
        source,
        lambda chunk: wrong_output(model, name, "stream() yielded", chunk, "Message chunks"),
        ids.chunk,
    )
    stream = MessageStream(chunks, on_error=lambda exc: model_error(name, exc))
    stopper = _Stopper(stream)
    run = ctx.run
    run.guards.add(stopper)
    if run.cancel_requested:
        stream.stop()
    try:
        yield ctx.event(output=streaming_output(stream))
        try:
            box.message = await stream.collect()
        except PlaitError as exc:
            box.error = exc
        if wrapped is not None and wrapped.replaced is not None and box.message is not None:
            box.message = unique_ids(wrapped.replaced, ctx.run.ids.new_id)
        if stream.stopped:
            box.message, box.error, box.stopped = None, None, True
    finally:
        run.guards.discard(stopper)
        await stream.aclose()


def _open_stream(
    model: ChatModel, name: str, request: ModelRequest, box: Reply
) -> AsyncIterator[Message] | None:
    """Start the model's stream; None when it could not be (the error is in `box`)."""
    try:
        source = model.stream(request.messages, tools=request.tools, **request.options)
    except Exception as exc:
        box.error = model_error(name, exc)
        return None
    if not isinstance(source, AsyncIterator):
        if inspect.iscoroutine(source):  # `async def stream` that returns, not yields
            source.close()
        box.error = wrong_output(
            model, name, "stream() returned", source, "an async iterator of Messages"
        )
        return None
    return source


class _Stopper:
    """What stops a streamed model call when the run is asked to stop (one of the run's
    guards, as a tool call's `CallGuard` is)."""

    __slots__ = ("stream",)

    def __init__(self, stream: MessageStream) -> None:
        self.stream = stream

    def stop_soon(self) -> None:
        """End the model's stream now: the reply is dropped, and asked for again on resume."""
        self.stream.stop()


class CallingAgent(Protocol):
    """What the model calls of the ReAct loop read of their agent (a `ChatModelAgent`)."""

    name: str
    model: ChatModel
    max_iterations: int
    _tool_infos: tuple[ToolInfo, ...]


class ModelCalls:
    """The model calls of one run of the ReAct loop (`plait.agents.react`): the limits they
    count against, the `before_model`, `during_model` and `after_model` hooks, and the call
    itself, streaming or not. The loop sets these fields."""

    __slots__ = (
        "agent",
        "calls_made",
        "ctx",
        "event_loop",
        "hooked",
        "hooks",
        "messages",
        "options",
        "reply",
        "run",
        "teams",
    )

    agent: CallingAgent
    calls_made: int
    ctx: Frame
    event_loop: asyncio.AbstractEventLoop  # the loop the run runs on
    hooked: bool  # `before_model`, `during_model` or `wrap_model` hooks see each call
    hooks: HookChain
    messages: list[Message]
    options: dict[str, Any]
    reply: Reply
    run: RunState
    teams: bool

    def _before_call(self) -> PlaitError | None:
        """Count the call against the agent's and the teams' limits."""
        if self.calls_made >= self.agent.max_iterations:
            return MaxIterationsExceeded(agent_name=self.agent.name, limit=self.calls_made)
        self.calls_made += 1
        if self.teams:
            try:
                self.ctx.check_steps()  # a team's total_max_steps
            except PlaitError as exc:
                return exc
        return None

    async def _open_call(self, box: Reply) -> PlaitError | None:
        """Count the call against the limits and run the `before_model` hooks; `box`
        becomes the reply to take (empty when the call cannot happen, or a hook paused the
        run before it: then it is made on the resume)."""
        self.reply = box
        error = self._before_call()
        if error is None and self.hooks.before_model:
            try:
                paused = await call_in(self.ctx, self._before_model, box)
            except PlaitError as exc:
                error = exc
            else:
                if isinstance(paused, Interrupted):
                    self.calls_made -= 1  # not made: it is made on the resume
                    box.paused = paused.contexts
                    return None
                if self.run.cancel_requested:  # a stop asked (by a hook): made on the resume
                    box.stopped = True
                    return None
        if error is None:
            self.ctx.run.requests += 1
        box.refused = error
        return error

    def _request(self) -> ModelRequest:
        agent = self.agent
        options = MappingProxyType(self.options)
        return ModelRequest(tuple(self.messages), agent._tool_infos, options)

    async def _before_model(self, box: Reply) -> None:
        """Pass the request through the `before_model` hooks; its messages become the
        agent's history. Events a hook passes up (`emit`) go out before the reply."""
        request, ctx = self._request(), self.ctx
        events: list[AgentEvent] = []
        box.events = events
        ctx.set_emit(events.append)
        try:
            for fn in self.hooks.before_model:
                replaced = await call_hook(fn, "before_model", ctx, request)
                if replaced is not None:
                    request = replaced
        finally:
            ctx.set_emit(None)
        self.messages = list(request.messages)
        self.ctx.set_model_messages(self.messages)
        box.request = request

    async def model_call(self) -> list[AgentEvent]:
        """Call the model once (not streaming); return its events."""
        ctx, box = self.ctx, Reply()
        if self.hooked or self.run.interceptor is not None:
            error = await self._open_call(box)
            if error is not None:
                return [*box.events, ctx.event(error=error)]
            if box.paused or box.stopped:
                return list(box.events)
            await self._generate(box)
            if box.message is None:
                return list(box.events)
            return [*box.events, ctx.event(message=box.message)]
        # the common case, inline (one frame): count the call, then make it
        self.reply = box
        agent = self.agent
        if self.teams or self.calls_made >= agent.max_iterations:
            error = self._before_call()  # a limit may refuse the call
            if error is not None:
                box.refused = error
                return [ctx.event(error=error)]
        else:
            self.calls_made += 1  # `_before_call`, inline
        run = self.run
        run.requests += 1
        # a stop cancels the task awaiting the reply: in the run's slot, or with the others
        task = current_task(self.event_loop)
        if run.model_call is None:
            run.model_call = task
        else:
            run.model_calls_in_flight.add(task)  # type: ignore[arg-type]
        try:
            generate, options = agent.model.generate, self.options  # (with none, no `**{}`)
            if options:
                reply = await generate(self.messages, tools=agent._tool_infos, **options)
            else:
                reply = await generate(self.messages, tools=agent._tool_infos)
        except asyncio.CancelledError:
            if not _stopped_by_request(run, task):
                raise
            box.stopped = True
            return []
        except Exception as exc:
            box.error = model_error(agent.name, exc)
            return []
        finally:
            if run.model_call is task:
                run.model_call = None
            else:
                run.model_calls_in_flight.discard(task)
        if not isinstance(reply, Message):
            what = "generate() returned"
            box.error = wrong_output(agent.model, agent.name, what, reply, "a Message")
            return []
        calls = reply.tool_calls
        if calls and (len(calls) > 1 or not calls[0].id):  # else the ids are unique
            reply = unique_ids(reply, ctx.run.ids.new_id)
        box.message = reply
        role = "tool" if reply.role == "tool" else "assistant"  # as `ctx.event` makes it
        return [message_event(ctx.agent_name, ctx.run_path, ctx.depth, role, reply, None)]

    async def model_stream(self) -> AsyncGenerator[AgentEvent, None]:
        """Call the model once, streaming: its streaming event comes first."""
        ctx, box = self.ctx, Reply()
        error = await self._open_call(box)
        for event in box.events:
            yield event
        if error is not None:
            yield ctx.event(error=error)
            return
        if box.paused or box.stopped:
            return
        request = box.request or self._request()
        fns = self.hooks.during_model
        during = functools.partial(concurrently, fns, "during_model", ctx, request) if fns else None
        async with aclosing(
            stream_reply(self._model(), self.agent.name, request, ctx, box, during)
        ) as chunks:
            async for event in chunks:
                yield event

    def _model(self) -> ChatModel:
        """The model to call: the agent's, or what the run's interceptor puts in its place,
        behind the `wrap_model` hooks when there are any."""
        ctx, model = self.ctx, self.agent.model
        tap = ctx.run.interceptor
        if tap is not None:
            model = tap.model(ctx, model)
        fns = self.hooks.wrap_model
        if not fns:
            return model
        checked = CheckedModel(model, self.agent.name, ctx.run.ids.new_id)
        return WrappedModel(fns, ctx, checked)

    async def _generate(self, box: Reply) -> None:
        guard = CallGuard(self.run, None)  # a stop request ends the call in flight
        with guard:
            await self._generate_unguarded(box)
        if guard.reason is not None:
            box.message, box.error, box.stopped = None, None, True

    async def _generate_unguarded(self, box: Reply) -> None:
        agent, request, model = self.agent, box.request, self._model()
        try:
            if fns := self.hooks.during_model:  # the call runs alongside them, held till done
                request = request or self._request()
                call = model.generate(request.messages, tools=request.tools, **request.options)
                during = functools.partial(concurrently, fns, "during_model", self.ctx, request)
                reply = await alongside(call, during)
            elif request is None:
                reply = await model.generate(self.messages, tools=agent._tool_infos, **self.options)
            else:
                reply = await model.generate(
                    request.messages, tools=request.tools, **request.options
                )
        except Exception as exc:
            box.error = model_error(agent.name, exc)
            return
        if isinstance(reply, Message):
            calls = reply.tool_calls
            if calls and (len(calls) > 1 or not calls[0].id):  # else the ids are unique
                reply = unique_ids(reply, self.ctx.run.ids.new_id)
            box.message = reply
        else:
            box.error = wrong_output(
                agent.model, agent.name, "generate() returned", reply, "a Message"
            )

    async def _after_model(self, box: Reply, reply: Message) -> Message:
        """Pass the reply through the `after_model` hooks; calls a hook adds get unique ids."""
        request = box.request or self._request()
        given = reply
        for fn in self.hooks.after_model:
            replaced = await call_hook(fn, "after_model", self.ctx, request, reply)
            if replaced is not None:
                reply = replaced
        return reply if reply is given else unique_ids(reply, self.ctx.run.ids.new_id)


def _stopped_by_request(run: RunState, task: asyncio.Task[Any] | None) -> bool:
    """Whether a model call's cancellation in `task` is a stop request's alone (it is then
    taken back: the call ends with no reply)."""
    if task is None or task not in run.model_calls_stopped:
        return False
    run.model_calls_stopped.discard(task)
    return task.uncancel() == 0
