"""`response_format` (and a response's `text.format`), driven by the official `openai`
client's `parse()` and `stream()` helpers: a JSON schema runs the agent with that structured
output, streamed or not; what plait cannot honour is a `400`, and no run starts."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from pydantic import BaseModel

from plait import ChatModelAgent, Message, Team
from plait.models.base import OutputSchema
from plait.testing import FunctionModel, ScriptedModel, call, reply
from plait.tools.base import ToolInfo
from tests.protocols.openai_support import OpenAIFor, serve

QUESTION = [{"role": "user", "content": "Weather in Oslo?"}]


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    degrees: int


class Forecast(BaseModel):
    """Days of weather."""

    days: list[Weather]


OSLO = '{"city": "Oslo", "degrees": 4}'


def _forecaster(messages: list[Message], tools: list[ToolInfo]) -> Message:
    """Answer with JSON, by the `final_result` tool when the agent offers it."""
    if any(t.name == "final_result" for t in tools):
        return call("final_result", {"city": "Oslo", "degrees": 4})
    return reply(OSLO)


def _agent(*, schema_support: bool = True) -> tuple[FunctionModel, ChatModelAgent]:
    model = FunctionModel(_forecaster, supports_output_schema=schema_support)
    return model, ChatModelAgent("desk", model, description="Forecasts.")


@pytest.mark.parametrize("schema_support", [True, False])
async def test_parse_gets_the_answer_in_the_schema(
    openai_for: OpenAIFor, schema_support: bool
) -> None:
    model, agent = _agent(schema_support=schema_support)
    with serve(agent) as url:
        completion = await openai_for(url).chat.completions.parse(
            model="desk", messages=QUESTION, response_format=Weather
        )
    assert completion.choices[0].message.parsed == Weather(city="Oslo", degrees=4)
    options = model.requests[0].options
    if schema_support:  # the model is given the schema as it was sent
        schema: OutputSchema = options["output_schema"]
        assert schema.name == "Weather" and schema.strict
        assert set(schema.schema["properties"]) == {"city", "degrees"}
    else:  # the model answers by a tool whose parameters are the schema
        assert "output_schema" not in options
        assert [t.name for t in model.requests[0].tools] == ["final_result"]


async def test_an_answer_that_does_not_fit_is_told_to_the_model_and_retried(
    openai_for: OpenAIFor,
) -> None:
    model = ScriptedModel(['{"city": "Oslo"}', OSLO], supports_output_schema=True)
    agent = ChatModelAgent("desk", model, description="Forecasts.")
    with serve(agent) as url:
        completion = await openai_for(url).chat.completions.parse(
            model="desk", messages=QUESTION, response_format=Weather
        )
    assert completion.choices[0].message.parsed == Weather(city="Oslo", degrees=4)
    told = model.requests[1].messages[-1].content
    assert "'degrees' is a required property" in told


async def test_nested_definitions_are_served(openai_for: OpenAIFor) -> None:
    two_days = '{"days": [{"city": "Oslo", "degrees": 4}, {"city": "Oslo", "degrees": 6}]}'
    model = ScriptedModel([two_days], supports_output_schema=True)
    agent = ChatModelAgent("desk", model, description="Forecasts.")
    with serve(agent) as url:
        completion = await openai_for(url).chat.completions.parse(
            model="desk", messages=QUESTION, response_format=Forecast
        )
    parsed = completion.choices[0].message.parsed
    assert parsed is not None and [day.degrees for day in parsed.days] == [4, 6]
    sent = model.requests[0].options["output_schema"].schema
    assert "$ref" not in str(sent)  # the definitions are written out for the model


async def test_responses_parse_and_both_streams_give_the_answer_in_the_schema(
    openai_for: OpenAIFor,
) -> None:
    _, agent = _agent()
    with serve(agent) as url:
        openai_client = openai_for(url)
        response = await openai_client.responses.parse(
            model="desk", input="Weather in Oslo?", text_format=Weather
        )
        async with openai_client.responses.stream(
            model="desk", input="Weather in Oslo?", text_format=Weather
        ) as events:
            streamed = await events.get_final_response()
        async with openai_client.chat.completions.stream(
            model="desk", messages=QUESTION, response_format=Weather
        ) as chunks:
            contents = [
                event.delta
                async for event in chunks
                if event.type == "content.delta" and event.delta
            ]
            chatted = await chunks.get_final_completion()
    oslo = Weather(city="Oslo", degrees=4)
    assert response.output_parsed == oslo
    assert streamed.output_parsed == oslo
    assert chatted.choices[0].message.parsed == oslo
    assert len(contents) == 1  # the answer goes out once it is valid, not as it is written


async def test_json_object_asks_for_any_json_object(openai_for: OpenAIFor) -> None:
    model = ScriptedModel(["not json", '{"any": ["thing"]}'], supports_output_schema=True)
    agent = ChatModelAgent("desk", model, description="Forecasts.")
    with serve(agent) as url:
        completion = await openai_for(url).chat.completions.create(
            model="desk", messages=QUESTION, response_format={"type": "json_object"}
        )
    assert completion.choices[0].message.content == '{"any": ["thing"]}'
    assert model.requests[0].options["output_schema"].schema == {"type": "object"}


RECURSIVE = {
    "type": "object",
    "properties": {"child": {"$ref": "#"}},
}
SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "Tree", "schema": RECURSIVE}}


@pytest.mark.parametrize(
    ("response_format", "found"),
    [
        ({"type": "grammar", "grammar": "x"}, "not 'grammar'"),
        ({"type": "json_schema"}, "json_schema object"),
        (
            {"type": "json_schema", "json_schema": {"name": "A", "schema": {"type": "array"}}},
            '"type": "object"',
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "A", "schema": {"type": 5}}},
            "not a valid JSON schema",
        ),
        (SCHEMA_FORMAT, "recursive"),
        (
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "List",
                    "schema": {
                        "type": "object",
                        "properties": {"next": {"$ref": "#/$defs/Node"}},
                        "$defs": {
                            "Node": {
                                "type": "object",
                                "properties": {"next": {"$ref": "#/$defs/Node"}},
                            }
                        },
                    },
                },
            },
            "recursive",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "bad name!", "schema": {}}},
            "name",
        ),
        ("json", "response_format"),
    ],
)
async def test_a_format_that_cannot_be_honoured_is_a_400(
    openai_for: OpenAIFor, response_format: Any, found: str
) -> None:
    model, agent = _agent()
    with serve(agent) as url, pytest.raises(openai.BadRequestError) as refused:
        await openai_for(url).chat.completions.create(
            model="desk", messages=QUESTION, response_format=response_format
        )
    assert found in refused.value.message
    assert refused.value.type == "invalid_request_error"
    assert model.requests == []


async def test_an_agent_that_cannot_give_a_structured_answer_is_a_400(
    openai_for: OpenAIFor,
) -> None:
    model, lead = _agent()
    helper = ChatModelAgent("helper", ScriptedModel([]), description="Helps.")
    team = Team.coordinator(lead, [helper], name="team")
    billing = ChatModelAgent("billing", ScriptedModel([]), description="Bills.")
    desk = ChatModelAgent("front", ScriptedModel([]), description="Routes.", sub_agents=[billing])
    with serve(team, desk) as url:
        chat, responses = openai_for(url).chat.completions, openai_for(url).responses
        with pytest.raises(openai.BadRequestError) as not_chat:
            await chat.parse(model="team", messages=QUESTION, response_format=Weather)
        with pytest.raises(openai.BadRequestError) as transfers:
            await responses.parse(model="front", input="Hi", text_format=Weather)
    assert "not a ChatModelAgent" in not_chat.value.message
    assert not_chat.value.code == "unsupported_response_format"
    assert not_chat.value.param == "response_format"
    assert "can transfer" in transfers.value.message
    assert transfers.value.param == "text.format"
    assert model.requests == []
