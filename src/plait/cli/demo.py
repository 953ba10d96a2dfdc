"""The demo: a ReAct agent with a weather tool and a calculator, on a scripted model.

No model is called: the model's replies are replayed from a script, so the demo runs offline
and gives the same answer every time. The agent, the tools, the ReAct loop, the events and
the runner are the real ones.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from rich.console import Console

from plait import AgentEvent, ChatModelAgent, Runner, tool
from plait.testing import ScriptedModel, call, reply

__all__ = ["QUERIES", "build_agent", "run_demo"]

QUERIES = (
    "What's the weather in Beijing?",
    "What is 15 * 7 + 3?",
    "Tell me a joke.",
)

_WEATHER = {"beijing": "sunny, 22°C", "shanghai": "light rain, 18°C", "london": "cloudy, 12°C"}


@tool
def get_weather(city: str) -> str:
    """Look up today's weather in a city.

    Args:
        city: The name of the city, e.g. "Beijing".
    """
    return _WEATHER.get(city.strip().lower(), f"no weather report for {city}")


_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right)))
    raise ValueError("only numbers and + - * / are allowed")


@tool
def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression with + - * / and parentheses.

    Args:
        expression: The expression, e.g. "15 * 7 + 3".
    """
    return _evaluate(ast.parse(expression, mode="eval"))


def _script() -> ScriptedModel:
    return ScriptedModel(
        [
            call("get_weather", {"city": "Beijing"}),
            reply("It is sunny in Beijing today, 22°C."),
            call("calculate", {"expression": "15 * 7 + 3"}),
            reply("15 * 7 + 3 = 108."),
            reply("Why did the agent cross the road? To call the tool on the other side."),
        ]
    )


def build_agent() -> ChatModelAgent:
    """Build the demo agent on its scripted model."""
    return ChatModelAgent(
        "assistant",
        _script(),
        description="Answers questions about the weather and arithmetic.",
        instruction="You are a helpful assistant. Use the tools for weather and arithmetic.",
        tools=[get_weather, calculate],
    )


async def _show(console: Console, event: AgentEvent) -> None:
    if event.error is not None:
        console.print(f"  [red]error[/red] {type(event.error).__name__}: {event.error}")
        return
    variant = event.message
    if variant is None:
        return
    message = await variant.get_message()
    who = "/".join(event.run_path)
    if message.role == "tool":
        console.print(
            f"  [dim]{who}[/dim] tool [cyan]{variant.tool_name}[/cyan] → {message.content}"
        )
    for tc in message.tool_calls:
        console.print(f"  [dim]{who}[/dim] calls [cyan]{tc.name}[/cyan]({tc.arguments})")
    if message.role == "assistant" and message.content:
        console.print(f"  [dim]{who}[/dim] [bold]{message.content}[/bold]")


def run_demo(*, streaming: bool = False, console: Console | None = None) -> int:
    """Run the demo's queries and print each event; return the exit code."""
    import asyncio

    console = console or Console()
    console.print(
        "[yellow]plait demo — scripted model:[/yellow] the model's replies are replayed from a "
        "script (no model is called); the agent, tools, ReAct loop and runner are real."
    )
    runner = Runner(build_agent(), enable_streaming=streaming)

    async def main() -> int:
        failures = 0
        for query in QUERIES:
            console.print(f"\n[green]user[/green] {query}")
            stream = runner.query(query)
            async for event in stream:
                await _show(console, event)
            result = await stream.collect()
            failures += result.error is not None
        return 1 if failures else 0

    return asyncio.run(main())
