"""The final answer of an agent with output guardrails, held until they pass.

`guarded(events, ctx, guardrails, ...)` passes a `ChatModelAgent`'s events on as they come,
except those that may carry its final answer: a model reply without tool calls and, with an
`output_type`, a reply that calls `final_result`, that tool's result and the event of the
validated answer. Those are held, and the events after a held reply behind it. When the
agent goes on (another model reply, a pause, an error; after a held tool result or
answer event, any event), they were no answer and go out. When its turn ends with them,
the output guardrails check the answer (the reply's text, or the validated object) first:
they go out once the guardrails pass; when one trips, they never go out, the run ends with
its error and `output_key` keeps the value it had before.

A streamed reply is read ahead before its event goes out: up to its first tool call, then
it streams on live; to its end when it has none (an answer), and always to its end with
an `output_type` (its `final_result` call may come last). A held answer's event is passed
on with its stream whole.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from plait.capabilities.guardrails import OutputGuardrails
from plait.capabilities.structured import FINAL_RESULT
from plait.core.agent_context import AgentContext
from plait.core.hooks import end_run
from plait.errors import PlaitError
from plait.events import AgentEvent, MessageStream
from plait.messages import Message

__all__ = ["guarded"]

_NOTHING: Any = object()  # no value (under `output_key`, or as an answer)


async def guarded(
    events: AsyncGenerator[AgentEvent, None],
    ctx: AgentContext,
    guardrails: OutputGuardrails,
    output_key: str | None,
    structured: bool,
) -> AsyncGenerator[AgentEvent, None]:
    """Pass `events` on, holding back the final answer until `guardrails` pass it."""
    hold = _Hold(ctx, guardrails, output_key, structured)
    async with aclosing(events) as source:
        async for event in source:
            for out in await hold.take(event):
                yield out
    for out in await hold.finish():
        yield out


class _Hold:
    """The events held back in one run of an agent, and what its `output_key` held before
    them."""

    __slots__ = ("before", "ctx", "events", "guardrails", "output_key", "replied", "structured")

    def __init__(
        self,
        ctx: AgentContext,
        guardrails: OutputGuardrails,
        output_key: str | None,
        structured: bool,
    ) -> None:
        self.ctx = ctx
        self.guardrails = guardrails
        self.output_key = output_key
        self.structured = structured
        self.events: list[AgentEvent] = []
        self.replied = False  # the first held event is a model reply that may be the answer
        self.before: Any = _NOTHING

    async def take(self, event: AgentEvent) -> list[AgentEvent]:
        """Return the events to pass on now that `event` came."""
        own = event.run_path == self.ctx.run_path and event.error is None
        if own and _is_reply(event):
            out = self._release()  # what was held was no answer
            if await self._may_answer(event):
                self._hold(event)
                self.replied = True
            else:
                out.append(event)
            return out
        if own and self.structured and _answer_part(event):
            self._hold(event)
            return []
        if not self.events:
            return [event]
        action = event.action
        ends = event.error is not None or (action is not None and action.interrupted is not None)
        if self.replied and not ends:  # behind a reply that may be the answer
            self.events.append(event)
            return []
        out = self._release()  # the agent goes on: no answer
        out.append(event)
        return out

    def _release(self) -> list[AgentEvent]:
        held, self.events, self.replied = self.events, [], False
        return held

    async def finish(self) -> list[AgentEvent]:
        """Return the events to pass on once the agent's turn ended: what was held when
        the guardrails pass its answer (or it had none), else the error of the one that
        tripped."""
        held = self._release()
        value = self._answer(held)
        if value is _NOTHING:
            return held
        key, stored = self.output_key, self._take_back()
        try:
            await self.guardrails.check(self.ctx, value)
        except PlaitError as exc:
            return [self.ctx.event(error=end_run(exc))]  # from any depth
        if key is not None and stored is not _NOTHING:
            self.ctx.session_values[key] = stored
        return held

    def _hold(self, event: AgentEvent) -> None:
        if not self.events and self.output_key is not None:
            self.before = self.ctx.session_values.get(self.output_key, _NOTHING)
        self.events.append(event)

    def _take_back(self) -> Any:
        """Put `output_key` back as it was before the held events; return what the agent
        stored there."""
        key = self.output_key
        if key is None:
            return _NOTHING
        values = self.ctx.session_values
        stored = values.pop(key, _NOTHING)
        if self.before is not _NOTHING:
            values[key] = self.before
        return stored

    def _answer(self, held: list[AgentEvent]) -> Any:
        """Return the answer the held events end with (`_NOTHING`: none, such as a
        return-directly tool's result)."""
        if not held or held[-1].run_path != self.ctx.run_path:
            return _NOTHING
        last = held[-1]
        if self.structured:
            custom = None if last.output is None else last.output.custom
            return _NOTHING if custom is None or last.message is not None else custom
        variant = last.message
        if len(held) != 1 or variant is None or variant.role != "assistant":
            return _NOTHING
        message = variant.message if variant.stream is None else variant.stream.merged()
        return _NOTHING if message is None else message.content

    async def _may_answer(self, event: AgentEvent) -> bool:
        """Whether the model reply of `event` may be the final answer (a stream is read
        ahead until that is known)."""
        variant = event.message
        assert variant is not None
        stream = variant.stream
        if stream is not None:
            if not await _read_ahead(stream, whole=self.structured):
                return False
            message: Message | None = stream.merged()
        else:
            message = variant.message
        if message is None:
            return False
        calls = message.tool_calls
        return not calls or (self.structured and any(c.name == FINAL_RESULT for c in calls))


def _is_reply(event: AgentEvent) -> bool:
    """Whether `event` is a model reply (a whole or streamed assistant message)."""
    variant = event.message
    return variant is not None and variant.role == "assistant"


def _answer_part(event: AgentEvent) -> bool:
    """Whether `event` carries a structured answer: `final_result`'s result, or the event
    of the validated answer."""
    variant = event.message
    if variant is not None:
        return variant.role == "tool" and variant.tool_name == FINAL_RESULT
    output = event.output
    return output is not None and output.custom is not None and event.action is None


async def _read_ahead(stream: MessageStream, *, whole: bool) -> bool:
    """Read `stream` up to its first tool call (to its end when `whole`); return whether
    it was read to its end (False: a tool call came first, or it failed, which the
    agent's own read of it reports)."""
    reader = aiter(stream)
    try:
        async for chunk in reader:
            if chunk.tool_calls and not whole:
                return False
    except Exception:
        return False
    finally:
        aclose = getattr(reader, "aclose", None)
        if aclose is not None:
            await aclose()
    return True
