"""`ChatModelAgent`: the ReAct agent — call the model, run the tools it asks for, repeat."""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, aclosing
from types import MappingProxyType
from typing import Any, Literal

from plait._util.alongside import alongside
from plait._util.merge import Done, merge
from plait.agents.flow import TRANSFER_TOOL, TransferTool, set_sub_agents, transfer_instruction
from plait.agents.instruction import fill_instruction
from plait.agents.middleware import Middleware
from plait.agents.model_call import Reply, stream_reply
from plait.agents.options import RunOptions
from plait.agents.tool_calls import Outcome, Round, ToolCalls
from plait.capabilities.compaction import Compaction
from plait.capabilities.guarded import guarded
from plait.capabilities.guardrails import Guardrail, OutputGuardrails, guardrail_hooks
from plait.capabilities.loop_guard import LoopGuard
from plait.capabilities.structured import (
    FINAL_RESULT,
    FinalResultTool,
    OutputCheck,
    StructuredOutput,
)
from plait.core.agent import Agent, AgentInput
from plait.core.agent_context import AgentContext
from plait.core.checkpoint import DoneCall, ReactRecord
from plait.core.context import Emit, RunContext, inside
from plait.core.context_events import message_event
from plait.core.handoff import can_transfer
from plait.core.hooks import HookChain, Hooks, ModelRequest, call_hook, concurrently
from plait.core.kernel import Interrupted, call_in
from plait.core.run_state import CallGuard, RunState
from plait.core.steps import CALL_MODEL, CallModel, Fail, Final, Pause, RunTools, Step, Transfer
from plait.errors import (
    MaxIterationsExceeded,
    ModelError,
    PlaitError,
    ResumeError,
    RunCancelled,
    UsageError,
)
from plait.events import AgentAction, AgentEvent
from plait.messages import Message, ToolCall
from plait.models.base import ChatModel, model_error, supports_output_schema, wrong_output
from plait.models.call_ids import unique_ids
from plait.models.spec import resolve_model
from plait.tools.base import EmitsEvents, Tool, ToolInfo, ToolResult, Toolset, check_timeout
from plait.tools.function import FunctionTool

__all__ = ["ChatModelAgent"]

GenModelInput = Callable[[str, AgentInput, AgentContext], Sequence[Message]]


def _exit(final_result: str) -> ToolResult:
    """Finish the task: `final_result` becomes the final answer.

    Args:
        final_result: The final answer to return to the user.
    """
    return ToolResult(content=final_result, action=AgentAction(exit=True))


def _first(value: Any, default: Any) -> Any:
    return default if value is None else value


def _split_tools(
    given: Sequence[Tool | Toolset | Callable[..., Any]],
) -> tuple[list[Toolset], list[Tool]]:
    """Return the toolsets among `given`, and the rest as tools (functions wrapped)."""
    toolsets: list[Toolset] = []
    tools: list[Tool] = []
    for t in given:
        if isinstance(t, Tool):
            tools.append(t)
        elif isinstance(t, Toolset):
            toolsets.append(t)
        else:
            tools.append(FunctionTool(t))
    return toolsets, tools


def _check(name: str, max_iterations: int, tool_errors: str) -> None:
    if not name:
        raise UsageError("an agent needs a non-empty name")
    if max_iterations < 1:
        raise UsageError(f"agent '{name}': max_iterations must be at least 1")
    if tool_errors not in ("model", "raise"):
        raise UsageError(f"agent '{name}': tool_errors must be 'model' or 'raise'")


def _own_hooks(
    agent: ChatModelAgent,
    hooks: Sequence[Hooks],
    input_guardrails: Sequence[Guardrail],
    output_guardrails: Sequence[Guardrail],
) -> tuple[tuple[Hooks, ...], HookChain, OutputGuardrails | None]:
    """Return an agent's `hooks` attribute (its input guardrails, `hooks` and `middlewares`),
    the chain of all its hooks that the kernel and the loop read (those, then its loop guard
    and compaction: last, so the model sees the compacted request) and its output guardrails
    (None for none)."""
    name, loop_guard, compaction = agent.name, agent.loop_guard, agent.compaction
    if loop_guard is not None and not isinstance(loop_guard, LoopGuard):
        raise UsageError(f"agent '{name}': loop_guard must be a LoopGuard")
    if compaction is not None and not isinstance(compaction, Compaction):
        raise UsageError(f"agent '{name}': compaction must be a plait.Compaction")
    guards, output = guardrail_hooks(input_guardrails, output_guardrails, owner=f"agent '{name}'")
    given: tuple[Hooks, ...] = (*guards, *hooks, *agent.middlewares)
    own: tuple[Hooks, ...] = () if loop_guard is None else (loop_guard.hooks(),)
    if compaction is not None:
        own = (*own, compaction.bound_to(agent.model))
    return given, HookChain((*given, *own)), output


class ChatModelAgent:
    """A ReAct agent: it calls its model, runs the tools the model asks for, and repeats
    until the model answers without tool calls.

    The model is a `ChatModel` or a spec string such as "openai:gpt-4o-mini", built with
    `plait.models.infer` when the agent is made.

    Options:
        instruction: the system message; `{key}` is filled from session values, `{key?}` is
            optional, `{{key}}` is a literal `{key}`; other braces (JSON) are left alone.
        tools: `Tool`s, plain functions (wrapped with `@tool`), or `Toolset`s (such as
            `plait.tools.MCPToolset`), opened at the start of each run: their tools come after
            the others, in that run only.
        return_directly: names of tools whose result ends the run as the final output.
        exit_tool: add an `exit(final_result)` tool that ends the run with an exit action.
        output_key: store the final text in `session_values[output_key]` (the validated
            object, with `output_type`).
        output_type: a pydantic model, dataclass or `TypedDict`: the answer must be JSON
            valid for it, and the run's `final_output` is the validated object (see
            `plait.agents.structured`).
        output_retries: how many invalid answers the model is told about and asked again
            for before the run ends with `OutputValidationError`.
        max_iterations: the most model calls in one run (`MaxIterationsExceeded` before more).
        gen_model_input: `(instruction, input, ctx) -> messages` builds the first model input.
        hooks: `plait.Hooks` of this agent (inside the runner's): its model and tool calls,
            and its start and end.
        middlewares: `Middleware`s, added to `hooks` after them.
        input_guardrails: `(ctx, text) -> GuardrailResult` functions, run alongside the first
            model call of each run (see `plait.guardrails`); a trip is `GuardrailTripped`.
        output_guardrails: the same, run on the agent's final answer (the validated object,
            with `output_type`), which is held back until they pass (`plait.agents.guarded`).
        tool_errors: "model" (default) tells the model about a failing tool call (the tool
            raised, the arguments do not match its schema, the tool is unknown, or its result
            transfers with nowhere to go); "raise" ends the run with a `ToolError`.
        tool_timeout: seconds each tool call may run (None: no limit; a tool's own
            `@tool(timeout=...)` wins). A call past it is stopped and is a `ToolTimeout`
            failure, told to the model or raised as `tool_errors` says.
        model_options: keyword options passed to every model call.
        sub_agents: agents this one may transfer to (see `set_sub_agents`); they may
            transfer back unless they were built with `disallow_transfer_to_parent=True`.
        compaction: a `Compaction` that replaces older messages by a summary when the prompt
            grows past its `max_tokens` (a `before_model` hook after the agent's others).
        loop_guard: a `LoopGuard` that tells, pauses or stops the agent when it repeats the
            same tool call or its turns bring nothing new (its hook comes after `hooks`).
    """

    _run_tools: list[Tool] | None = None  # the toolsets' tools, in a run (a copy's)

    def __init__(
        self,
        name: str,
        model: ChatModel | str,
        *,
        description: str = "",
        instruction: str = "",
        tools: Sequence[Tool | Toolset | Callable[..., Any]] = (),
        return_directly: Sequence[str] = (),
        exit_tool: bool = False,
        output_key: str | None = None,
        max_iterations: int = 20,
        gen_model_input: GenModelInput | None = None,
        hooks: Sequence[Hooks] = (),
        middlewares: Sequence[Middleware] = (),
        tool_errors: Literal["model", "raise"] = "model",
        tool_timeout: float | None = None,
        model_options: Mapping[str, Any] | None = None,
        sub_agents: Sequence[Agent] = (),
        disallow_transfer_to_parent: bool = False,
        input_guardrails: Sequence[Guardrail] = (),
        output_guardrails: Sequence[Guardrail] = (),
        compaction: Compaction | None = None,
        loop_guard: LoopGuard | None = None,
        output_type: Any = None,
        output_retries: int = 2,
    ) -> None:
        _check(name, max_iterations, tool_errors)
        self.name = name
        self.model = resolve_model(model, owner=f"agent '{name}'")
        self.description = description
        self.instruction = instruction
        self.output_key = output_key
        self.output_type = output_type
        self._output = StructuredOutput.of(output_type, output_retries, f"agent '{name}'")
        self.max_iterations = max_iterations
        self.gen_model_input = gen_model_input
        self.tool_errors = tool_errors
        self.tool_timeout = check_timeout(tool_timeout, f"agent '{name}': tool_timeout")
        self.model_options = dict(model_options or {})
        self.middlewares = tuple(middlewares)
        self.loop_guard = loop_guard
        self.compaction = compaction
        self.hooks, self.agent_hooks, self._output_guardrails = _own_hooks(
            self, hooks, input_guardrails, output_guardrails
        )
        self._toolsets, self._user_tools = _split_tools(tools)
        self._added_tools: list[Tool] = []  # what a composite adds (`with_tools`)
        if exit_tool:
            self._user_tools.append(FunctionTool(_exit, name="exit"))
        self._user_return_directly = frozenset(return_directly)
        self.exit_tool = exit_tool
        self.disallow_transfer_to_parent = disallow_transfer_to_parent
        self.sub_agents: tuple[Agent, ...] = ()
        self.parent: Agent | None = None
        self._extra_instruction = ""
        self._transfer: Tool | None = None  # replaces the own transfer tool (see with_tools)
        self._build_tools()
        if sub_agents:
            set_sub_agents(self, sub_agents)

    def with_tools(
        self, tools: Sequence[Tool], instruction: str = "", *, transfer: Tool | None = None
    ) -> ChatModelAgent:
        """Return a copy of this agent with more tools and instruction; leave this one as is.

        The copy shares the model, middlewares and transfer wiring. Its tool table is its
        own: `tools` come after this agent's tools, and `instruction` is added at the end of
        its system message. `transfer` replaces its `transfer_to_agent` tool (a swarm gives
        its members one that reaches the other members too). A team wires its members this way.
        """
        clone = copy.copy(self)
        clone._transfer = transfer if transfer is not None else self._transfer
        clone._added_tools = [*self._added_tools, *tools]
        if instruction:
            clone._extra_instruction = f"{self._extra_instruction}\n\n{instruction}".strip()
        clone._build_tools()
        return clone

    def transfer_links_changed(self) -> None:
        """Offer the model the transfer tool for the new sub-agents and parent."""
        self._build_tools()

    def _transfer_visible(self) -> list[Agent]:
        targets = list(self.sub_agents)
        if self.parent is not None and not self.disallow_transfer_to_parent:
            targets.append(self.parent)
        return targets

    def _build_tools(self) -> None:
        """Order the tools: the user's, then transfer_to_agent, then exit."""
        given = [*self._user_tools, *(self._run_tools or ()), *self._added_tools]
        tools = [t for t in given if t.info().name != "exit"]
        self._final_tool = self._output is not None and not supports_output_schema(self.model)
        if self._final_tool:
            assert self._output is not None
            tools.append(FinalResultTool(self._output))
        if self._transfer is not None or self._transfer_visible():
            tools.append(self._transfer or TransferTool(self))
        tools += [t for t in given if t.info().name == "exit"]
        self._tools: dict[str, Tool] = {}
        infos: list[ToolInfo] = []
        for t in tools:
            info = t.info()
            if info.name in self._tools:
                raise UsageError(f"agent '{self.name}' has two tools named '{info.name}'")
            self._tools[info.name] = t
            infos.append(info)
        self._tool_infos = tuple(infos)
        self._emitting = frozenset(
            n for n, t in self._tools.items() if isinstance(t, EmitsEvents) and t.emits_events
        )
        rd = self._user_return_directly | ({"exit"} if self.exit_tool else set())
        unknown = sorted(rd - self._tools.keys())
        if unknown and (not self._toolsets or self._run_tools is not None):
            raise UsageError(f"agent '{self.name}': return_directly names unknown tools {unknown}")
        self.return_directly = rd
        self._calls = ToolCalls(
            self.name,
            self._tools,
            return_directly=rd,
            tool_errors=self.tool_errors,
            transfers=TRANSFER_TOOL in self._tools or can_transfer(self),
            tool_timeout=self.tool_timeout,
        )

    def _for_run(self, options: RunOptions) -> ChatModelAgent:
        """Return this agent as the run's options have it: itself when none apply to it,
        else a copy (this one is left as it is)."""
        given = options.for_agent(self.name)
        if given is None:
            return self
        clone = copy.copy(self)
        clone.instruction = _first(given.instruction, self.instruction)
        clone.model = _first(given.model, self.model)
        clone.max_iterations = _first(given.max_iterations, self.max_iterations)
        if given.model_options is not None:
            clone.model_options = {**self.model_options, **given.model_options}
        if given.tools is not None:
            kept = [t for t in self._user_tools if self.exit_tool and t.info().name == "exit"]
            clone._toolsets, tools = _split_tools(given.tools)
            clone._user_tools = [*tools, *kept]
            names = {t.info().name for t in [*clone._user_tools, *self._added_tools]}
            clone._user_return_directly = self._user_return_directly & names
            clone._build_tools()
        elif self._output is not None and clone.model is not self.model:
            clone._build_tools()  # whether `final_result` is offered depends on the model
        return clone

    async def _open_toolsets(self, stack: AsyncExitStack, ctx: RunContext) -> ChatModelAgent:
        """Return a copy of this agent offering its toolsets' tools too (opened on `stack`,
        which closes them)."""
        tools: list[Tool] = []
        for toolset in self._toolsets:
            for t in await stack.enter_async_context(toolset.open_tools(ctx)):
                if not isinstance(t, Tool):
                    raise UsageError(f"agent '{self.name}': toolset {toolset!r} gave {t!r}")
                tools.append(t)
        clone = copy.copy(self)
        clone._run_tools = tools
        clone._build_tools()
        return clone

    def _call_options(self) -> dict[str, Any]:
        """The keyword options of each model call (with the output schema, when the model
        takes one)."""
        output = self._output
        if output is None or self._final_tool:
            return self.model_options
        return {**self.model_options, "output_schema": output.schema}

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        """Return the tools offered to the model, in order (a toolset's are known only in
        a run)."""
        return self._tool_infos

    def __repr__(self) -> str:
        return f"ChatModelAgent({self.name!r})"

    def _initial_messages(self, input: AgentInput, ctx: RunContext) -> list[Message]:
        instruction = fill_instruction(self.instruction, ctx.session_values, self.name)
        targets = self._transfer_visible()
        extra = [transfer_instruction(targets)] if targets else []
        if self._extra_instruction:
            extra.append(self._extra_instruction)
        if extra:
            instruction = "\n\n".join([instruction, *extra] if instruction else extra)
        if self.gen_model_input is not None:
            return list(self.gen_model_input(instruction, input, ctx))
        messages = [Message.system(instruction)] if instruction else []
        messages.extend(input.messages)
        return messages

    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Run on `input` in `ctx` (see the class docstring)."""
        run_ctx = inside(ctx)
        events = self._events(input, run_ctx)
        if self._output_guardrails is None:
            return events
        structured = self._output is not None
        return guarded(events, run_ctx, self._output_guardrails, self.output_key, structured)

    async def _events(self, input: AgentInput, ctx: RunContext) -> AsyncGenerator[AgentEvent, None]:
        """Run the ReAct loop on `input`, yielding model outputs and tool results (as the
        run's per-run options, if any, change this agent; with its toolsets open)."""
        options = ctx.run_options
        toolsets: AsyncExitStack | None = None
        try:
            agent = self if not isinstance(options, RunOptions) else self._for_run(options)
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
                            rnd = loop.round = Round()
                            outcome = await agent._calls.run(calls[0], ctx, 0, loop.hooks)
                            shown = agent._calls.accept(outcome, ctx, rnd)
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

    def _store_output(self, ctx: RunContext, value: Any) -> None:
        if self.output_key is not None:
            ctx.session_values[self.output_key] = value


class _Loop:
    """One run of a ChatModelAgent's ReAct loop: its model input and where it stands."""

    __slots__ = (
        "agent",
        "answer",
        "calls_made",
        "check",
        "ctx",
        "done",
        "hooks",
        "input",
        "messages",
        "options",
        "reply",
        "resumed_tools",
        "round",
        "run",
        "teams",
    )

    def __init__(self, agent: ChatModelAgent, agent_input: AgentInput, ctx: RunContext) -> None:
        self.agent = agent
        self.input = agent_input
        self.ctx = ctx
        self.messages: list[Message] = []
        self.calls_made = 0
        self.done: dict[int, Outcome] = {}  # results from before a pause
        self.reply = Reply()  # the model's last reply, until it is taken
        self.round = Round()  # the last round of tool calls, until it is decided
        self.hooks = ctx.hooks.around(agent.agent_hooks)  # the runner's, then the agent's
        self.options = agent._call_options()
        output = agent._output
        self.check = None if output is None else OutputCheck(output, agent.name, agent._final_tool)
        self.answer: list[AgentEvent] = []  # the events of a structured answer, to yield
        self.resumed_tools = False  # the run resumes in a round of tool calls
        self.run = ctx.run_state()  # its flags and counters, read on every step
        self.teams = ctx.under_budgets  # team budgets apply
        ctx.chat_model = agent.model  # what the hooks see of the model (tracing names it)

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
            DoneCall.model_construct(index=o.index, content=o.message.content, action=o.action)
            for o in outcomes
        ]
        record = ReactRecord.model_construct(
            messages=list(self.messages), calls_made=self.calls_made, phase=phase, done=done
        )
        self.ctx.keep_record("react", record)

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
        if error is None:
            self.ctx.count_request()
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
        ctx, box, hooks = self.ctx, Reply(), self.hooks
        if hooks.before_model or hooks.during_model or self.run.interceptor is not None:
            error = await self._open_call(box)
            if error is not None:
                return [*box.events, ctx.event(error=error)]
            if box.paused:
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
        task = asyncio.current_task()
        flight = run.model_calls_in_flight
        flight.add(task)  # type: ignore[arg-type]  # a task: what a stop request cancels
        try:
            reply = await agent.model.generate(
                self.messages, tools=agent._tool_infos, **self.options
            )
        except asyncio.CancelledError:
            if not _stopped_by_request(run, task):
                raise
            box.stopped = True
            return []
        except Exception as exc:
            box.error = model_error(agent.name, exc)
            return []
        finally:
            flight.discard(task)
        if not isinstance(reply, Message):
            box.error = wrong_output(
                agent.model, agent.name, "generate() returned", reply, "a Message"
            )
            return []
        calls = reply.tool_calls
        if calls and (len(calls) > 1 or not calls[0].id):  # else the ids are unique
            reply = unique_ids(reply, ctx.ids.new_id)
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
        if box.paused:
            return
        request = box.request or self._request()
        fns = self.hooks.during_model
        during = functools.partial(concurrently, fns, "during_model", ctx, request) if fns else None
        async with aclosing(
            stream_reply(self._model(), self.agent.name, request, ctx, box, during)
        ) as chunks:
            async for event in chunks:
                yield event

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
            or self.hooks.after_model
            or self.teams
            or self.check is not None
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

    def _model(self) -> ChatModel:
        """The model to call: the agent's, or what the run's interceptor puts in its place."""
        tap = self.ctx.interceptor
        return self.agent.model if tap is None else tap.model(self.ctx, self.agent.model)

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
                reply = unique_ids(reply, self.ctx.ids.new_id)
            box.message = reply
        else:
            box.error = wrong_output(
                agent.model, agent.name, "generate() returned", reply, "a Message"
            )

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

    async def _after_model(self, box: Reply, reply: Message) -> Message:
        """Pass the reply through the `after_model` hooks; calls a hook adds get unique ids."""
        request = box.request or self._request()
        given = reply
        for fn in self.hooks.after_model:
            replaced = await call_hook(fn, "after_model", self.ctx, request, reply)
            if replaced is not None:
                reply = replaced
        return reply if reply is given else unique_ids(reply, self.ctx.ids.new_id)

    async def tool_round(self, calls: tuple[ToolCall, ...]) -> AsyncGenerator[AgentEvent, None]:
        """Run a round of tool calls concurrently, passing events up live."""
        rnd = Round(self.done)
        self.done = {}
        async with aclosing(self._run_concurrently(calls, rnd)) as live:
            async for event in live:
                yield event
        self.round = rnd

    def decide_round(self) -> tuple[Sequence[AgentEvent], Step] | None:
        """`after_round` in the common case, without awaiting: one result, shown, of an
        agent with no structured output, with no stop asked for and no step saves (the
        model is called again); None in any other case (await `after_round`)."""
        rnd, run = self.round, self.run
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


def _stopped_by_request(run: RunState, task: asyncio.Task[Any] | None) -> bool:
    """Whether a model call's cancellation in `task` is a stop request's alone (it is then
    taken back: the call ends with no reply)."""
    if task is None or task not in run.model_calls_stopped:
        return False
    run.model_calls_stopped.discard(task)
    return task.uncancel() == 0


async def _tool_job(
    agent: ChatModelAgent,
    call: ToolCall,
    ctx: RunContext,
    index: int,
    hooks: HookChain,
    emit: Emit,
) -> Outcome:
    return await agent._calls.run(call, ctx, index, hooks, emit)
