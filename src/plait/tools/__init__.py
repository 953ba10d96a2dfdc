"""Tools: the `Tool` protocol, `@tool` for functions, and agents as tools."""

from plait.tools.base import Tool, ToolInfo, ToolResult
from plait.tools.function import FunctionTool, tool

__all__ = ["FunctionTool", "Tool", "ToolInfo", "ToolResult", "tool"]
