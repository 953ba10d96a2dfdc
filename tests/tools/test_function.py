"""@tool: schemas from hints and docstrings, validation, injection, threads, result encoding."""

from __future__ import annotations

import asyncio
import datetime
import json
import math
import threading
from typing import Literal

import pytest
from pydantic import BaseModel

from plait import RunContext, ToolResult, run_context, tool
from plait.core.context import Frame as Ctx  # plait's own context class
from plait.errors import InvalidToolArguments, UsageError
from plait.tools import FunctionTool, Tool, ToolInfo


class Address(BaseModel):
    street: str
    zip_code: str


@tool
def ship(item: str, address: Address, ctx: RunContext, express: bool = False) -> dict[str, str]:
    """Ship an item to an address.

    Ships from the nearest warehouse.

    Args:
        item: What to ship.
        address: Where to ship it.
        express: Whether to pay for next-day delivery.
    """
    return {"item": item, "to": address.street, "by": ctx.agent_name}


def test_schema_comes_from_hints_and_google_docstring() -> None:
    info = ship.info()
    assert isinstance(ship, Tool)
    assert info.name == "ship"
    assert info.description == "Ship an item to an address.\n\nShips from the nearest warehouse."
    params = info.parameters
    assert params["type"] == "object"
    assert params["required"] == ["item", "address"]
    assert set(params["properties"]) == {"item", "address", "express"}  # ctx hidden
    assert params["properties"]["item"] == {"type": "string", "description": "What to ship."}
    assert params["properties"]["express"]["default"] is False
    assert params["properties"]["express"]["description"] == (
        "Whether to pay for next-day delivery."
    )
    assert "Address" in params["$defs"]
    assert params["additionalProperties"] is False


def test_literal_and_optional_types_become_json_schema() -> None:
    @tool
    def pick(color: Literal["red", "blue"], note: str | None = None) -> str:
        """Pick."""
        return color

    props = pick.info().parameters["properties"]
    assert props["color"] == {"enum": ["red", "blue"], "type": "string"}
    assert {"type": "null"} in props["note"]["anyOf"]


async def test_call_validates_injects_context_and_encodes_non_strings() -> None:
    ctx = Ctx.root("shipper", [])
    out = await ship.call('{"item": "book", "address": {"street": "Main", "zip_code": "1"}}', ctx)
    assert out == '{"item":"book","to":"Main","by":"shipper"}'


async def test_invalid_arguments_raise_a_typed_error_naming_the_problem() -> None:
    ctx = Ctx.root("a", []).for_tool("ship", "c1")
    with pytest.raises(InvalidToolArguments) as info:
        await ship.call('{"item": 3, "address": {"street": "x"}}', ctx)
    err = info.value
    assert (err.tool_name, err.call_id, err.agent_name) == ("ship", "c1", "a")
    assert "item: Input should be a valid string (got 3)" in str(err)
    assert "address.zip_code: Field required" in str(err)
    with pytest.raises(InvalidToolArguments, match="not valid JSON"):
        await ship.call("{nope", ctx)
    with pytest.raises(InvalidToolArguments, match="must be a JSON object"):
        await ship.call("[1, 2]", ctx)


async def test_empty_arguments_mean_no_arguments() -> None:
    @tool
    async def ping() -> str:
        """Ping."""
        return "pong"

    assert await ping.call("", Ctx.root("a", [])) == "pong"


async def test_sync_tools_run_in_a_worker_thread_with_the_run_context() -> None:
    seen: dict[str, object] = {}

    @tool
    def where() -> str:
        """Report the thread."""
        seen["thread"] = threading.current_thread()
        seen["agent"] = run_context().agent_name
        return "ok"

    from plait import ChatModelAgent, Runner
    from plait.testing import ScriptedModel, call, reply

    agent = ChatModelAgent("W", ScriptedModel([call("where", {}), reply("done")]), tools=[where])
    result = await Runner(agent).query("q").collect()
    assert result.final_output == "done"
    assert seen["thread"] is not threading.main_thread()
    assert seen["agent"] == "W"


async def test_tool_result_passes_through() -> None:
    @tool
    async def done() -> ToolResult:
        """Done."""
        return ToolResult(content="x")

    assert await done.call("{}", Ctx.root("a", [])) == ToolResult(content="x")


def test_decorator_options_and_direct_calls() -> None:
    @tool(name="renamed", description="Custom description.")
    def original(n: int) -> int:
        return n + 1

    assert isinstance(original, FunctionTool)
    assert original.info().name == "renamed"
    assert original.info().description == "Custom description."
    assert original(1) == 2


def test_unsupported_signatures_are_usage_errors() -> None:
    def star(*args: int) -> int:
        return 0

    with pytest.raises(UsageError, match="named parameter"):
        tool(star)


def test_tool_info_round_trips() -> None:
    info = ship.info()
    assert ToolInfo.from_json(info.to_json()) == info


async def test_contextvar_is_reset_after_a_tool_call() -> None:
    from plait.errors import UsageError as Usage

    await asyncio.sleep(0)
    with pytest.raises(Usage):
        run_context()


# --- what the model sends and is told -----------------------------------------------------------


@tool
def typed(count: int, ratio: float = 0.0, label: str = "", flag: bool = False) -> str:
    """Take one argument of each JSON type.

    Args:
        count: An integer.
        ratio: A number.
        label: A string.
        flag: A boolean.
    """
    return f"{count!r} {ratio!r} {label!r} {flag!r}"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"count": "2"}', "count: Input should be a valid integer (got '2')"),
        ('{"count": true}', "count: Input should be a valid integer (got True)"),
        ('{"count": 2.0}', "count: Input should be a valid integer (got 2.0)"),
        ('{"count": 1, "ratio": "0.5"}', "ratio: Input should be a valid number (got '0.5')"),
        ('{"count": 1, "label": 5}', "label: Input should be a valid string (got 5)"),
        ('{"count": 1, "flag": 1}', "flag: Input should be a valid boolean (got 1)"),
        ('{"count": 1, "flag": "true"}', "flag: Input should be a valid boolean (got 'true')"),
    ],
)
async def test_arguments_must_have_the_json_types_the_schema_advertises(
    arguments: str, problem: str
) -> None:
    props = typed.info().parameters["properties"]
    assert [props[p]["type"] for p in props] == ["integer", "number", "string", "boolean"]
    ctx = Ctx.root("a", []).for_tool("typed", "c1")
    with pytest.raises(InvalidToolArguments) as info:
        await typed.call(arguments, ctx)
    assert str(info.value) == f"invalid arguments for tool 'typed': {problem}"


async def test_json_values_of_the_advertised_types_are_accepted() -> None:
    ctx = Ctx.root("a", [])
    out = await typed.call('{"count": 2, "ratio": 1, "label": "x", "flag": true}', ctx)
    assert out == "2 1.0 'x' True"  # a JSON integer is a JSON number too

    @tool
    def when(at: datetime.date, tags: tuple[str, ...] = ()) -> str:
        """Formats and arrays come as JSON strings and arrays."""
        return f"{at.isoformat()} {tags}"

    assert await when.call('{"at": "2024-05-01", "tags": ["a"]}', ctx) == "2024-05-01 ('a',)"


def test_a_mistyped_argument_is_told_to_the_model_or_raised() -> None:
    from plait import ChatModelAgent, Runner
    from plait.testing import ScriptedModel, call, reply

    model = ScriptedModel([call("typed", {"count": "2"}), reply("fixed")])
    result = Runner(ChatModelAgent("A", model, tools=[typed])).query_sync("q")
    told = result.events[1].message.message.content  # type: ignore[union-attr]
    assert told == (
        "Error: invalid arguments for tool 'typed': count: Input should be a valid integer"
        " (got '2')"
    )
    assert result.final_output == "fixed"
    strict = ScriptedModel([call("typed", {"count": True})])
    agent = ChatModelAgent("A", strict, tools=[typed], tool_errors="raise")
    fatal = Runner(agent).query_sync("q")
    assert isinstance(fatal.error, InvalidToolArguments) and fatal.error.tool_name == "typed"


async def test_an_error_quotes_at_most_200_characters_of_a_bad_value() -> None:
    ctx = Ctx.root("a", [])
    huge = "x" * 10_485_760
    with pytest.raises(InvalidToolArguments) as info:
        await typed.call(f'{{"count": "{huge}"}}', ctx)
    text = str(info.value)
    assert len(text) < 400
    assert f"(got '{'x' * 200}'…(10,485,760 characters))" in text
    key = "k" * 1_000_000
    with pytest.raises(InvalidToolArguments) as info:
        await typed.call(f'{{"count": 1, "{key}": 1}}', ctx)
    assert len(str(info.value)) < 400
    assert "…(1,000,000 characters): Extra inputs are not permitted" in str(info.value)


async def test_an_error_lists_at_most_ten_problems() -> None:
    @tool
    def total(numbers: list[int]) -> int:
        """Add up."""
        return sum(numbers)

    with pytest.raises(InvalidToolArguments) as info:
        await total.call('{"numbers": [' + ",".join(['"1"'] * 1000) + "]}", Ctx.root("a", []))
    text = str(info.value)
    assert text.count("Input should be a valid integer") == 10
    assert text.endswith("; and 990 more problems")


async def test_nan_and_infinity_in_a_result_are_encoded_as_strings() -> None:
    @tool
    def measure() -> dict[str, object]:
        """Measure."""
        return {"mean": math.nan, "max": math.inf, "min": -math.inf, "rows": [1.5, math.nan]}

    out = await measure.call("{}", Ctx.root("a", []))
    assert out == '{"mean":"NaN","max":"Infinity","min":"-Infinity","rows":[1.5,"NaN"]}'
    assert json.loads(out, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (42, "42"),
        (-(10**18) + 1, "-999999999999999999"),
        (10**30, "1" + "0" * 30),
        (10**5000, "1" + "0" * 5000),  # past Python's limit for `str` of an int
        (True, "true"),
        (2.5, "2.5"),
    ],
    ids=["small", "short negative", "long", "longer than str allows", "bool", "float"],
)
async def test_a_number_result_is_its_json_text(value: object, text: str) -> None:
    @tool
    async def give() -> object:
        """Give the value."""
        return value

    out = await give.call("{}", Ctx.root("a", []))
    assert out == text
