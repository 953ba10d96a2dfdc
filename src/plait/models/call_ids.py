"""Tool-call ids made unique within each model reply, before anything reads them.

A tool call's id addresses its result, its interrupts and the answers a resume gives them
(`agent:A;tool:approve:<id>`). Some providers send calls without ids (an OpenAI-compatible
server streaming `id: null`), or the same id twice in one reply; two calls sharing an id
would share those addresses, and one call's answer could reach the other. The ReAct agent
therefore passes every reply through `CallIds` at the model boundary, whatever the provider:
a call without an id, or with the id of an earlier call of the same reply, gets a fresh one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from plait.messages import Message, ToolCall

__all__ = ["CallIds", "unique_ids"]


def unique_ids(message: Message, new_id: Callable[[], str]) -> Message:
    """Return a whole reply with its tool calls' ids unique (itself when they already are:
    the common case costs one look at each id)."""
    calls = message.tool_calls
    if not calls or (len(calls) == 1 and calls[0].id):
        return message
    ids = {call.id for call in calls}
    if len(ids) == len(calls) and "" not in ids:
        return message
    return CallIds(new_id).whole(message)


class CallIds:
    """Give the tool calls of one model reply ids unique within it.

    Use one instance per reply: `whole` for a reply received whole, `chunk` for each chunk
    of a streamed one (in order). Chunks are fixed the way `merge_chunks` joins them, so the
    merged message holds the same ids as the chunks. An id that is already unique is kept.
    """

    __slots__ = ("_by_index", "_last", "_new_id", "_seen")

    def __init__(self, new_id: Callable[[], str]) -> None:
        self._new_id = new_id
        self._seen: set[str] = set()
        self._by_index: dict[int, str] = {}  # a streamed call's index: the id it was given
        self._last: tuple[str, str] | None = None  # the last call: (id as sent, id given)

    def whole(self, message: Message) -> Message:
        """Return `message` with every tool call's id unique (itself when they already are)."""
        return _each_call(message, self._start)

    def chunk(self, chunk: Message) -> Message:
        """Return a streamed chunk with the ids of the calls it starts made unique, and the
        chunks continuing such a call carrying the id that call was given."""
        return _each_call(chunk, self._piece)

    def _piece(self, call: ToolCall) -> ToolCall:
        """Fix one tool-call chunk: a new call (by index, else by id as `merge_chunks` tells
        them apart) gets a unique id; a continuation keeps the one its call was given."""
        if call.index is not None:
            given = self._by_index.get(call.index)
            if given is not None:
                return call  # merging keeps the id of a call's first chunk
            fixed = self._start(call)
            self._by_index[call.index] = fixed.id
            return fixed
        last = self._last
        if last is not None and (not call.id or call.id == last[0]):
            given = last[1]  # it continues the last call (`merge_chunks` joins them)
            return call if not call.id or call.id == given else _with_id(call, given)
        return self._start(call)

    def _start(self, call: ToolCall) -> ToolCall:
        """Claim an id for a call that starts here: its own if unused, else a fresh one."""
        given = call.id
        if not given or given in self._seen:
            given = f"call_{self._new_id()}"
            while given in self._seen:
                given = f"call_{self._new_id()}"
        self._seen.add(given)
        self._last = (call.id, given)
        return call if given == call.id else _with_id(call, given)


def _each_call(message: Message, fix: Callable[[ToolCall], ToolCall]) -> Message:
    """Return `message` with `fix` applied to each of its tool calls, in order (itself when
    `fix` changed none)."""
    calls = message.tool_calls
    if not calls:
        return message
    fixed = tuple(fix(call) for call in calls)
    if all(new is old for new, old in zip(fixed, calls, strict=True)):
        return message
    return dataclasses.replace(message, tool_calls=fixed)


def _with_id(call: ToolCall, new_id: str) -> ToolCall:
    return dataclasses.replace(call, id=new_id)
