"""Tools: the `Tool` protocol, `@tool` for functions, toolsets (an MCP server's tools), and
agents as tools. `MCPToolset`, the MCP client (`plait.protocols.mcp_client`), is loaded on
first use."""

from typing import TYPE_CHECKING, Any

from plait.tools.base import Approval, Effect, Tool, ToolInfo, ToolResult, Toolset
from plait.tools.function import FunctionTool, tool

if TYPE_CHECKING:
    from plait.protocols.mcp_client import MCPToolset

__all__ = [
    "Approval",
    "Effect",
    "FunctionTool",
    "MCPToolset",
    "Tool",
    "ToolInfo",
    "ToolResult",
    "Toolset",
    "tool",
]


def __getattr__(name: str) -> Any:
    if name == "MCPToolset":
        from plait.protocols.mcp_client import MCPToolset

        return MCPToolset
    raise AttributeError(f"module 'plait.tools' has no attribute {name!r}")
