"""AG-UI front-end tools: the tools a `RunAgentInput` offers, which the client runs.

Each entry of `RunAgentInput.tools` (name, description, JSON-schema parameters) becomes a
`FrontendTool`, offered to every `ChatModelAgent` of the run besides its own tools
(`RunOption(extra_tools=...)`). A call of one pauses the run with an interrupt whose info is
`{"frontend_tool": {"tool", "arguments", "tool_call_id"}}`; the answer it is resumed with
is the tool's result, as the model sees it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ag_ui.core import TextPart, ToolMessage, UserMessage
from ag_ui.core import Tool as AguiTool

from plait.core.agent import Agent
from plait.core.agent_context import AgentContext, HookContext
from plait.core.interrupt import interrupt
from plait.errors import InvalidToolArguments, ResumeError, UsageError
from plait.messages import ToolInfo
from plait.server.bodies import InterruptOut
from plait.server.limits import ApiError
from plait.server.topology import describe
from plait.tools.base import TRANSFER_TOOL

__all__ = [
    "FRONTEND_TOOL",
    "FrontendTool",
    "frontend_tools",
    "text_of",
    "tool_call_of",
    "tool_results",
    "tool_text",
    "waiting_calls",
]

#: The key of a front-end tool call's interrupt info.
FRONTEND_TOOL = "frontend_tool"


class FrontendTool:
    """A tool the client runs: a call pauses the run until the client sends its result."""

    def __init__(self, name: str, description: str, parameters: dict[str, Any]) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters

    def info(self) -> ToolInfo:
        """Describe the tool to the model as the client described it."""
        return ToolInfo(name=self.name, description=self.description, parameters=self.parameters)

    async def call(self, arguments_json: str, ctx: AgentContext) -> str:
        """Pause the run for the client to run the call; return the result it sends."""
        address = ctx.address if isinstance(ctx, HookContext) else ""
        call_id = tool_call_of(address)
        try:
            arguments = json.loads(arguments_json or "{}")
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            raise InvalidToolArguments(
                f"the arguments for tool '{self.name}' must be a JSON object",
                tool_name=self.name,
                call_id=call_id,
                agent_name=ctx.agent_name,
            )
        asked = {"tool": self.name, "arguments": arguments, "tool_call_id": call_id}
        answer = interrupt({FRONTEND_TOOL: asked})
        if answer is None:
            return f"declined: {self.name} was not run"
        if isinstance(answer, str):
            return answer
        return json.dumps(answer, ensure_ascii=False)

    def __repr__(self) -> str:
        return f"FrontendTool({self.name!r})"


def frontend_tools(given: Sequence[AguiTool], agent: Agent) -> tuple[FrontendTool, ...]:
    """Return the front-end tools of a request for `agent`.

    Raises:
        ApiError: A tool has no name, or parameters that are not a JSON schema object (422).
        UsageError: Two tools share a name, or one has the name of a tool `agent` has.
    """
    tools: dict[str, FrontendTool] = {}
    for index, tool in enumerate(given):
        if not tool.name:
            raise ApiError(422, f"tools[{index}] has no name")
        parameters = tool.parameters
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        elif not isinstance(parameters, Mapping):
            raise ApiError(422, f"tools[{index}].parameters must be a JSON schema object")
        if tool.name in tools:
            raise UsageError(f"two front-end tools are named '{tool.name}'")
        tools[tool.name] = FrontendTool(tool.name, tool.description, dict(parameters))
    taken = sorted(tools.keys() & _tool_names(agent)) if tools else []
    if taken:
        name = getattr(agent, "name", "?")
        raise UsageError(
            f"front-end tools {taken} have the names of tools of agent '{name}'; "
            "rename them on the client"
        )
    return tuple(tools.values())


def _tool_names(agent: Agent) -> set[str]:
    """Return the names of the tools the agents of `agent` offer that are known before a
    run: their own tools, their agents called as tools, and the transfer tool."""
    topology = describe(agent)
    names = {name for node in topology.nodes for name in node.tools}
    for edge in topology.edges:
        if edge.kind == "agent_tool":
            names.add(edge.target.rpartition("/")[2])
        elif edge.kind == "transfer":
            names.add(TRANSFER_TOOL)
    return names


def waiting_calls(interrupts: Sequence[InterruptOut]) -> dict[str, InterruptOut]:
    """Return the pending front-end tool calls among `interrupts`, by tool call id."""
    waiting: dict[str, InterruptOut] = {}
    for pending in interrupts:
        info = pending.info
        asked = info.get(FRONTEND_TOOL) if isinstance(info, dict) else None
        call_id = tool_call_of(pending.address)
        if isinstance(asked, dict) and call_id and asked.get("tool_call_id") == call_id:
            waiting[call_id] = pending
    return waiting


def tool_call_of(address: str) -> str | None:
    """Return the id of the tool call an interrupt was raised in, from its address."""
    last = address.rpartition(";")[2]
    if not last.startswith("tool:"):
        return None
    return last.rpartition(":")[2] or None


def tool_results(
    messages: Sequence[Any], waiting: Mapping[str, InterruptOut], thread_id: str
) -> dict[str, str]:
    """Return the results that `messages` (a request's) give to the `waiting` front-end
    tool calls, by tool call id.

    Raises:
        ResumeError: They answer none of them, or user messages follow the answers (the
            resumed run would not read them).
    """
    results: dict[str, str] = {}
    last = -1
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage) and message.tool_call_id in waiting:
            results[message.tool_call_id] = tool_text(message)
            last = index
    if not results:
        calls = ", ".join(
            f"'{call_id}' ({pending.info[FRONTEND_TOOL]['tool']})"
            for call_id, pending in waiting.items()
        )
        raise ResumeError(
            f"thread '{thread_id}' waits for the results of front-end tool calls: {calls}; "
            "send a tool message with the call's toolCallId (or a resume entry for its "
            "interrupt: a cancelled one declines the call)"
        )
    if any(isinstance(m, UserMessage) for m in messages[last + 1 :]):
        raise ResumeError(
            "user messages after the front-end tool results would not be read by the "
            "resumed run: send them once it has finished"
        )
    return results


def tool_text(message: ToolMessage) -> str:
    """Return a tool message as the model reads it: its text, after its error if any."""
    text = text_of(message.content, "a tool message")
    if message.error:
        return f"error: {message.error}\n{text}" if text else f"error: {message.error}"
    return text


def text_of(content: str | Sequence[Any], where: str) -> str:
    """Return the text of a message's content: a string, or text parts joined by lines.

    Raises:
        ApiError: The content has other parts (400).
    """
    if isinstance(content, str):
        return content
    texts = [part.text for part in content if isinstance(part, TextPart)]
    if len(texts) != len(content):
        raise ApiError(400, f"{where} may hold only text parts")
    return "\n".join(texts)
