"""The wrap seams as calls: `wrap_model` and `wrap_tool` hooks around the call they surround.

`wrap_chain` makes one callable of a call and the hooks around it, outermost first: each
hook is given the next one (`call_next`) and returns the call's outcome, so a hook may
change what goes in, change what comes out, or answer without calling on (it replaces the
call). A wrap hook stands in for the call: what it raises is the call's failure, as if the
model or the tool had raised it. A hook that returns something other than the call's kind
of outcome ends the run with `HookError`.

`WrappedModel` is a model whose calls pass through `wrap_model` hooks: what the ReAct loop
calls when hooks wrap its model calls, and what `HookContext.side_model` gives a hook for a
call of its own. A streamed call is one chain too (`ChainStream`): from the first read, a
task of its own runs the hooks; the innermost call streams the model, passing each chunk on
as it comes, and gives the hooks the merged reply. A reply the hooks give without calling on
goes out as one chunk; one they give in place of the model's after it streamed is what the
agent keeps (`replaced`), as an `after_model` hook's replacement is, while the stream's
readers saw the model's chunks.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from types import MappingProxyType
from typing import Any

from plait._util.alongside import stop_task
from plait.core.hooks import ModelRequest, Seam, end_run
from plait.errors import HookError
from plait.messages import Message, ToolInfo, merge_chunks

__all__ = ["ChainStream", "Next", "WrappedModel", "wrap_chain"]

Next = Callable[[Any], Awaitable[Any]]
_MESSAGE = (Message,)


def wrap_chain(
    fns: Sequence[Seam], seam: str, ctx: Any, innermost: Next, kinds: tuple[type, ...]
) -> Next:
    """Return `innermost` surrounded by the hooks `fns` (outermost first), each called as
    `fn(ctx, value, call_next)`; a hook's outcome must be one of `kinds`."""
    call = innermost
    for fn in reversed(fns):
        call = functools.partial(_layer, fn, seam, kinds, ctx, call)
    return call


async def _layer(
    fn: Seam, seam: str, kinds: tuple[type, ...], ctx: Any, call_next: Next, value: Any
) -> Any:
    """Call one wrap hook; refuse an outcome of the wrong kind."""
    result = await fn(ctx, value, call_next)
    if isinstance(result, kinds):
        return result
    hook = type(getattr(fn, "__self__", fn)).__name__
    expected = " or ".join(kind.__name__ for kind in kinds)
    raise end_run(
        HookError(
            f"hook {hook}.{seam} returned {type(result).__name__}, expected {expected}",
            hook=hook,
            seam=seam,
        )
    )


def _request(
    messages: Sequence[Message], tools: Sequence[ToolInfo], options: Mapping[str, Any]
) -> ModelRequest:
    return ModelRequest(tuple(messages), tuple(tools), MappingProxyType(dict(options)))


class WrappedModel:
    """A model whose calls pass through the `wrap_model` hooks `fns` at `ctx` (outermost
    first) before they reach `model`."""

    __slots__ = ("_ctx", "_fns", "_model")

    def __init__(self, fns: Sequence[Seam], ctx: Any, model: Any) -> None:
        self._fns = fns
        self._ctx = ctx
        self._model = model

    def __repr__(self) -> str:
        return f"WrappedModel({self._model!r})"

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Return the reply the hooks give (the model's, unless one replaces it)."""
        chain = wrap_chain(self._fns, "wrap_model", self._ctx, self._generate, _MESSAGE)
        reply: Message = await chain(_request(messages, tools, options))
        return reply

    async def _generate(self, request: ModelRequest) -> Any:
        return await self._model.generate(request.messages, tools=request.tools, **request.options)

    def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> ChainStream:
        """Return the chunks of the call as the hooks let them through (see `ChainStream`)."""
        return ChainStream(self._fns, self._ctx, _request(messages, tools, options), self._open)

    def _open(self, request: ModelRequest) -> AsyncIterator[Message]:
        source: AsyncIterator[Message] = self._model.stream(
            request.messages, tools=request.tools, **request.options
        )
        return source


_CHUNK, _END, _FAIL = 0, 1, 2


class ChainStream:
    """The chunks of one streamed model call that `wrap_model` hooks surround (see the
    module docstring); `replaced` is a reply the hooks gave in place of the streamed one."""

    __slots__ = ("_called", "_chain", "_last", "_open", "_queue", "_request", "_task", "replaced")

    def __init__(
        self,
        fns: Sequence[Seam],
        ctx: Any,
        request: ModelRequest,
        open_stream: Callable[[ModelRequest], AsyncIterator[Message]],
    ) -> None:
        self._chain = wrap_chain(fns, "wrap_model", ctx, self._innermost, _MESSAGE)
        self._request = request
        self._open = open_stream
        self._queue: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()
        self._task: asyncio.Future[None] | None = None
        self._called = False  # the innermost call was made: the model's chunks went out
        self._last: Message | None = None  # the reply the innermost call gave last
        self.replaced: Message | None = None

    def __aiter__(self) -> ChainStream:
        return self

    async def __anext__(self) -> Message:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        kind, value = await self._queue.get()
        if kind == _CHUNK:
            chunk: Message = value
            return chunk
        self._queue.put_nowait((kind, value))  # the end stays the end
        if kind == _END:
            raise StopAsyncIteration
        raise value

    async def _innermost(self, request: ModelRequest) -> Message:
        """Stream the model, passing each chunk on; return the merged reply."""
        self._called = True
        chunks: list[Message] = []
        source = self._open(request)
        try:
            async for chunk in source:
                chunks.append(chunk)
                self._queue.put_nowait((_CHUNK, chunk))
        finally:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                with suppress(Exception):
                    await aclose()
        self._last = merge_chunks(chunks)
        return self._last

    async def _run(self) -> None:
        """Run the hooks on the request; what they end with goes to the reader."""
        queue = self._queue
        try:
            reply = await self._chain(self._request)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the reader raises it (a pause, too) in its own task
            queue.put_nowait((_FAIL, exc))
            return
        if not self._called:
            queue.put_nowait((_CHUNK, reply))
        elif reply is not self._last:
            self.replaced = reply
        queue.put_nowait((_END, None))

    async def aclose(self) -> None:
        """Stop the hooks and the model's stream (a reader that stops early)."""
        if self._task is not None:
            await stop_task(self._task)
