"""The runaway guard: `ChatModelAgent(loop_guard=LoopGuard(...))` notices an agent that goes
round in circles and tells it, pauses the run for a person, or stops it.

Two signs, each watched in one agent run:

- **Repeats**: calls are the same when their tool names and parsed arguments are equal. When
  the model asks for the `max_repeats`-th same call in a row (across its turns; a user
  message in between starts over), the guard acts before that call runs.
- **Idle turns** (with `max_idle_turns`): a turn (a model call and its tool calls) is idle
  when none of its tool results is new, that is when an earlier tool result of the agent's
  run had the same text. After `max_idle_turns` idle turns in a row the guard acts before
  the next model call.

How it acts (`on`):

- `"tell"`: the call runs, and a note naming the tool is added to its result, once in a
  row of same calls; after idle turns the note goes at the end of the last tool result the
  model is about to read, once in a row of idle turns.
- `"pause"`: the call does not run; the run pauses with `info == {"loop": {"tool",
  "arguments", "count"}}` (after idle turns, the last call of the idle turn, `count` the idle
  turns, and `"reason": "idle"`). Resuming it with a true value runs the call (or the model
  call) and counts from zero again: the approved call is not counted, the next same call
  is the first. A false value ends the run with `LoopDetected`.
- `"stop"`: the call does not run; the run ends with `LoopDetected` naming the tool.

The guard is a `plait.Hooks` on the agent's seams (`before_agent`, `before_tool`,
`after_tool`, `before_model`), after the agent's own hooks. What it counts is kept with the
agent's run (`save_state` at the agent's place), so it holds across pauses and resumes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from plait.core.hooks import Hooks, ModelRequest
from plait.errors import LoopDetected, UsageError
from plait.messages import Message, ToolCall

if TYPE_CHECKING:
    from plait.core.agent import AgentInput
    from plait.core.agent_context import AgentContext, HookContext

__all__ = ["LoopGuard"]

Mode = Literal["tell", "pause", "stop"]
_MODES = ("tell", "pause", "stop")
_KEY = "plait.loop_guard"  # where the guard keeps its counts (`save_state`)


@dataclasses.dataclass(frozen=True, slots=True)
class LoopGuard:
    """Watches one agent for the same tool call `max_repeats` times in a row (and, if set,
    `max_idle_turns` turns with no new tool result) and acts as `on` says: `"tell"` the
    model, `"pause"` the run for a person, or `"stop"` it with `LoopDetected`.

    Raises:
        UsageError: `max_repeats` is not an int of 2 or more, `max_idle_turns` is not None
            or an int of 1 or more, or `on` is not "tell", "pause" or "stop".
    """

    max_repeats: int = 3
    max_idle_turns: int | None = None
    on: Mode = "tell"

    def __post_init__(self) -> None:
        if type(self.max_repeats) is not int or self.max_repeats < 2:
            raise UsageError(
                f"LoopGuard: max_repeats must be an int of 2 or more, got {self.max_repeats!r}"
            )
        idle = self.max_idle_turns
        if idle is not None and (type(idle) is not int or idle < 1):
            raise UsageError(
                f"LoopGuard: max_idle_turns must be an int of 1 or more, or None, got {idle!r}"
            )
        if self.on not in _MODES:
            raise UsageError(f"LoopGuard: on must be 'tell', 'pause' or 'stop', got {self.on!r}")

    def hooks(self) -> Hooks:
        """Return the hook that does the guarding (what `ChatModelAgent` adds)."""
        return _RepeatGuard(self) if self.max_idle_turns is None else _IdleGuard(self)


def _fresh() -> dict[str, Any]:
    return {
        "reset": None,  # the id of the call a person let run: counting starts after it
        "tell": [],  # ids of calls whose result gets the note
        "told": [],  # ids of calls whose result got it
        "seen": [],  # digests of the tool results of the agent's run
        "turn": [False, False],  # the turn so far: had results, had a new one
        "idle": 0,  # idle turns in a row
        "idle_told": False,  # the note about them was given
        "idle_pauses": 0,  # pauses over idle turns answered so far
    }


def _load(ctx: HookContext) -> tuple[HookContext, dict[str, Any]]:
    """Return the agent's place (for a tool call, its agent's) and the guard's counts."""
    owner = ctx.owner()
    state = owner.load_state(_KEY)
    return owner, state if isinstance(state, dict) else _fresh()


def _arguments(call: ToolCall) -> Any:
    """Return the call's parsed arguments (the text as sent, when it is not JSON)."""
    try:
        return json.loads(call.arguments or "{}")
    except ValueError:
        return call.arguments


def _same_calls(messages: Sequence[Message], call: ToolCall, reset: str | None) -> list[str]:
    """Return the ids of the same calls in a row that end with `call` (it included), in the
    calls the model asked for since the last user message, not reaching back to `reset`."""
    asked: list[ToolCall] = []
    for message in messages:
        if message.role == "user":
            asked.clear()
        elif message.role == "assistant":
            asked.extend(message.tool_calls)
    at = next((i for i in range(len(asked) - 1, -1, -1) if asked[i].id == call.id), None)
    if at is None:  # a hook replaced the call: it comes after what the model asked for
        asked.append(call)
        at = len(asked) - 1
    key = (call.name, _arguments(call))
    same: list[str] = []
    for earlier in reversed(asked[: at + 1]):
        if earlier.id == reset or (earlier.name, _arguments(earlier)) != key:
            break
        same.append(earlier.id)
    return same


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _loop_error(
    ctx: AgentContext, tool: str, arguments: Any, count: int, reason: str
) -> LoopDetected:
    if reason == "idle":
        what = (
            f"agent '{ctx.agent_name}' spent {count} turns in a row without a new tool result "
            f"(last tool '{tool}')"
        )
    else:
        what = (
            f"agent '{ctx.agent_name}' called tool '{tool}' with the same arguments "
            f"{count} times in a row"
        )
    return LoopDetected(
        f"{what}; its loop guard stopped the run",
        agent_name=ctx.agent_name,
        tool_name=tool,
        arguments=arguments,
        count=count,
        reason=reason,
    )


class _RepeatGuard(Hooks):
    """A `LoopGuard` watching for repeated calls."""

    def __init__(self, guard: LoopGuard) -> None:
        self.guard = guard

    async def before_agent(self, ctx: HookContext, input: AgentInput) -> None:
        resumed = ctx.resume_info
        if resumed is None or not resumed.was_interrupted:  # a new run of the agent here
            ctx.save_state(_KEY, _fresh())

    async def before_tool(self, ctx: HookContext, call: ToolCall) -> None:
        guard = self.guard
        owner, state = _load(ctx)
        same = _same_calls(ctx.history, call, state["reset"])
        count = len(same)
        if count < guard.max_repeats:
            return
        arguments = _arguments(call)
        if guard.on == "tell":
            if not any(i in state["told"] or i in state["tell"] for i in same):
                state["tell"].append(call.id)
                owner.save_state(_KEY, state)
            return
        if guard.on == "stop":
            raise _loop_error(ctx, call.name, arguments, count, "repeat")
        info = {"loop": {"tool": call.name, "arguments": arguments, "count": count}}
        if not ctx.interrupt(info):  # pauses the first time; then the answer
            raise _loop_error(ctx, call.name, arguments, count, "repeat")
        state["reset"] = call.id  # a person let it run: count from zero again
        owner.save_state(_KEY, state)

    async def after_tool(self, ctx: HookContext, call: ToolCall, result: str) -> str | None:
        owner, state = _load(ctx)
        counted = self._count_result(state, result)
        noted = None
        if call.id in state["tell"]:
            state["tell"].remove(call.id)
            state["told"].append(call.id)
            noted = (
                f"{result}\n\nNote: you have called tool '{call.name}' with the same arguments "
                f"{self.guard.max_repeats} times in a row. You are repeating yourself: try "
                "something different, or answer with what you have."
            )
        if counted or noted is not None:
            owner.save_state(_KEY, state)
        return noted

    def _count_result(self, state: dict[str, Any], result: str) -> bool:
        """Note a tool result for the idle turns; return whether the counts changed."""
        return False


class _IdleGuard(_RepeatGuard):
    """A `LoopGuard` watching for repeated calls and for idle turns."""

    def _count_result(self, state: dict[str, Any], result: str) -> bool:
        digest = _digest(result)
        turn = state["turn"]
        turn[0] = True
        if digest not in state["seen"]:
            state["seen"].append(digest)
            turn[1] = True
        return True

    async def before_model(self, ctx: HookContext, request: ModelRequest) -> ModelRequest | None:
        guard = self.guard
        limit = guard.max_idle_turns
        assert limit is not None
        owner, state = _load(ctx)
        had_results, had_new = state["turn"]
        if had_results:  # the turn before this call ended: was it idle?
            state["idle"] = 0 if had_new else state["idle"] + 1
            state["idle_told"] = state["idle_told"] and not had_new
            state["turn"] = [False, False]
            owner.save_state(_KEY, state)
        count = state["idle"]
        if count < limit:
            return None
        last = next((m.tool_calls[-1] for m in reversed(ctx.history) if m.tool_calls), None)
        tool = last.name if last is not None else ""
        arguments = _arguments(last) if last is not None else None
        if guard.on == "stop":
            raise _loop_error(ctx, tool, arguments, count, "idle")
        if guard.on == "tell":
            return self._tell(owner, state, request, count)
        info = {"loop": {"tool": tool, "arguments": arguments, "count": count, "reason": "idle"}}
        place = owner.place(f"loop_guard:idle-{state['idle_pauses']}")
        if not place.interrupt(info):  # pauses the first time; then the answer
            raise _loop_error(ctx, tool, arguments, count, "idle")
        state["idle"] = 0  # a person let it go on: count from zero again
        state["idle_pauses"] += 1
        owner.save_state(_KEY, state)
        return None

    def _tell(
        self, owner: HookContext, state: dict[str, Any], request: ModelRequest, count: int
    ) -> ModelRequest | None:
        """Add the note about idle turns to the last tool result of the request, once."""
        if state["idle_told"]:
            return None
        messages = list(request.messages)
        at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "tool"), None)
        if at is None:
            return None
        state["idle_told"] = True
        owner.save_state(_KEY, state)
        result = messages[at]
        note = (
            f"{result.content}\n\nNote: your last {count} turns of tool calls brought no new "
            "results. You are repeating yourself: try something different, or answer with "
            "what you have."
        )
        messages[at] = Message.tool(note, result.tool_call_id, name=result.name)
        return dataclasses.replace(request, messages=tuple(messages))
