"""`ChatModelAgent`: the ReAct agent — call the model, run the tools it asks for, repeat."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any, Literal

from plait.agents.flow import TRANSFER_TOOL, TransferTool, set_sub_agents, transfer_instruction
from plait.agents.instruction import fill_instruction
from plait.agents.middleware import Middleware
from plait.agents.options import RunOptions
from plait.agents.react import react_loop
from plait.agents.tool_calls import ToolCalls
from plait.capabilities.compaction import Compaction
from plait.capabilities.guarded import guarded
from plait.capabilities.guardrails import Guardrail, OutputGuardrails, guardrail_hooks
from plait.capabilities.loop_guard import LoopGuard
from plait.capabilities.structured import (
    FinalResultTool,
    StructuredOutput,
)
from plait.core.agent import Agent, AgentInput
from plait.core.agent_context import AgentContext
from plait.core.context import Frame, inside
from plait.core.handoff import can_transfer
from plait.core.hooks import HookChain, Hooks
from plait.errors import (
    UsageError,
)
from plait.events import AgentAction, AgentEvent
from plait.messages import Message
from plait.models.base import ChatModel, supports_output_schema
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
    _extra_tools: tuple[Tool, ...] = ()  # a run's `RunOption(extra_tools=...)` (a copy's)

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
        self.output_type, self.output_retries = output_type, output_retries
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
        """Order the tools: the user's, the run's extra ones, then transfer_to_agent, then
        exit."""
        given = [
            *self._user_tools,
            *(self._run_tools or ()),
            *self._added_tools,
            *self._extra_tools,
        ]
        tools = [t for t in given if t.info().name != "exit"]
        self._final_tool = self._output is not None and not supports_output_schema(self.model)
        if self._final_tool:
            assert self._output is not None
            tools.append(FinalResultTool(self._output))
        if self._transfer is not None or self._transfer_visible():
            tools.append(self._transfer or TransferTool(self))
        tools += [t for t in given if t.info().name == "exit"]
        self._tools, self._tool_infos = self._table(tools)
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

    def _table(self, tools: list[Tool]) -> tuple[dict[str, Tool], tuple[ToolInfo, ...]]:
        """Return `tools` by name, and their infos in order.

        Raises:
            UsageError: Two tools have one name.
        """
        table: dict[str, Tool] = {}
        infos: list[ToolInfo] = []
        for t in tools:
            info = t.info()
            if info.name in table:
                extra = {id(x) for x in self._extra_tools}
                if id(t) in extra or id(table[info.name]) in extra:
                    raise UsageError(
                        f"agent '{self.name}': the run's extra tool '{info.name}' has the "
                        "name of another of its tools; give it another name"
                    )
                raise UsageError(f"agent '{self.name}' has two tools named '{info.name}'")
            table[info.name] = t
            infos.append(info)
        return table, tuple(infos)

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
        # whether `final_result` is offered depends on the model
        rebuild = self._output is not None and clone.model is not self.model
        if given.output_type is not None:
            clone.output_type = given.output_type
            clone._output = StructuredOutput(
                given.output_type, self.output_retries, f"agent '{self.name}'"
            )
            rebuild = True  # `final_result` is offered or not with the new output
        if given.tools is not None:
            kept = [t for t in self._user_tools if self.exit_tool and t.info().name == "exit"]
            clone._toolsets, tools = _split_tools(given.tools)
            clone._user_tools = [*tools, *kept]
            names = {t.info().name for t in [*clone._user_tools, *self._added_tools]}
            clone._user_return_directly = self._user_return_directly & names
            rebuild = True
        if given.extra_tools is not None:
            toolsets, extra = _split_tools(given.extra_tools)
            clone._toolsets = [*clone._toolsets, *toolsets]
            clone._extra_tools = tuple(extra)
            rebuild = True
        if rebuild:
            clone._build_tools()
        return clone

    async def _open_toolsets(self, stack: AsyncExitStack, ctx: Frame) -> ChatModelAgent:
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

    def _initial_messages(self, input: AgentInput, ctx: Frame) -> list[Message]:
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
        events = react_loop(self, input, run_ctx)
        if self._output_guardrails is None:
            return events
        options = run_ctx.run.options
        given = options.for_agent(self.name) if isinstance(options, RunOptions) else None
        structured = self._output is not None or (
            given is not None and given.output_type is not None
        )
        return guarded(events, run_ctx, self._output_guardrails, self.output_key, structured)

    def _store_output(self, ctx: Frame, value: Any) -> None:
        if self.output_key is not None:
            ctx.session_values[self.output_key] = value
