"""Agents the MCP tests serve or run as TARGETs (`tests/protocols/mcp_agents.py:<name>`).

`helper`'s model picks by the request: "approve X" calls a tool that asks a person,
"fail" is a model error, anything else is echoed; after a tool result it answers with it.
`adder` adds 2 and 3 with the `add` tool of the test MCP server and says the sum.
"""

from __future__ import annotations

import sys
from pathlib import Path

from plait import ChatModelAgent, Message, interrupt, tool
from plait.errors import ModelError
from plait.testing import FunctionModel, call
from plait.tools import MCPToolset
from plait.tools.base import ToolInfo

SERVER = Path(__file__).resolve().parent / "mcp_servers" / "server.py"


@tool
def approve(action: str) -> str:
    """Ask a person to approve an action.

    Args:
        action: What to approve.
    """
    return f"{action}={interrupt({'question': f'approve {action}?'})}"


def _helper_reply(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
    last = messages[-1]
    if last.role == "tool":
        return f"done: {last.content}"
    text = last.content
    if text.startswith("approve "):
        return call("approve", {"action": text.removeprefix("approve ")})
    if text == "fail":
        raise ModelError("the model is down")
    return f"you said: {text}"


helper = ChatModelAgent(
    "helper", FunctionModel(_helper_reply), description="Echoes requests.", tools=[approve]
)
other = ChatModelAgent("other", FunctionModel(lambda messages, tools: "other here"))


def _adder_reply(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
    last = messages[-1]
    if last.role == "tool":
        return f"the sum is {last.content}"
    return call("add", {"a": 2, "b": 3})


adder = ChatModelAgent(
    "adder",
    FunctionModel(_adder_reply),
    tools=[MCPToolset(sys.executable, args=[str(SERVER)], tool_filter=["add"])],
)
