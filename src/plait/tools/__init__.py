"""Tools: the `Tool` protocol, `@tool` for functions, toolsets (an MCP server's tools), and
agents as tools."""

from plait.tools.base import Approval, Effect, Tool, ToolInfo, ToolResult, Toolset
from plait.tools.function import FunctionTool, tool
from plait.tools.mcp import MCPToolset

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
