"""A target for `plait run` whose tool needs approval (`payer`)."""

from __future__ import annotations

from plait import ChatModelAgent, Message, tool
from plait.testing import FunctionModel, call
from plait.tools import ToolInfo


@tool(effect="once", approval=True)
def pay(cents: int) -> str:
    """Pay."""
    return f"paid {cents}"


def _model(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
    if messages[-1].role == "tool":
        return f"result: {messages[-1].content}"
    return call("pay", {"cents": 250})


payer = ChatModelAgent("payer", FunctionModel(_model), tools=[pay])
