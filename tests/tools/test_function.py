"""@tool: schemas from hints and docstrings, validation, injection, threads, result encoding."""

from __future__ import annotations

import asyncio
import threading
from typing import Literal

import pytest
from pydantic import BaseModel

from plait import RunContext, ToolResult, run_context, tool
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
    ctx = RunContext.root("shipper", [])
    out = await ship.call('{"item": "book", "address": {"street": "Main", "zip_code": "1"}}', ctx)
    assert out == '{"item":"book","to":"Main","by":"shipper"}'


async def test_invalid_arguments_raise_a_typed_error_naming_the_problem() -> None:
    ctx = RunContext.root("a", []).for_tool("ship", "c1")
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

    assert await ping.call("", RunContext.root("a", [])) == "pong"


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

    assert await done.call("{}", RunContext.root("a", [])) == ToolResult(content="x")


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
