"""The agent `plait eval` is tested on: it adds numbers when asked, echoes anything else."""

from __future__ import annotations

from plait import ChatModelAgent, Message, ToolInfo, tool
from plait.messages import Usage
from plait.testing import FunctionModel, call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def _answer(messages: list[Message], tools: list[ToolInfo]) -> Message:
    last = messages[-1]
    if last.role == "tool":
        return reply(f"{last.content}", usage=Usage(input_tokens=10, output_tokens=1))
    if last.content.startswith("add"):
        _, a, b = last.content.split()
        return call("add", {"a": int(a), "b": int(b)}, usage=Usage(input_tokens=8, output_tokens=3))
    return reply(f"echo {last.content}")


def calculator() -> ChatModelAgent:
    """Return the calculator agent (a factory: each load gets a fresh model)."""
    return ChatModelAgent("calculator", FunctionModel(_answer), tools=[add])
