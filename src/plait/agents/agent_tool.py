"""`AgentTool`: run an agent as a tool of another agent."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

from plait.core.agent import Agent, require_agent
from plait.core.agent_context import AgentContext
from plait.core.checkpoint import NestedRecord
from plait.core.context import Frame, inside
from plait.core.history import as_records, rewrite_message, whole_messages
from plait.core.kernel import is_pause, run_agent
from plait.core.signal import raise_pause
from plait.errors import InvalidToolArguments, UsageError
from plait.events import AgentEvent
from plait.messages import Message
from plait.tools.base import ToolInfo
from plait.tools.function import describe_invalid_arguments

__all__ = ["AgentTool", "run_nested"]


class AgentTool:
    """An agent as a tool: the model sends `{"request": "..."}`, the agent runs on it, and its
    final answer (its last assistant message, or return-directly result) is the tool result.

    The child runs one level deeper (`depth + 1`, `run_path` extended) with its own history,
    sharing the run's session values both ways. Its events are passed up as they happen
    (`emit_internal_events=True`), but its actions (exit, transfer, break) never act on the
    caller. With `full_history=True` the child also sees the caller's conversation so far,
    rewritten "For context". A child error becomes the tool's failure, which the caller's model
    is told about; limit errors and cancellation end the whole run.

    `input_schema` (a JSON schema, or a pydantic model class) replaces `{request}` as the
    tool's parameters; the arguments are then checked against it (a model class strictly,
    as `@tool` checks its arguments) and the child gets them, as the JSON the model sent, as
    its user message.
    """

    runs_agent = True  # calling it runs an agent (the cassette replays that agent's calls)

    def __init__(
        self,
        agent: Agent,
        *,
        full_history: bool = False,
        emit_internal_events: bool = True,
        input_schema: dict[str, Any] | type[Any] | None = None,
    ) -> None:
        self.agent = require_agent(agent, "AgentTool: agent")
        if not agent.name:
            raise UsageError("AgentTool needs an agent with a name")
        self.full_history = full_history
        self.emits_events = emit_internal_events
        self._validator: Any = None
        self._schema: dict[str, Any] = {
            "type": "object",
            "properties": {"request": {"type": "string", "description": "What to ask the agent."}},
            "required": ["request"],
        }
        self._custom = input_schema is not None
        if input_schema is not None:
            self._use_schema(input_schema)

    def _use_schema(self, schema: dict[str, Any] | type[Any]) -> None:
        if isinstance(schema, dict):
            self._schema = schema
            return
        from pydantic import TypeAdapter

        self._validator = TypeAdapter(schema)
        self._schema = self._validator.json_schema()

    def info(self) -> ToolInfo:
        """Describe the tool: the agent's name and description, and its parameters."""
        return ToolInfo(
            name=self.agent.name,
            description=self.agent.description or self.agent.name,
            parameters=self._schema,
        )

    async def call(self, arguments_json: str, ctx: AgentContext) -> str:
        """Run one call of this tool with the model's `arguments_json`."""
        return await self._call(arguments_json, inside(ctx))

    async def _call(self, arguments_json: str, ctx: Frame) -> str:
        """Run the agent on the request and return its final answer.

        If the child pauses, this call pauses too (the run's interrupt lists the child's);
        on resume the child continues where it stopped, with its own input and history.
        """
        final = await run_nested(
            self.agent,
            ctx,
            lambda: [*self._context(ctx), Message.user(self._request(arguments_json, ctx))],
            ctx.emit if self.emits_events else None,
        )
        return "" if final is None else final.content

    def _request(self, arguments_json: str, ctx: Frame) -> str:
        if self._custom:
            return self._custom_request(arguments_json, ctx)
        try:
            args: Any = json.loads(arguments_json or "{}")
        except ValueError as exc:
            problem = f"the arguments for tool '{self.agent.name}' are not valid JSON: {exc}"
        else:
            if isinstance(args, dict) and isinstance(args.get("request"), str):
                return str(args["request"])
            problem = f"tool '{self.agent.name}' takes {{\"request\": <string>}}"
        raise InvalidToolArguments(
            problem, tool_name=self.agent.name, call_id=ctx.tool_call_id, agent_name=ctx.agent_name
        )

    def _custom_request(self, arguments_json: str, ctx: Frame) -> str:
        """With a custom schema, the child's message is the arguments as the model sent them."""
        problem = None
        if self._validator is not None:  # strict, as JSON: like the arguments of a `@tool`
            from pydantic import ValidationError

            try:
                self._validator.validate_json(arguments_json or "{}", strict=True)
            except ValidationError as exc:
                problem = describe_invalid_arguments(exc, self.agent.name)
        else:
            try:
                args = json.loads(arguments_json or "{}")
            except ValueError as exc:
                problem = f"the arguments for tool '{self.agent.name}' are not valid JSON: {exc}"
            else:
                if not isinstance(args, dict):
                    problem = f"the arguments for tool '{self.agent.name}' must be a JSON object"
        if problem is not None:
            raise InvalidToolArguments(
                problem,
                tool_name=self.agent.name,
                call_id=ctx.tool_call_id,
                agent_name=ctx.agent_name,
            )
        return arguments_json

    def _context(self, ctx: Frame) -> list[Message]:
        """The caller's conversation before this call, for `full_history`."""
        if not self.full_history:
            return []
        history = ctx.model_messages[:-1]  # everything before the calling assistant message
        out: list[Message] = []
        for message in history:
            if message.role == "system":
                continue
            out.append(
                message if message.role == "user" else rewrite_message(ctx.agent_name, message)
            )
        return out


async def run_nested(
    agent: Agent,
    ctx: Frame,
    messages: Callable[[], list[Message]],
    emit: Callable[[AgentEvent], object] | None,
) -> Message | None:
    """Run `agent` one level below `ctx` on `messages()`; return its final message.

    Its events go to `emit`. While it runs, its input and history are the resume record at
    `ctx`'s address; if it pauses, the pause is passed on to the caller (the tool call pauses
    too), and on resume it continues from them. An error inside it is raised.
    """
    saved = ctx.take_record("nested", NestedRecord)
    if saved is not None:
        child = ctx.nested(agent.name, saved.input)
        child.lane_history.extend(as_records(saved.history))
    else:
        child = ctx.nested(agent.name, messages())
    ctx.keep_record("nested", functools.partial(_record, child))
    final: AgentEvent | None = None
    async with aclosing(run_agent(agent, child)) as events:
        async for event in events:
            if event.error is not None:
                ctx.drop_record("nested")
                raise event.error
            if is_pause(event, child.depth):
                assert event.action is not None and event.action.interrupted is not None
                raise_pause(event.action.interrupted.contexts)
            if event.depth == child.depth and event.message is not None:
                final = event
            if emit is not None:
                emit(event)
    ctx.drop_record("nested")
    if final is None or final.message is None:
        return None
    return await final.message.get_message()


def _record(child: Frame) -> NestedRecord:
    return NestedRecord(input=list(child.root_input), history=whole_messages(child.lane_history))
