"""The ReAct loop of a `ChatModelAgent`: call the model, run the tools it asks for, repeat,
each step read from `plait.core.steps` with one `match`; and where one run of it stands (its
model input, the tool round under way, the checkpoint record, the structured answer)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, Sequence
from contextlib import AsyncExitStack, aclosing
from typing import Any, Literal, Protocol

from plait._util.fast import built
from plait._util.merge import Done, merge
from plait.agents.model_call import CallingAgent, ModelCalls, Reply
from plait.agents.options import RunOptions
from plait.agents.tool_calls import Outcome, Round, ToolCalls
from plait.capabilities.structured import FINAL_RESULT, OutputCheck, StructuredOutput
from plait.core.agent import AgentInput
from plait.core.checkpoint import DoneCall, ReactRecord
from plait.core.context import Emit, Frame
from plait.core.context_events import message_event
from plait.core.hooks import HookChain
from plait.core.steps import CALL_MODEL, CallModel, Fail, Final, Pause, RunTools, Step, Transfer
from plait.errors import ModelError, PlaitError, ResumeError, RunCancelled
from plait.events import AgentEvent
from plait.messages import Message, ToolCall
from plait.tools.base import Toolset

__all__ = ["ReactAgent", "react_loop"]

Events = AsyncGenerator[AgentEvent, None]


class ReactAgent(CallingAgent, Protocol):
    """What the ReAct loop reads of its agent (a `ChatModelAgent`)."""

    agent_hooks: HookChain
    _output: StructuredOutput | None
    _final_tool: bool
    _calls: ToolCalls
    _toolsets: list[Toolset]
    _emitting: frozenset[str]

    def _for_run(self, options: RunOptions) -> ReactAgent: ...

    async def _open_toolsets(self, stack: AsyncExitStack, ctx: Frame) -> ReactAgent: ...

    def _call_options(self) -> dict[str, Any]: ...

    def _initial_messages(self, input: AgentInput, ctx: Frame) -> list[Message]: ...

    def _store_output(self, ctx: Frame, value: Any) -> None: ...


async def react_loop(agent: ReactAgent, input: AgentInput, ctx: Frame) -> Events:
    """Run `agent`'s ReAct loop on `input`, yielding model outputs and tool results (as the
    run's per-run options, if any, change the agent; with its toolsets open)."""
    options = ctx.run.options
    toolsets: AsyncExitStack | None = None
    try:
        agent = agent if not isinstance(options, RunOptions) else agent._for_run(options)
        if agent._toolsets:
            toolsets = AsyncExitStack()
            agent = await agent._open_toolsets(toolsets, ctx)
        loop = _Loop(agent, input, ctx)
        step = loop.start()
        emitting = agent._emitting
    except PlaitError as exc:
        if toolsets is not None:
            await toolsets.aclose()
        yield ctx.event(error=exc)
        return
    try:
        while True:
            match step:
                case CallModel():
                    if not input.enable_streaming:  # the common case: no extra generator
                        for event in await loop.model_call():
                            yield event
                    else:
                        async with aclosing(loop.model_stream()) as live:
                            async for event in live:
                                yield event
                    # decided once the caller has seen the step's events (a stop asked for
                    # then is honoured at once)
                    decided = loop.decide_call()
                    events, step = decided or await loop.after_call()
                case RunTools(calls):
                    if loop.resumed_tools and (stop := await loop.save_resumed(calls)):
                        yield stop  # asked to stop before the resumed round ran
                        return
                    # one call of a tool that passes no events up, none done before
                    if len(calls) == 1 and not loop.done and calls[0].name not in emitting:
                        outcome = await agent._calls.run(calls[0], ctx, 0, loop.hooks)
                        shown = loop.accept_lone(outcome)
                        if shown is not None:
                            yield shown
                    else:
                        async with aclosing(loop.tool_round(calls)) as live:
                            async for event in live:
                                yield event
                    decided = loop.decide_round()
                    events, step = decided or await loop.after_round()
                case Final() | Transfer():
                    ctx.drop_record("react")
                    return
                case _:  # Pause or Fail: the record stays for the checkpoint
                    return
            for event in events:
                yield event
    finally:
        if toolsets is not None:
            await toolsets.aclose()


class _Loop(ModelCalls):
    """One run of a ChatModelAgent's ReAct loop: its model input and where it stands."""

    __slots__ = ("answer", "check", "done", "input", "lone", "plain", "resumed_tools", "round")

    agent: ReactAgent

    def __init__(self, agent: ReactAgent, agent_input: AgentInput, ctx: Frame) -> None:
        self.agent = agent
        self.input = agent_input
        self.ctx = ctx
        self.messages: list[Message] = []
        self.calls_made = 0
        self.done: dict[int, Outcome] = {}  # results from before a pause
        self.reply = Reply()  # the model's last reply, until it is taken
        self.round = Round()  # the last round of tool calls, until it is decided
        self.lone: Outcome | None = None  # or the plain result of a round of one call
        self.hooks = hooks = ctx.run.hooks.around(agent.agent_hooks)  # the runner's, then its own
        self.hooked = bool(hooks.before_model or hooks.during_model or hooks.wrap_model)
        self.options = agent._call_options()
        output = agent._output
        self.check = None if output is None else OutputCheck(output, agent.name, agent._final_tool)
        self.answer: list[AgentEvent] = []  # the events of a structured answer, to yield
        self.resumed_tools = False  # the run resumes in a round of tool calls
        self.run = ctx.run  # its flags and counters, read on every step
        self.event_loop = asyncio.get_running_loop()
        self.teams = ctx.under_budgets  # team budgets apply
        # a reply goes on without awaiting: no `after_model` hook, team budget or output check
        self.plain = not (hooks.after_model or self.teams or self.check is not None)

    def start(self) -> Step:
        """Begin from the input, or from the record saved when the run was saved."""
        record = self.ctx.take_record("react", ReactRecord)
        step: Step = CALL_MODEL
        if record is None:
            self.messages = self.agent._initial_messages(self.input, self.ctx)
        else:
            self.messages = list(record.messages)
            self.calls_made = record.calls_made
            if record.phase == "tools":
                self.done = self._restore_done(record)
                step = RunTools(self.messages[-1].tool_calls)
                self.resumed_tools = True
        self.ctx.set_model_messages(self.messages)
        self.ctx.set_model(self.agent.model)
        return step

    def _restore_done(self, record: ReactRecord) -> dict[int, Outcome]:
        calls = self.messages[-1].tool_calls if self.messages else []
        done: dict[int, Outcome] = {}
        for saved in record.done:
            if not 0 <= saved.index < len(calls):
                raise ResumeError(
                    f"the checkpoint of agent '{self.agent.name}' names tool call "
                    f"{saved.index}, but its last model reply has {len(calls)}"
                )
            call = calls[saved.index]
            message = Message.tool(saved.content, call.id, name=call.name)
            done[saved.index] = Outcome(saved.index, call, message, saved.action)
        return done

    def _save(self, phase: Literal["tools", "model"], outcomes: Sequence[Outcome] = ()) -> None:
        done = [
            built(DoneCall, {"index": o.index, "content": o.message.content, "action": o.action})
            for o in outcomes
        ]
        record = built(
            ReactRecord,
            {
                "kind": "react",
                "messages": list(self.messages),
                "calls_made": self.calls_made,
                "phase": phase,
                "done": done,
            },
        )
        self.ctx.keep_record("react", record)

    def decide_call(self) -> tuple[Sequence[AgentEvent], Step] | None:
        """`after_call` in the common case, without awaiting: a reply no hook sees, under no
        team budget, of an agent with no structured output, with no stop asked for and no
        step saves; None in any other case (await `after_call`)."""
        box, run = self.reply, self.run
        reply = box.message
        if (
            reply is None
            or box.refused is not None
            or box.paused
            or not self.plain
            or run.cancel_requested
            or run.durability == "step"
        ):
            return None
        if reply.usage is None:
            run.model_calls += 1  # all `record_model_call` counts then
        else:
            self.ctx.record_model_call(reply.usage)  # it cannot raise: no team budget applies
        self.messages.append(reply)
        if reply.tool_calls:
            return (), RunTools(reply.tool_calls)
        self.agent._store_output(self.ctx, reply.content)
        return (), Final(reply)

    async def after_call(self) -> tuple[list[AgentEvent], Step]:
        """Take the reply and decide the next step; a stop request is honoured here."""
        ctx, box = self.ctx, self.reply
        if box.refused is not None:
            return [], Fail(box.refused)  # the call never happened (a limit ended the run)
        if box.paused:  # a `before_model` hook paused the run: the call is made on resume
            self._save("model")
            return [ctx.pause_event(box.paused)], Pause(box.paused)
        if box.stopped:  # stopped while the model wrote: asked again on resume
            self.calls_made -= 1
            self._save("model")
            stop = await ctx.safe_point()
            return [stop or ctx.event(error=RunCancelled("the run was cancelled"))], Fail()
        if box.message is None:
            error = box.error or ModelError("the model gave no reply", agent_name=ctx.agent_name)
            return [ctx.event(error=error)], Fail(error)
        step = await self._take_reply(box, box.message)
        if isinstance(step, Fail):
            return [ctx.event(error=step.error)], step
        run = self.run
        if isinstance(step, RunTools) and (
            run.cancel_requested or (run.durability == "step" and self._journals(step))
        ):
            self._save("tools")  # a safe point before tools (the reply of a "once" call kept)
            stop = await ctx.safe_point()
            if stop is not None:
                return [stop], Fail()
        if self.answer:
            events, self.answer = self.answer, []
            return events, step
        return [], step

    async def save_resumed(self, calls: tuple[ToolCall, ...]) -> AgentEvent | None:
        """Before the round a resume starts in, save the run when a call of it is "once"
        (with `durability="step"`): a crash then recovers from here, not from the claimed
        checkpoint. Return the event ending the run if it was asked to stop."""
        self.resumed_tools = False
        if not self._journals(RunTools(calls)):
            return None
        self._save("tools", list(self.done.values()))
        return await self.ctx.safe_point()

    def _journals(self, step: RunTools) -> bool:
        """Whether the reply asking for `step`'s calls is saved before they run: with
        `durability="step"`, when one is a "once" call (a recovery must not ask again)."""
        return self.ctx.saves_steps and self.agent._calls.journaled(step.calls, self.ctx)

    async def _take_reply(self, box: Reply, reply: Message) -> Step:
        """Count the reply, pass it through the `after_model` hooks and decide the next
        step."""
        agent, ctx = self.agent, self.ctx
        try:
            ctx.record_model_call(reply.usage)
            if self.hooks.after_model:
                reply = await self._after_model(box, reply)
        except PlaitError as exc:
            return Fail(exc)
        self.messages.append(reply)
        if reply.tool_calls:
            return RunTools(reply.tool_calls)
        if self.check is not None:
            return self._structured(reply)
        agent._store_output(ctx, reply.content)
        return Final(reply)

    def _structured(self, reply: Message) -> Step:
        """Validate a text answer of a structured-output agent: the answer, a retry (the
        model is told what is wrong), or the error when retries are exhausted."""
        assert self.check is not None
        events, value, error = self.check.answer(self.ctx, reply, self.messages)
        if error is not None:
            return Fail(error)
        if not events:
            return CALL_MODEL
        self.agent._store_output(self.ctx, value)
        self.answer = events
        return Final(reply)

    def _final_result(self, rnd: Round) -> tuple[list[AgentEvent], Step] | None:
        """Take the round's `final_result` call: a valid answer ends the run (unless a later
        call of the reply ends the turn), an invalid one is a failure (the model saw the
        errors as the tool's result); None when the round goes on as usual."""
        assert self.check is not None
        found = [
            (o.index, o.call.arguments)
            for o in rnd.outcomes
            if o.call.name == FINAL_RESULT and o.fatal is None
        ]
        if not found:
            return None
        ctx = self.ctx
        events, value, index, error = self.check.tool_answer(ctx, found)
        if error is not None:
            return [ctx.event(error=error)], Fail(error)
        direct = rnd.direct
        if index is None or (direct is not None and direct.index > index):
            return None
        held = [] if direct is None else [ctx.event(message=direct.message, action=direct.action)]
        answer = next(o.message for o in rnd.outcomes if o.index == index)
        self.agent._store_output(ctx, value)
        return [*held, *events], Final(answer)

    async def tool_round(self, calls: tuple[ToolCall, ...]) -> AsyncGenerator[AgentEvent, None]:
        """Run a round of tool calls concurrently, passing events up live."""
        rnd = Round(self.done)
        self.done = {}
        async with aclosing(self._run_concurrently(calls, rnd)) as live:
            async for event in live:
                yield event
        self.round = rnd

    def accept_lone(self, outcome: Outcome) -> AgentEvent | None:
        """`ToolCalls.accept` for a round of one call (none done before a pause): a plain
        result (no action, failure, pause or stop, not returned directly) is shown and kept
        as `lone` without a `Round`; any other starts the round."""
        if (
            outcome.action is None
            and outcome.fatal is None
            and not outcome.interrupts
            and not outcome.stopped
            and outcome.call.name not in self.agent._calls.return_directly
        ):
            self.lone = outcome
            ctx = self.ctx
            return message_event(
                ctx.agent_name, ctx.run_path, ctx.depth, "tool", outcome.message, None
            )
        rnd = self.round = Round()
        return self.agent._calls.accept(outcome, self.ctx, rnd)

    def decide_round(self) -> tuple[Sequence[AgentEvent], Step] | None:
        """`after_round` in the common case, without awaiting: one result, shown, of an
        agent with no structured output, with no stop asked for and no step saves (the
        model is called again); None in any other case (await `after_round`)."""
        run, lone = self.run, self.lone
        if lone is not None:  # a round of one plain result (`accept_lone`)
            self.lone = None
            if self.check is None and not run.cancel_requested and run.durability != "step":
                self.messages.append(lone.message)
                return (), CALL_MODEL
            rnd = self.round = Round()
            rnd.outcomes.append(lone)
            return None
        rnd = self.round
        outcomes = rnd.outcomes
        if (
            len(outcomes) != 1
            or rnd.failed
            or rnd.stopped
            or rnd.interrupts
            or rnd.direct is not None
            or self.check is not None
            or run.cancel_requested
            or run.durability == "step"
        ):
            return None
        self.messages.append(outcomes[0].message)
        return (), CALL_MODEL

    async def after_round(self) -> tuple[list[AgentEvent], Step]:
        """Decide what a finished round of tool calls leads to: fail, pause, answer, hand
        over, or call the model again (after a safe point)."""
        agent, ctx, rnd = self.agent, self.ctx, self.round
        if rnd.failed:
            return [], Fail()  # its error event went up with the round
        if rnd.stopped:  # a stop cut tool calls short: save what finished, then stop
            self._save("tools", rnd.outcomes)
            stop = await ctx.safe_point()
            return [stop or ctx.event(error=RunCancelled("the run was cancelled"))], Fail()
        if rnd.interrupts:
            self._save("tools", rnd.outcomes)
            return [ctx.pause_event(rnd.interrupts)], Pause(tuple(rnd.interrupts))
        self.messages.extend(rnd.messages())
        if self.check is not None and self.check.use_tool:
            found = self._final_result(rnd)
            if found is not None:
                return found
        direct = rnd.direct
        if direct is not None:  # held back until every tool of the round finished
            agent._store_output(ctx, direct.message.content)
            event = ctx.event(message=direct.message, action=direct.action)
            transfer = None if direct.action is None else direct.action.transfer_to_agent
            if transfer is not None:
                return [event], Transfer(transfer.dest_agent_name, transfer)
            return [event], Final(direct.message)
        if ctx.saves_steps:
            self._save("model")
            stop = await ctx.safe_point()  # a step checkpoint, or a stop
            if stop is not None:
                return [stop], Fail()
        return [], CALL_MODEL

    async def _run_concurrently(
        self, calls: Sequence[ToolCall], rnd: Round
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run a round of tool calls concurrently; yield each result as it completes, and the
        events that tools (agents run as tools) pass up while they run."""
        agent, ctx = self.agent, self.ctx
        for index in sorted(rnd.done):
            agent._calls.accept(rnd.done[index], ctx, rnd)
        todo = [(i, c) for i, c in enumerate(calls) if i not in rnd.done]
        jobs = [functools.partial(_tool_job, agent, c, ctx, i, self.hooks) for i, c in todo]
        async with aclosing(merge(jobs)) as items:
            async for item in items:
                if isinstance(item, Done):
                    event = agent._calls.accept(item.value, ctx, rnd)
                    if event is not None:
                        yield event
                    if rnd.failed:
                        return
                else:
                    yield item


async def _tool_job(
    agent: ReactAgent,
    call: ToolCall,
    ctx: Frame,
    index: int,
    hooks: HookChain,
    emit: Emit,
) -> Outcome:
    return await agent._calls.run(call, ctx, index, hooks, emit)
