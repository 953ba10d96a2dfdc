"""The router example: a Router agent transfers each request to a specialist.

`WeatherAgent` answers weather questions with `get_weather`, `MathAgent` does arithmetic with
`calculator`, and the Router answers anything else itself. A model too small to answer
general questions can be wrapped in `routes_only`: when it does not transfer, the Router
says it can only help with weather and math instead of what the model would have said.

On the scripted model the replies are replayed from a script, but the tools, transfers,
history rewriting and events are real: the specialists' answers are built from what their
tools returned.

Run it: `python -m plait.examples.router` (or `plait demo`); serve it over HTTP with
`plait serve plait.examples.router:demo_team`.
"""

from __future__ import annotations

import ast
import json
import operator
import os
import re
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Annotated, Any

from pydantic import Field

from plait import ChatModelAgent, Message, ToolInfo, tool
from plait.models import ChatModel

__all__ = [
    "QUERIES",
    "UNSUPPORTED",
    "build_router",
    "calculator",
    "demo_team",
    "get_weather",
    "routes_only",
    "scripted_models",
]

QUERIES = (
    "What's the weather like in Tokyo?",
    "Calculate 156 * 789 + 234",
    "What's the capital of France?",
)
UNSUPPORTED = "I can only help with weather and math."

_WEATHER = {
    "tokyo": {"temperature": "18°C", "condition": "Cloudy"},
    "beijing": {"temperature": "22°C", "condition": "Sunny"},
    "paris": {"temperature": "15°C", "condition": "Light rain"},
}


# The tools declare what their arguments may be; a model that decodes under the schema
# (LocalModel) can then only write a city name and an arithmetic expression.
City = Annotated[str, Field(pattern=r"^[A-Za-zÀ-ÿ][A-Za-zÀ-ÿ .'-]*$", max_length=40)]
Expression = Annotated[str, Field(pattern=r"^[0-9+*/() .%-]+$", max_length=60)]
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)%(\s*(?=[0-9(]))?")


@tool
def get_weather(city: City) -> dict[str, str]:
    """Get current weather information for a city.

    Args:
        city: City name.
    """
    report = _WEATHER.get(city.strip().lower())
    if report is None:
        return {"city": city, "error": "no report for this city"}
    return {"city": city, **report}


_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        result: float | int = _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
        return result
    raise ValueError("only numbers, parentheses and + - * / are allowed")


def _fraction(match: re.Match[str]) -> str:
    """ "15%" as "(15/100)"; "15% 80" (a percentage of a number) as "(15/100) * 80"."""
    return f"({match[1]}/100)" + (" * " if match[2] is not None else "")


@tool
def calculator(expression: Expression) -> str:
    """Perform basic mathematical calculations.

    Args:
        expression: Mathematical expression to evaluate, e.g. "15 * 23"; a percentage is
            written with "%", e.g. "15% * 80" for 15% of 80.
    """
    return str(_evaluate(ast.parse(_PERCENT.sub(_fraction, expression), mode="eval")))


def build_router(
    router_model: ChatModel, weather_model: ChatModel, math_model: ChatModel
) -> ChatModelAgent:
    """Build the Router with its two specialists as sub-agents."""
    weather = ChatModelAgent(
        "WeatherAgent",
        weather_model,
        description="Provides weather information for any location",
        instruction="You are a weather specialist. Use the weather tool to provide accurate "
        "weather information.",
        tools=[get_weather],
        exit_tool=True,
    )
    math = ChatModelAgent(
        "MathAgent",
        math_model,
        description="Performs mathematical calculations and solves math problems",
        instruction="You are a math specialist. Use the calculator tool to solve mathematical "
        "problems accurately.",
        tools=[calculator],
        exit_tool=True,
    )
    return ChatModelAgent(
        "Router",
        router_model,
        description="Routes tasks to appropriate specialist agents",
        instruction="You are a router agent. Based on the user's request, decide which "
        "specialist agent should handle it:\n- For weather questions, transfer to WeatherAgent\n"
        "- For math calculations, transfer to MathAgent\n- For general questions, handle "
        "yourself\nUse the transfer_to_agent tool to route tasks.",
        sub_agents=[weather, math],
    )


def demo_team() -> ChatModelAgent:
    """Return the Router and its specialists on the model `plait demo` uses: the spec in
    `PLAIT_MODEL` (such as "openai:gpt-4o-mini"), else the embedded local model, whose
    Router only routes (`routes_only`).

    It takes no arguments, so the command line can run and serve it:
    `plait serve plait.examples.router:demo_team`.

    Raises:
        UsageError: The model cannot be made (the local model needs `pip install
            "plait[local]"`; a provider needs its API key).
    """
    spec = (os.environ.get("PLAIT_MODEL") or "local").strip()
    if spec.lower() == "local":
        from plait.models.local import LocalModel

        local = LocalModel()
        return build_router(routes_only(local), local, local)
    from plait.models import infer

    model = infer(spec)
    return build_router(model, model, model)


class _RoutesOnly:
    """A model whose replies are kept only when they call a tool; an answer is replaced."""

    def __init__(self, model: ChatModel, reply: str) -> None:
        self.model = model
        self.reply = reply

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        message = await self.model.generate(messages, tools=tools, **options)
        return message if message.tool_calls else self._answer(message)

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        chunks = self.model.stream(messages, tools=tools, **options)
        try:
            async for chunk in chunks:
                if not chunk.tool_calls:  # the start of an answer: stop it here
                    break
                yield chunk
            else:
                return
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()
        yield self._answer(chunk)

    def _answer(self, message: Message) -> Message:
        return Message(role="assistant", content=self.reply, usage=message.usage)


def routes_only(model: ChatModel, reply: str = UNSUPPORTED) -> ChatModel:
    """Wrap a router's model so that its own answers are replaced by `reply`.

    Its transfers are kept: the model still decides whether a request is for a specialist.
    A streamed step is taken for an answer at its first chunk without tool calls (a tool
    call streams as one chunk, as `LocalModel` and `ScriptedModel` do), and stopped there.
    """
    return _RoutesOnly(model, reply)


def _call(name: str, args: dict[str, Any], call_id: str) -> Message:
    from plait import ToolCall

    return Message.assistant(
        "", (ToolCall(id=call_id, name=name, arguments=json.dumps(args, ensure_ascii=False)),)
    )


def _exit_with(render: Callable[[str], str]) -> Callable[[list[Message], list[ToolInfo]], Message]:
    """A scripted step that answers from the last tool result in the conversation."""

    def step(messages: list[Message], tools: list[ToolInfo]) -> Message:
        result = next(m.content for m in reversed(messages) if m.role == "tool")
        return _call("exit", {"final_result": render(result)}, "exit_1")

    return step


def _weather_sentence(result: str) -> str:
    data = json.loads(result)
    return f"It is {data['condition'].lower()} in {data['city']}, {data['temperature']}."


def scripted_models() -> tuple[ChatModel, ChatModel, ChatModel]:
    """Return scripted router, weather and math models covering the three `QUERIES`."""
    from plait.testing import ScriptedModel, reply

    router = ScriptedModel(
        [
            _call("transfer_to_agent", {"agent_name": "WeatherAgent"}, "route_1"),
            _call("transfer_to_agent", {"agent_name": "MathAgent"}, "route_2"),
            reply("The capital of France is Paris."),
        ]
    )
    weather = ScriptedModel(
        [_call("get_weather", {"city": "Tokyo"}, "weather_1"), _exit_with(_weather_sentence)]
    )
    math = ScriptedModel(
        [
            _call("calculator", {"expression": "156 * 789 + 234"}, "calc_1"),
            _exit_with(lambda r: f"156 * 789 + 234 = {r}"),
        ]
    )
    return router, weather, math
