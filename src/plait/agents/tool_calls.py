"""A round of tool calls: run each call through the tool hooks, turn failures and pauses
into outcomes, and decide which results are shown now and which are held back.

Each call runs in a guard (`Frame.guard`): past its timeout it is stopped and becomes a
`ToolTimeout` failure; when the run is asked to stop, every call in flight is stopped and
the round ends as stopped, to be saved and resumed (the stopped calls then run again).
Inside the guard the call passes through the `wrap_tool` hooks, with the gate of a tool
that has one (`plait.effects.Gate`: its approval, its journal) innermost of the agent's own.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from plait._util.quote import quote
from plait.core.context import Emit, Frame
from plait.core.context_events import message_event
from plait.core.hooks import HookChain, call_hook, ends_run
from plait.core.kernel import Interrupted, call_in
from plait.core.wrapped import Next, wrap_chain
from plait.errors import (
    InvalidToolArguments,
    LimitExceeded,
    PlaitError,
    RunCancelled,
    ToolError,
    ToolTimeout,
)
from plait.events import AgentAction, AgentEvent, InterruptCtx, TransferToAgentAction
from plait.messages import Message, ToolCall
from plait.tools.base import Gated, HasTimeout, Tool, ToolResult
from plait.tools.effects import Gate

__all__ = ["Outcome", "Round", "ToolCalls"]

# (role, content, tool_calls, tool_call_id, name, usage): `Message.tool` without its frame
_make_message: Callable[..., Message] = Message._make  # type: ignore[attr-defined]


@dataclass(slots=True)
class Outcome:
    """What one tool call produced."""

    index: int
    call: ToolCall
    message: Message
    action: AgentAction | None = None
    fatal: PlaitError | None = None
    interrupts: tuple[InterruptCtx, ...] = ()
    stopped: bool = False  # the run was asked to stop while the call ran: it has no result

    @property
    def ends_turn(self) -> bool:
        action = self.action
        return action is not None and (action.exit or action.transfer_to_agent is not None)


_NONE_DONE: Mapping[int, Outcome] = MappingProxyType({})  # a round with no earlier results


class Round:
    """What a round of tool calls left for the ReAct loop."""

    __slots__ = ("direct", "done", "failed", "interrupt_calls", "interrupts", "outcomes", "stopped")

    def __init__(self, done: Mapping[int, Outcome] = _NONE_DONE) -> None:
        self.outcomes: list[Outcome] = []
        self.direct: Outcome | None = None
        self.failed = False
        self.stopped = False  # a stop of the run cut some calls short
        self.interrupts: list[InterruptCtx] = []  # in the order of the calls that raised them
        self.interrupt_calls: list[int] = []  # the position of each one's call
        self.done = done  # results from before a pause: not run again, not re-emitted

    def messages(self) -> list[Message]:
        """Return the tool messages in the order of the calls."""
        outcomes = self.outcomes
        if len(outcomes) > 1:
            outcomes.sort(key=lambda o: o.index)
        return [o.message for o in outcomes]


class ToolCalls:
    """How one agent runs its tool calls: its tools, which results end its turn, what a
    failure becomes."""

    def __init__(
        self,
        agent_name: str,
        tools: Mapping[str, Tool],
        *,
        return_directly: frozenset[str],
        tool_errors: Literal["model", "raise"],
        transfers: bool = True,
        tool_timeout: float | None = None,
    ) -> None:
        self.name = agent_name
        self.transfers = transfers  # whether a result's transfer has anywhere to go
        self._tools = tools
        self.return_directly = return_directly
        self.tool_errors = tool_errors
        self._limits = {name: _limit(tool, tool_timeout) for name, tool in tools.items()}
        # the tools whose calls pass a gate: an approval, or the journal of a "once" effect
        self._gates: dict[str, Gate] = {
            name: Gate(tool.effect, tool.approval)
            for name, tool in tools.items()
            if isinstance(tool, Gated) and (tool.effect == "once" or tool.approval is not None)
        }

    def journaled(self, calls: tuple[ToolCall, ...], ctx: Frame) -> bool:
        """Whether any of `calls` is of a "once" tool (its key is made now, so that the
        reply saved before it runs holds the run's root id)."""
        found = False
        for call in calls:
            gate = self._gates.get(call.name)
            if gate is not None and gate.effect == "once":
                found = ctx.for_tool(call.name, call.id).idempotency_key is not None
        return found

    def accept(self, outcome: Outcome, ctx: Frame, rnd: Round) -> AgentEvent | None:
        """Record a finished tool call; return its event unless it is held back.

        A return-directly result (or one whose action exits or transfers) is held back to be
        yielded last; if several are called, the last in the message wins.
        """
        if outcome.interrupts:  # kept in call order, whichever call paused first
            at = bisect.bisect_right(rnd.interrupt_calls, outcome.index)
            rnd.interrupt_calls[at:at] = [outcome.index] * len(outcome.interrupts)
            rnd.interrupts[at:at] = outcome.interrupts
            return None
        if outcome.stopped:
            rnd.stopped = True
            return None
        rnd.outcomes.append(outcome)
        if outcome.fatal is not None:
            rnd.failed = True
            return ctx.event(error=outcome.fatal)
        action = outcome.action  # one that exits or transfers ends the turn (`ends_turn`)
        if outcome.call.name in self.return_directly or (
            action is not None and (action.exit or action.transfer_to_agent is not None)
        ):
            held = rnd.direct
            if held is None or outcome.index > held.index:
                rnd.direct = outcome
                if held is None:
                    return None
                outcome = held  # superseded: emitted now, like any other result
        if outcome.index in rnd.done:
            return None  # finished before the pause: its event was already seen
        return message_event(
            ctx.agent_name, ctx.run_path, ctx.depth, "tool", outcome.message, outcome.action
        )

    def run(
        self,
        call: ToolCall,
        ctx: Frame,
        index: int,
        hooks: HookChain,
        emit: Emit | None = None,
    ) -> Awaitable[Outcome]:
        """Run one tool call through the tool hooks; failures become an outcome (a hook's
        error ends the run). A `before_tool` hook runs in the call's context: it may pause
        the run there (`ctx.interrupt`) before the tool runs.

        The run counts the call while it runs (`Frame.tool_calls`); one that paused is
        uncounted, to be counted when it runs again on the resume."""
        tctx = ctx.for_tool(call.name, call.id)
        if emit is not None:
            tctx.set_emit(emit)
        if hooks.before_tool or hooks.after_tool:
            return self._hooked(call, tctx, index, hooks)
        return self._call(call, tctx, index, hooks)  # no hooks: one frame less

    async def _hooked(self, call: ToolCall, tctx: Frame, index: int, hooks: HookChain) -> Outcome:
        if hooks.before_tool:
            try:
                checked = await call_in(tctx, _before_tool, hooks, tctx, call)
            except PlaitError as exc:
                return Outcome(index, call, Message.tool("", call.id, name=call.name), fatal=exc)
            if isinstance(checked, Interrupted):
                message = Message.tool("", call.id, name=call.name)
                return Outcome(index, call, message, interrupts=checked.contexts)
            call = checked
        outcome = await self._call(call, tctx, index, hooks)
        if hooks.after_tool and outcome.fatal is None and not outcome.interrupts:
            if not outcome.stopped:
                return await _after_tool(hooks, tctx, outcome)
        return outcome

    async def _call(self, call: ToolCall, tctx: Frame, index: int, hooks: HookChain) -> Outcome:
        """Call the tool, counted while it runs; failures, pauses and stops become an
        outcome."""
        run = tctx.run
        run.tool_calls += 1  # `count_tool_call`, inline
        tool = tctx.tool = self._tools.get(call.name)
        if tool is not None and (tap := run.interceptor) is not None:
            tool = tap.tool(tctx, tool)  # a durable-execution engine runs it elsewhere
        action: AgentAction | None = None
        fatal: PlaitError | None = None
        if tool is None:
            content, fatal = self._unknown_tool(call)
        else:
            # the call runs in its guard; it ends without a result (None) when a stop of the
            # run cut it short or came before it started, and past its timeout it fails
            result: str | ToolResult | Interrupted | None = None
            try:
                if not run.cancel_requested:
                    limit = self._limits.get(call.name)
                    gate = self._gates.get(call.name)
                    ended = False  # the call returned (else its guard stopped it)
                    with tctx.guard(limit) as guard:
                        if gate is None and not hooks.wrap_tool:
                            result = await call_in(tctx, tool.call, call.arguments, tctx)
                        else:
                            chain = _wrapped(tool, tctx, hooks, gate)
                            result = await call_in(tctx, chain, call)
                        ended = True
                    if not ended and guard.reason == "timeout" and limit is not None:
                        raise ToolTimeout(
                            tool_name=call.name, limit=limit, call_id=call.id, agent_name=self.name
                        )
            except Exception as exc:
                tctx.tool_error = exc  # seen by the `after_tool` hooks
                content, fatal = self._tool_failure(call, exc)
            else:
                if result is None:
                    run.tool_calls -= 1  # it runs again on the resume, and counts then
                    return Outcome(index, call, Message.tool("", call.id), stopped=True)
                if isinstance(result, Interrupted):
                    run.tool_calls -= 1
                    message = Message.tool("", call.id, name=call.name)
                    return Outcome(index, call, message, interrupts=result.contexts)
                if isinstance(result, ToolResult):
                    content, action = result.content, result.action
                else:
                    content = result
            sent = tctx.take_action()
            if sent is not None:
                action = sent if action is None else sent.merge(action)
        if action is not None and action.transfer_to_agent is not None and not self.transfers:
            content, action, fatal = self._stray_transfer(call, action.transfer_to_agent)
        message = _make_message("tool", content, (), call.id, call.name, None)  # `Message.tool`
        return Outcome(index, call, message, action, fatal)

    def _unknown_tool(self, call: ToolCall) -> tuple[str, PlaitError | None]:
        names = ", ".join(self._tools) or "(none)"
        text = f"there is no tool named {quote(call.name)}; the available tools are: {names}"
        if self.tool_errors == "raise":
            return "", ToolError(text, tool_name=call.name, call_id=call.id, agent_name=self.name)
        return f"Error: {text}.", None

    def _stray_transfer(
        self, call: ToolCall, transfer: TransferToAgentAction
    ) -> tuple[str, AgentAction | None, PlaitError | None]:
        """A result that transfers, from an agent with no one to transfer to: a failure."""
        text = (
            f"tool '{call.name}' asked to transfer to agent {quote(transfer.dest_agent_name)}, "
            f"but agent '{self.name}' has no agents to transfer to"
        )
        if self.tool_errors == "raise":
            err = ToolError(text, tool_name=call.name, call_id=call.id, agent_name=self.name)
            return "", None, err
        return f"Error: {text}.", None, None

    def _tool_failure(self, call: ToolCall, exc: Exception) -> tuple[str, PlaitError | None]:
        if isinstance(exc, LimitExceeded | RunCancelled) or ends_run(exc):
            return "", exc
        if isinstance(exc, InvalidToolArguments):
            text = str(exc)
        elif isinstance(exc, ToolTimeout):
            text = f"tool '{call.name}' did not finish within {exc.limit:g} s and was stopped"
        else:
            text = f"tool '{call.name}' raised {type(exc).__name__}: {exc}"
        if self.tool_errors == "model":
            return f"Error: {text}", None
        if isinstance(exc, ToolError):
            return "", exc
        err = ToolError(text, tool_name=call.name, call_id=call.id, agent_name=self.name)
        err.__cause__ = exc
        return "", err


async def _before_tool(hooks: HookChain, tctx: Frame, call: ToolCall) -> ToolCall:
    """Pass a tool call through the `before_tool` hooks."""
    for fn in hooks.before_tool:
        replaced = await call_hook(fn, "before_tool", tctx, call)
        if replaced is not None:
            call = replaced
    return call


async def _after_tool(hooks: HookChain, tctx: Frame, outcome: Outcome) -> Outcome:
    """Pass a tool's result through the `after_tool` hooks (a hook's error ends the run)."""
    call, content = outcome.call, outcome.message.content
    try:
        for fn in hooks.after_tool:
            replaced = await call_hook(fn, "after_tool", tctx, call, content)
            if replaced is not None:
                content = replaced
    except PlaitError as exc:
        outcome.fatal = exc
        return outcome
    outcome.message = Message.tool(content, call.id, name=call.name)
    return outcome


_RESULT = (str, ToolResult)


def _wrapped(tool: Tool, tctx: Frame, hooks: HookChain, gate: Gate | None) -> Next:
    """Return the call of `tool` behind the `wrap_tool` hooks, the gate innermost of the
    agent's own (inside it only the runner's innermost hooks, such as a cassette)."""
    fns = hooks.wrap_tool if gate is None else hooks.add_inner("wrap_tool", gate.wrap_tool)
    return wrap_chain(fns, "wrap_tool", tctx, functools.partial(_call_tool, tool, tctx), _RESULT)


async def _call_tool(tool: Tool, tctx: Frame, call: ToolCall) -> str | ToolResult:
    """Call the tool (the innermost of its wrap hooks): its result, with the actions it sent
    (`send_action`) merged in, so the hooks see all it gave."""
    result = await tool.call(call.arguments, tctx)
    sent = tctx.take_action()
    if sent is None:
        return result
    if isinstance(result, ToolResult):
        action = sent if result.action is None else sent.merge(result.action)
        return ToolResult(content=result.content, action=action)
    return ToolResult(content=result, action=sent)


def _limit(tool: Tool, default: float | None) -> float | None:
    """The time limit of one tool's calls: its own, else the agent's."""
    own = tool.timeout if isinstance(tool, HasTimeout) else None
    return own if own is not None else default
