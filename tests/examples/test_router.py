"""The router example (the seed's multi-agent example) behaves as described."""

from __future__ import annotations

import json

import pytest

from plait import FunctionTool, Runner
from plait.core.context import Frame as Ctx  # plait's own context class
from plait.errors import InvalidToolArguments
from plait.examples.router import (
    QUERIES,
    UNSUPPORTED,
    build_router,
    calculator,
    get_weather,
    routes_only,
    scripted_models,
)
from plait.testing import ScriptedModel


def test_the_three_queries_reach_the_right_agent() -> None:
    router_model, weather_model, math_model = scripted_models()
    runner = Runner(build_router(router_model, weather_model, math_model))
    results = [runner.query_sync(q) for q in QUERIES]
    assert [r.final_output for r in results] == [
        "It is cloudy in Tokyo, 18°C.",
        "156 * 789 + 234 = 123318",
        "The capital of France is Paris.",
    ]
    answered_by = [r.events[-1].run_path for r in results]
    assert answered_by == [("Router", "WeatherAgent"), ("Router", "MathAgent"), ("Router",)]
    assert all(r.events[-1].action and r.events[-1].action.exit for r in results[:2])
    assert isinstance(weather_model, ScriptedModel)
    # the specialist saw the user's question and the router's transfer, rewritten
    first = [m.content for m in weather_model.requests[0].messages]
    assert first[1] == QUERIES[0]
    assert first[2].startswith("For context: [Router] called tool: `transfer_to_agent`")


async def test_the_calculator_refuses_anything_but_arithmetic() -> None:
    ctx = Ctx.root("MathAgent", [])
    assert await calculator.call('{"expression": "(1 + 2) * 4"}', ctx) == "12"
    assert await calculator.call('{"expression": "-3 * (2 + 1)"}', ctx) == "-9"
    with pytest.raises(ValueError, match="only numbers"):
        await calculator.call('{"expression": "2 ** 3"}', ctx)


async def test_the_calculator_reads_percentages() -> None:
    ctx = Ctx.root("MathAgent", [])
    assert await calculator.call('{"expression": "15% * 80"}', ctx) == "12.0"
    assert await calculator.call('{"expression": "8% 1250"}', ctx) == "100.0"  # 8% of 1250
    assert await calculator.call('{"expression": "50%"}', ctx) == "0.5"
    with pytest.raises(ValueError, match="only numbers"):
        await calculator.call('{"expression": "5 % 3"}', ctx)  # not a remainder


@pytest.mark.parametrize(
    ("tool_", "arguments", "problem"),
    [
        (calculator, '{"expression": "__import__(\\"os\\")"}', "should match pattern"),
        (calculator, '{"expression": "2 * 21 = 42"}', "should match pattern"),
        (calculator, json.dumps({"expression": "1 + " * 20 + "1"}), "at most 60"),
        (get_weather, '{"city": "Oslo; rm -rf"}', "should match pattern"),
        (get_weather, json.dumps({"city": "A" * 41}), "at most 40"),
    ],
)
async def test_the_tools_arguments_are_constrained_by_their_schema(
    tool_: FunctionTool, arguments: str, problem: str
) -> None:
    ctx = Ctx.root("Agent", [])
    with pytest.raises(InvalidToolArguments, match=problem):
        await tool_.call(arguments, ctx)
    properties = tool_.info().parameters["properties"]
    assert all("pattern" in spec and "maxLength" in spec for spec in properties.values())
    with pytest.raises(InvalidToolArguments, match="expression: Field required"):
        await calculator.call("{}", ctx)


@pytest.mark.parametrize("streaming", [False, True])
def test_routes_only_replaces_the_routers_own_answer_and_keeps_its_transfers(
    streaming: bool,
) -> None:
    router_model, weather_model, math_model = scripted_models()
    router = build_router(routes_only(router_model), weather_model, math_model)
    runner = Runner(router, enable_streaming=streaming)
    results = [runner.query_sync(q) for q in QUERIES]
    assert [r.final_output for r in results] == [
        "It is cloudy in Tokyo, 18°C.",
        "156 * 789 + 234 = 123318",
        UNSUPPORTED,
    ]
    assert results[2].events[-1].run_path == ("Router",)
