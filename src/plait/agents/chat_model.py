"""`ChatModelAgent`: the ReAct agent — call the model, run the tools it asks for, repeat."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from plait.agent import AgentInput
from plait.agents.instruction import fill_instruction
from plait.agents.middleware import Middleware, collect_hooks
from plait.context import RunContext, _current
from plait.errors import (
    InvalidToolArguments,
    LimitExceeded,
    MaxIterationsExceeded,
    ModelError,
    PlaitError,
    RunCancelled,
    ToolError,
    UsageError,
)
from plait.events import AgentAction, AgentEvent, AgentOutput, MessageStream, MessageVariant
from plait.messages import Message, ToolCall
from plait.models.base import ChatModel
from plait.tools.base import Tool, ToolInfo, ToolResult
from plait.tools.function import FunctionTool

__all__ = ["ChatModelAgent"]

GenModelInput = Callable[[str, AgentInput, RunContext], Sequence[Message]]


def _exit(final_result: str) -> ToolResult:
    """Finish the task: `final_result` becomes the final answer.

    Args:
        final_result: The final answer to return to the user.
    """
    return ToolResult(content=final_result, action=AgentAction(exit=True))


@dataclass(slots=True)
class _Outcome:
    """What one tool call produced."""

    index: int
    call: ToolCall
    message: Message
    action: AgentAction | None = None
    fatal: PlaitError | None = None

    @property
    def ends_turn(self) -> bool:
        action = self.action
        return action is not None and (action.exit or action.transfer_to_agent is not None)


class _Round:
    """What a round of tool calls left for the ReAct loop."""

    __slots__ = ("direct", "failed", "messages")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.direct: _Outcome | None = None
        self.failed = False


class ChatModelAgent:
    """A ReAct agent: it calls its model, runs the tools the model asks for, and repeats
    until the model answers without tool calls.

    Options:
        instruction: the system message; `{key}` is filled from session values, `{key?}` is
            optional, `{{key}}` is a literal `{key}`; other braces (JSON) are left alone.
        tools: `Tool`s, or plain functions (wrapped with `@tool`).
        return_directly: names of tools whose result ends the run as the final output.
        exit_tool: add an `exit(final_result)` tool that ends the run with an exit action.
        output_key: store the final text in `session_values[output_key]`.
        max_iterations: the most model calls in one run (`MaxIterationsExceeded` before more).
        gen_model_input: `(instruction, input, ctx) -> messages` builds the first model input.
        middlewares: `Middleware` hooks around model and tool calls.
        tool_errors: "model" (default) tells the model about a failing tool call; "raise"
            ends the run with a `ToolError`.
        model_options: keyword options passed to every model call.
    """

    def __init__(
        self,
        name: str,
        model: ChatModel,
        *,
        description: str = "",
        instruction: str = "",
        tools: Sequence[Tool | Callable[..., Any]] = (),
        return_directly: Sequence[str] = (),
        exit_tool: bool = False,
        output_key: str | None = None,
        max_iterations: int = 20,
        gen_model_input: GenModelInput | None = None,
        middlewares: Sequence[Middleware] = (),
        tool_errors: Literal["model", "raise"] = "model",
        model_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not name:
            raise UsageError("an agent needs a non-empty name")
        if model is None:
            raise UsageError(f"agent '{name}' needs a model")
        if max_iterations < 1:
            raise UsageError(f"agent '{name}': max_iterations must be at least 1")
        if tool_errors not in ("model", "raise"):
            raise UsageError(f"agent '{name}': tool_errors must be 'model' or 'raise'")
        self.name = name
        self.model = model
        self.description = description
        self.instruction = instruction
        self.output_key = output_key
        self.max_iterations = max_iterations
        self.gen_model_input = gen_model_input
        self.tool_errors = tool_errors
        self.model_options = dict(model_options or {})
        self.middlewares = tuple(middlewares)
        self._before_model = collect_hooks(self.middlewares, "before_model")
        self._after_model = collect_hooks(self.middlewares, "after_model")
        self._before_tool = collect_hooks(self.middlewares, "before_tool")
        self._after_tool = collect_hooks(self.middlewares, "after_tool")
        all_tools = [t if isinstance(t, Tool) else FunctionTool(t) for t in tools]
        if exit_tool:
            all_tools.append(FunctionTool(_exit, name="exit"))
        self._tools: dict[str, Tool] = {}
        infos: list[ToolInfo] = []
        for t in all_tools:
            info = t.info()
            if info.name in self._tools:
                raise UsageError(f"agent '{name}' has two tools named '{info.name}'")
            self._tools[info.name] = t
            infos.append(info)
        self._tool_infos = tuple(infos)
        self.return_directly = frozenset(return_directly) | ({"exit"} if exit_tool else set())
        unknown = sorted(self.return_directly - self._tools.keys())
        if unknown:
            raise UsageError(f"agent '{name}': return_directly names unknown tools {unknown}")

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        """Return the tools offered to the model, in order."""
        return self._tool_infos

    def __repr__(self) -> str:
        return f"ChatModelAgent({self.name!r})"

    def _initial_messages(self, input: AgentInput, ctx: RunContext) -> list[Message]:
        instruction = fill_instruction(self.instruction, ctx.session_values, self.name)
        if self.gen_model_input is not None:
            return list(self.gen_model_input(instruction, input, ctx))
        messages = [Message.system(instruction)] if instruction else []
        messages.extend(input.messages)
        return messages

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Run the ReAct loop on `input`, yielding model outputs and tool results."""
        try:
            messages = self._initial_messages(input, ctx)
        except PlaitError as exc:
            yield ctx.event(error=exc)
            return
        streaming = input.enable_streaming
        calls_made = 0
        while True:
            if calls_made >= self.max_iterations:
                yield ctx.event(error=MaxIterationsExceeded(agent_name=self.name, limit=calls_made))
                return
            calls_made += 1
            for hook in self._before_model:
                messages = (await hook(ctx, messages)) or messages
            if streaming:
                stream = MessageStream(self._open_stream(messages), on_error=self._model_error)
                failure: PlaitError | None = None
                try:
                    yield ctx.event(output=_streaming_output(stream))
                    try:
                        reply = await stream.collect()
                    except PlaitError as exc:
                        failure = exc
                finally:
                    await stream.aclose()
                if failure is not None:
                    yield ctx.event(error=failure)
                    return
            else:
                try:
                    reply = await self.model.generate(
                        messages, tools=self._tool_infos, **self.model_options
                    )
                except Exception as exc:
                    yield ctx.event(error=self._model_error(exc))
                    return
                yield ctx.event(message=reply)
            ctx.record_model_call(reply.usage)
            for hook in self._after_model:
                reply = (await hook(ctx, reply)) or reply
            messages.append(reply)
            if not reply.tool_calls:
                if self.output_key is not None:
                    ctx.session_values[self.output_key] = reply.content
                return
            rnd = _Round()
            async for event in self._run_tools(reply.tool_calls, ctx, rnd):
                yield event
            if rnd.failed:
                return
            messages.extend(rnd.messages)
            if rnd.direct is not None:
                if self.output_key is not None:
                    ctx.session_values[self.output_key] = rnd.direct.message.content
                return

    def _open_stream(self, messages: list[Message]) -> AsyncIterator[Message]:
        return self.model.stream(messages, tools=self._tool_infos, **self.model_options)

    def _model_error(self, exc: Exception) -> PlaitError:
        if isinstance(exc, ModelError):
            if exc.agent_name is None:
                exc.agent_name = self.name
            return exc
        if isinstance(exc, PlaitError):
            return exc
        err = ModelError(f"model call failed: {type(exc).__name__}: {exc}", agent_name=self.name)
        err.__cause__ = exc
        return err

    async def _run_tools(
        self, calls: Sequence[ToolCall], ctx: RunContext, rnd: _Round
    ) -> AsyncIterator[AgentEvent]:
        """Run one round of tool calls, concurrently; yield each result as it completes.

        A return-directly result (or one whose action exits or transfers) is held back and
        yielded last; the tool messages are kept in call order for the next model call.
        """
        if len(calls) == 1:
            outcome = await self._run_tool(calls[0], ctx, 0)
            event = self._accept(outcome, ctx, rnd)
            if event is not None:
                yield event
            outcomes = [outcome]
        else:
            outcomes = []
            tasks = [
                asyncio.ensure_future(self._run_tool(call, ctx, i)) for i, call in enumerate(calls)
            ]
            try:
                pending: set[asyncio.Future[_Outcome]] = set(tasks)
                while pending:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for task in sorted(done, key=tasks.index):
                        outcome = task.result()
                        outcomes.append(outcome)
                        event = self._accept(outcome, ctx, rnd)
                        if event is not None:
                            yield event
                        if rnd.failed:
                            return
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            outcomes.sort(key=lambda o: o.index)
        if rnd.failed:
            return
        rnd.messages = [o.message for o in outcomes]
        if rnd.direct is not None:
            yield ctx.event(message=rnd.direct.message, action=rnd.direct.action)

    def _accept(self, outcome: _Outcome, ctx: RunContext, rnd: _Round) -> AgentEvent | None:
        """Record a finished tool call; return its event unless it is held back."""
        if outcome.fatal is not None:
            rnd.failed = True
            return ctx.event(error=outcome.fatal)
        if outcome.call.name in self.return_directly or outcome.ends_turn:
            if rnd.direct is None or outcome.index > rnd.direct.index:
                rnd.direct = outcome
            return None
        return ctx.event(message=outcome.message, action=outcome.action)

    async def _run_tool(self, call: ToolCall, ctx: RunContext, index: int) -> _Outcome:
        """Run one tool call through the tool middlewares; failures become an outcome."""
        tctx = ctx.for_tool(call.name, call.id)
        for hook in self._before_tool:
            call = (await hook(tctx, call)) or call
        tool = self._tools.get(call.name)
        action: AgentAction | None = None
        fatal: PlaitError | None = None
        if tool is None:
            content, fatal = self._unknown_tool(call)
        else:
            token = _current.set(tctx)
            try:
                result = await tool.call(call.arguments, tctx)
            except Exception as exc:
                content, fatal = self._tool_failure(call, exc)
            else:
                if isinstance(result, ToolResult):
                    content, action = result.content, result.action
                else:
                    content = result
            finally:
                _current.reset(token)
            sent = tctx.take_action()
            if sent is not None:
                action = sent if action is None else sent.merge(action)
        if fatal is None:
            for hook in self._after_tool:
                content = (await hook(tctx, call, content)) or content
        message = Message.tool(content, call.id, name=call.name)
        return _Outcome(index, call, message, action, fatal)

    def _unknown_tool(self, call: ToolCall) -> tuple[str, PlaitError | None]:
        names = ", ".join(self._tools) or "(none)"
        text = f"there is no tool named '{call.name}'; the available tools are: {names}"
        if self.tool_errors == "raise":
            return "", ToolError(text, tool_name=call.name, call_id=call.id, agent_name=self.name)
        return f"Error: {text}.", None

    def _tool_failure(self, call: ToolCall, exc: Exception) -> tuple[str, PlaitError | None]:
        if isinstance(exc, LimitExceeded | RunCancelled):
            return "", exc
        if isinstance(exc, InvalidToolArguments):
            text = str(exc)
        else:
            text = f"tool '{call.name}' raised {type(exc).__name__}: {exc}"
        if self.tool_errors == "model":
            return f"Error: {text}", None
        if isinstance(exc, ToolError):
            return "", exc
        err = ToolError(text, tool_name=call.name, call_id=call.id, agent_name=self.name)
        err.__cause__ = exc
        return "", err


def _streaming_output(stream: MessageStream) -> AgentOutput:
    return AgentOutput(message=MessageVariant(is_streaming=True, role="assistant", stream=stream))
