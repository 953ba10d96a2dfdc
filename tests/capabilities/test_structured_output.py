"""Structured output: `ChatModelAgent(output_type=T)` makes the run's `final_output` a validated
`T`, through the model's own schema support or a `final_result` tool, telling the model what
is wrong with an invalid answer up to `output_retries` times."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from typing_extensions import TypedDict

from plait import (
    AgentContext,
    AgentEvent,
    AgentTool,
    ChatModelAgent,
    GuardrailResult,
    Hooks,
    Message,
    ModelRequest,
    RunContext,
    Runner,
    RunOption,
    SequentialAgent,
    interrupt,
    tool,
)
from plait.errors import GuardrailTripped, OutputValidationError, UsageError
from plait.models import OutputSchema, supports_output_schema
from plait.stores import MemoryStore
from plait.testing import FunctionModel, ScriptedModel, call, calls, reply
from plait.tools import ToolInfo
from tests.models.scripted_server import Scripted, ScriptedServer, serving

ROOT = Path(__file__).resolve().parents[2]


class City(pydantic.BaseModel):
    """A city and its population."""

    name: str
    population: int


@dataclasses.dataclass
class CityData:
    name: str
    population: int


class CityDict(TypedDict):
    name: str
    population: int


PARIS = {"name": "Paris", "population": 2100000}
PARIS_JSON = json.dumps(PARIS)


def _expected(output_type: Any) -> Any:
    if output_type is City:
        return City(**PARIS)
    if output_type is CityData:
        return CityData(**PARIS)
    return dict(PARIS)


@pytest.fixture(params=[False, True], ids=["generate", "stream"])
def streaming(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"{city}: 2100000 people"


@tool
def approve(item: str) -> str:
    """Ask a person to approve.

    Args:
        item: What to approve.
    """
    return f"{item}: {interrupt({'approve': item})}"


def _final(args: dict[str, Any] | str) -> Message:
    return call("final_result", args)


# --- the response-format path (the model takes the schema) ------------------------------------


@pytest.mark.parametrize("output_type", [City, CityData, CityDict])
def test_a_model_with_schema_support_is_sent_the_schema_and_its_answer_is_the_typed_object(
    output_type: Any, streaming: bool
) -> None:
    model = ScriptedModel(
        [call("lookup", {"city": "Paris"}), reply(PARIS_JSON)], supports_output_schema=True
    )
    agent = ChatModelAgent("geo", model, tools=[lookup], output_type=output_type)
    result = Runner(agent, enable_streaming=streaming).query_sync("Paris?")
    assert result.error is None
    assert result.final_output == _expected(output_type)
    assert type(result.final_output) is type(_expected(output_type))
    schema = model.requests[0].options["output_schema"]
    assert isinstance(schema, OutputSchema)
    assert schema.schema["properties"].keys() == {"name", "population"}
    assert schema.name == output_type.__name__
    assert [t.name for t in model.requests[0].tools] == ["lookup"]  # no final_result tool
    # the answer's message event carries the JSON text; the last event the typed object
    texts = [e for e in result.events if e.message is not None and e.message.role == "assistant"]
    last_text = texts[-1].message
    assert last_text is not None
    if last_text.message is not None:
        assert last_text.message.content == PARIS_JSON
    assert result.events[-1].output is not None
    assert result.events[-1].output.custom == _expected(output_type)


def test_the_schema_reaches_before_model_hooks_as_a_request_option() -> None:
    seen: list[Any] = []

    class Look(Hooks):
        async def before_model(self, ctx: RunContext, request: ModelRequest) -> None:
            seen.append(request.options.get("output_schema"))

    model = ScriptedModel([reply(PARIS_JSON)], supports_output_schema=True)
    agent = ChatModelAgent("geo", model, output_type=City, hooks=[Look()])
    assert Runner(agent).query_sync("Paris?").final_output == City(**PARIS)
    assert isinstance(seen[0], OutputSchema) and seen[0].description == City.__doc__


def test_an_invalid_answer_is_told_to_the_model_with_the_errors_and_asked_again(
    streaming: bool,
) -> None:
    model = ScriptedModel(
        [
            reply("Paris has about two million people."),
            reply('{"name": "Paris"}'),
            reply(PARIS_JSON),
        ],
        supports_output_schema=True,
    )
    agent = ChatModelAgent("geo", model, output_type=City)
    result = Runner(agent, enable_streaming=streaming).query_sync("Paris?")
    assert result.error is None
    assert result.final_output == City(**PARIS)
    second, third = model.requests[1].messages, model.requests[2].messages
    assert second[-2].content == "Paris has about two million people."
    assert second[-1].role == "user" and "not valid JSON" in second[-1].content
    assert third[-1].role == "user"
    assert "population: Field required" in third[-1].content


def test_an_answer_still_invalid_after_the_retries_ends_the_run_with_output_validation_error(
    streaming: bool,
) -> None:
    model = ScriptedModel(
        [reply('{"name": 1}'), reply('{"name": 2}'), reply('{"name": "Paris", "population": "x"}')],
        supports_output_schema=True,
    )
    agent = ChatModelAgent("geo", model, output_type=City, output_retries=2)
    result = Runner(agent, enable_streaming=streaming).query_sync("Paris?")
    error = result.error
    assert isinstance(error, OutputValidationError)
    assert error.agent_name == "geo"
    assert error.output == '{"name": "Paris", "population": "x"}'
    assert [e["loc"] for e in error.errors] == [["population"]]
    assert "after 2 retries" in str(error) and "population" in str(error)
    assert result.final_output is None
    assert model.remaining == 0
    with pytest.raises(OutputValidationError):
        result.raise_for_error()


def test_an_after_model_hook_sees_the_reply_before_it_is_validated() -> None:
    class Repair(Hooks):
        async def after_model(
            self, ctx: RunContext, request: ModelRequest, reply: Message
        ) -> Message | None:
            return Message.assistant(reply.content.removeprefix("Answer: "))

    model = ScriptedModel([reply(f"Answer: {PARIS_JSON}")], supports_output_schema=True)
    agent = ChatModelAgent("geo", model, output_type=City, hooks=[Repair()])
    assert Runner(agent).query_sync("Paris?").final_output == City(**PARIS)


def test_a_run_that_pauses_before_its_answer_is_validated_after_resume(streaming: bool) -> None:
    model = ScriptedModel(
        [call("approve", {"item": "x"}), reply("not json"), reply(PARIS_JSON)],
        supports_output_schema=True,
    )
    agent = ChatModelAgent("geo", model, tools=[approve], output_type=City)
    runner = Runner(agent, enable_streaming=streaming)
    paused = runner.query_sync("Paris?")
    assert paused.checkpoint_id is not None and paused.final_output is None
    done = runner.resume_sync(paused.checkpoint_id, value="yes")
    assert done.error is None
    assert done.final_output == City(**PARIS)
    assert isinstance(model.requests[-1].options["output_schema"], OutputSchema)


def test_output_retries_zero_fails_at_the_first_invalid_answer() -> None:
    model = ScriptedModel([reply("no"), reply(PARIS_JSON)], supports_output_schema=True)
    agent = ChatModelAgent("geo", model, output_type=City, output_retries=0)
    result = Runner(agent).query_sync("Paris?")
    assert isinstance(result.error, OutputValidationError)
    assert result.error.errors[0]["type"] == "json_invalid"
    assert model.remaining == 1


def test_a_json_answer_in_a_code_fence_is_accepted() -> None:
    model = ScriptedModel([reply(f"```json\n{PARIS_JSON}\n```")], supports_output_schema=True)
    result = Runner(ChatModelAgent("geo", model, output_type=City)).query_sync("Paris?")
    assert result.final_output == City(**PARIS)


# --- the final_result tool path (the model does not take a schema) ----------------------------


@pytest.mark.parametrize("output_type", [City, CityData, CityDict])
def test_a_model_without_schema_support_answers_by_calling_final_result(
    output_type: Any, streaming: bool
) -> None:
    model = ScriptedModel([call("lookup", {"city": "Paris"}), _final(PARIS)])
    agent = ChatModelAgent("geo", model, tools=[lookup], output_type=output_type)
    result = Runner(agent, enable_streaming=streaming).query_sync("Paris?")
    assert result.error is None
    assert result.final_output == _expected(output_type)
    request = model.requests[0]
    assert "output_schema" not in request.options  # never passed to a model without support
    final_tool = request.tools[-1]
    assert final_tool.name == "final_result"
    assert final_tool.parameters["properties"].keys() == {"name", "population"}
    assert len(model.requests) == 2  # the call ends the run
    tool_events = [e for e in result.events if e.message is not None and e.message.role == "tool"]
    final_event = tool_events[-1].message
    assert final_event is not None and final_event.message is not None
    assert json.loads(final_event.message.content) == PARIS
    assert result.events[-1].output is not None
    assert result.events[-1].output.custom == _expected(output_type)


def test_an_invalid_final_result_is_told_as_its_tool_result_and_the_model_tries_again(
    streaming: bool,
) -> None:
    model = ScriptedModel([_final({"name": "Paris"}), _final(PARIS)])
    agent = ChatModelAgent("geo", model, output_type=City)
    result = Runner(agent, enable_streaming=streaming).query_sync("Paris?")
    assert result.final_output == City(**PARIS)
    told = model.requests[1].messages[-1]
    assert told.role == "tool" and told.content.startswith("Error:")
    assert "population: Field required" in told.content
    assert "final_result" in told.content


def test_final_result_failures_past_the_retries_end_the_run(streaming: bool) -> None:
    model = ScriptedModel([_final({"name": "Paris"}), _final("{not json")])
    agent = ChatModelAgent("geo", model, output_type=City, output_retries=1)
    result = Runner(agent, enable_streaming=streaming).query_sync("Paris?")
    assert isinstance(result.error, OutputValidationError)
    assert result.error.output == "{not json"
    assert result.error.errors[0]["type"] == "json_invalid"


def test_a_text_answer_without_final_result_is_accepted_when_valid_else_retried() -> None:
    model = ScriptedModel([reply("It is Paris."), reply(PARIS_JSON)])
    agent = ChatModelAgent("geo", model, output_type=City)
    result = Runner(agent).query_sync("Paris?")
    assert result.final_output == City(**PARIS)
    told = model.requests[1].messages[-1]
    assert told.role == "user" and "final_result" in told.content


def test_other_tool_calls_of_the_final_result_reply_run_before_the_run_ends() -> None:
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Note something.

        Args:
            text: What to note.
        """
        ran.append(text)
        return "noted"

    model = ScriptedModel([calls(call("note", {"text": "a"}), _final(PARIS))])
    agent = ChatModelAgent("geo", model, tools=[note], output_type=City)
    result = Runner(agent).query_sync("Paris?")
    assert ran == ["a"]
    assert result.final_output == City(**PARIS)


def test_a_later_return_directly_call_of_the_same_reply_wins() -> None:
    model = ScriptedModel([calls(_final(PARIS), call("lookup", {"city": "Rome"}))])
    agent = ChatModelAgent(
        "geo", model, tools=[lookup], output_type=City, return_directly=["lookup"]
    )
    result = Runner(agent).query_sync("Paris?")
    assert result.final_output == "Rome: 2100000 people"


def test_a_final_result_of_a_reply_that_pauses_is_the_answer_after_resume() -> None:
    model = ScriptedModel([calls(call("approve", {"item": "x"}), _final(PARIS))])
    agent = ChatModelAgent("geo", model, tools=[approve], output_type=City, output_key="city")
    runner = Runner(agent)
    paused = runner.query_sync("Paris?")
    assert paused.interrupts and paused.final_output is None
    assert paused.checkpoint_id is not None
    done = runner.resume_sync(paused.checkpoint_id, value="yes")
    assert done.error is None
    assert done.final_output == City(**PARIS)


def test_a_run_option_model_decides_the_path_for_that_run() -> None:
    plain = ScriptedModel([_final(PARIS)])
    schema = ScriptedModel([reply(PARIS_JSON)], supports_output_schema=True)
    agent = ChatModelAgent("geo", schema, output_type=City)
    runner = Runner(agent)
    swapped = runner.query_sync("Paris?", options=[RunOption(agent="geo", model=plain)])
    assert swapped.final_output == City(**PARIS)
    assert [t.name for t in plain.requests[0].tools] == ["final_result"]
    assert "output_schema" not in plain.requests[0].options
    assert runner.query_sync("Paris?").final_output == City(**PARIS)
    assert schema.requests[0].tools == () and "output_schema" in schema.requests[0].options
    assert [t.name for t in agent.tools] == []  # the agent itself is unchanged


def test_a_user_tool_named_final_result_clashes_with_the_answer_tool() -> None:
    @tool
    def final_result(text: str) -> str:
        """Clash.

        Args:
            text: Anything.
        """
        return text

    with pytest.raises(UsageError, match="two tools named 'final_result'"):
        ChatModelAgent("geo", ScriptedModel([]), tools=[final_result], output_type=City)


# --- output guardrails ------------------------------------------------------------------------


async def _carried(events: list[AgentEvent]) -> str:
    """Return all that `events` carry as text: messages (a stream read whole), their tool
    calls' arguments and custom outputs."""
    parts: list[str] = []
    for event in events:
        if event.output is not None and event.output.message is not None:
            message = await event.output.message.get_message()
            parts += [message.content, *(c.arguments for c in message.tool_calls)]
        if event.output is not None and event.output.custom is not None:
            parts.append(repr(event.output.custom))
    return "\n".join(parts)


@pytest.mark.parametrize("schema", [True, False], ids=["schema", "final_result"])
async def test_output_guardrails_check_the_validated_object_and_a_blocked_one_never_leaves(
    schema: bool, streaming: bool
) -> None:
    checked: list[Any] = []

    def small_cities(ctx: AgentContext, city: City) -> GuardrailResult:
        checked.append(city)
        return GuardrailResult(tripwire=city.population > 1_000_000, info=city.name)

    lyon = {"name": "Lyon", "population": 520000}
    answers = [reply(json.dumps(c)) if schema else _final(c) for c in (PARIS, lyon)]
    model = ScriptedModel(answers, supports_output_schema=schema)
    agent = ChatModelAgent(
        "geo", model, output_type=City, output_key="city", output_guardrails=[small_cities]
    )
    runner = Runner(agent, store=MemoryStore(), enable_streaming=streaming)
    run = runner.query("Paris?", session_id="s")
    events = [event async for event in run]
    blocked = await run.collect()
    assert isinstance(blocked.error, GuardrailTripped) and blocked.error.info == "Paris"
    assert checked == [City(**PARIS)]  # the object, not its JSON text
    assert "2100000" not in await _carried(events)
    view = await runner.sessions.get("s")
    assert view is not None and [m.content for m in view.messages] == ["Paris?"]
    assert "city" not in view.values
    answered = await runner.query("Lyon?", session_id="s").collect()
    assert answered.error is None and answered.final_output == City(**lyon)
    assert checked == [City(**PARIS), City(**lyon)]
    assert "2100000" not in str(model.requests[-1].messages)
    view = await runner.sessions.get("s")
    assert view is not None and view.values["city"] == City(**lyon)


def test_an_output_guardrail_checks_a_final_result_answer_given_before_a_pause() -> None:
    def small_cities(ctx: AgentContext, city: City) -> GuardrailResult:
        return GuardrailResult(tripwire=city.population > 1_000_000, info=city.name)

    model = ScriptedModel([calls(call("approve", {"item": "x"}), _final(PARIS))])
    agent = ChatModelAgent(
        "geo", model, tools=[approve], output_type=City, output_guardrails=[small_cities]
    )
    runner = Runner(agent)
    paused = runner.query_sync("Paris?")
    assert paused.interrupts and paused.checkpoint_id is not None
    done = runner.resume_sync(paused.checkpoint_id, value="yes")
    assert isinstance(done.error, GuardrailTripped) and done.error.info == "Paris"
    assert done.events[-1].error is done.error
    assert not any(e.output is not None and e.output.custom is not None for e in done.events)
    assert [e.message.tool_name for e in done.events if e.message is not None] == ["approve"]


# --- output_key, nesting and bad configuration ------------------------------------------------


def test_output_key_stores_the_validated_object_for_later_agents(streaming: bool) -> None:
    seen: list[Any] = []

    def second(messages: list[Message], tools: list[ToolInfo]) -> str:
        return "ok"

    class Peek(Hooks):
        async def before_model(self, ctx: RunContext, request: ModelRequest) -> None:
            seen.append(ctx.session_values.get("city"))

    first = ChatModelAgent(
        "geo",
        ScriptedModel([reply(PARIS_JSON)], supports_output_schema=True),
        output_type=City,
        output_key="city",
    )
    flow = SequentialAgent("flow", [first, ChatModelAgent("next", FunctionModel(second))])
    result = Runner(flow, hooks=[Peek()], enable_streaming=streaming).query_sync("Paris?")
    assert result.error is None
    assert seen == [None, City(**PARIS)]


def test_output_key_value_survives_a_checkpoint_as_its_type() -> None:
    first = ChatModelAgent(
        "geo", ScriptedModel([_final(PARIS)]), output_type=City, output_key="city"
    )
    read: list[Any] = []

    @tool
    def use(x: str, ctx: RunContext) -> str:
        """Use the city after an approval.

        Args:
            x: Anything.
        """
        interrupt({"ok?": x})
        read.append(ctx.session_values["city"])
        return "used"

    later = ChatModelAgent(
        "later", ScriptedModel([call("use", {"x": "1"}), reply("done")]), tools=[use]
    )
    runner = Runner(SequentialAgent("flow", [first, later]))
    paused = runner.query_sync("Paris?")
    assert paused.checkpoint_id is not None
    done = runner.resume_sync(paused.checkpoint_id, value=True)
    assert done.error is None
    assert read == [City(**PARIS)]


def test_output_key_value_is_its_type_again_in_the_next_turn_of_a_session() -> None:
    read: list[Any] = []

    def second_turn(messages: list[Message], tools: list[ToolInfo]) -> str:
        return "ok"

    class Peek(Hooks):
        async def before_model(self, ctx: RunContext, request: ModelRequest) -> None:
            read.append(ctx.session_values.get("city"))

    model = ScriptedModel([reply(PARIS_JSON), reply("ok")], supports_output_schema=True)
    agent = ChatModelAgent("geo", model, output_type=City, output_key="city")
    runner = Runner(agent, hooks=[Peek()])
    assert runner.query_sync("Paris?", session_id="s").final_output == City(**PARIS)
    second = Runner(
        ChatModelAgent("geo", FunctionModel(second_turn)), store=runner.store, hooks=[Peek()]
    )
    assert second.query_sync("and?", session_id="s").error is None
    assert read == [None, City(**PARIS)]


def test_an_agent_run_as_a_tool_gives_its_caller_the_json_text() -> None:
    inner = ChatModelAgent(
        "geo", ScriptedModel([reply(PARIS_JSON)], supports_output_schema=True), output_type=City
    )
    outer_model = ScriptedModel(
        [call("geo", {"request": "Paris?"}), lambda messages, tools: reply(messages[-1].content)]
    )
    outer = ChatModelAgent("outer", outer_model, tools=[AgentTool(inner)])
    result = Runner(outer).query_sync("go")
    assert json.loads(result.final_output) == PARIS


def test_the_output_type_must_be_an_object_type_and_the_retries_a_count() -> None:
    with pytest.raises(UsageError, match="output_type"):
        ChatModelAgent("geo", ScriptedModel([]), output_type=int)
    with pytest.raises(UsageError, match="output_type"):
        ChatModelAgent("geo", ScriptedModel([]), output_type=object())
    with pytest.raises(UsageError, match="output_retries"):
        ChatModelAgent("geo", ScriptedModel([]), output_type=City, output_retries=-1)


class Tree(pydantic.BaseModel):
    label: str
    children: list[Tree] = []


def test_a_recursive_model_is_an_output_type_whose_schema_root_is_the_object() -> None:
    model = ScriptedModel(
        [reply('{"label": "a", "children": [{"label": "b"}]}')], supports_output_schema=True
    )
    result = Runner(ChatModelAgent("t", model, output_type=Tree)).query_sync("tree")
    assert result.final_output == Tree(label="a", children=[Tree(label="b")])
    schema = model.requests[0].options["output_schema"].schema
    assert schema["type"] == "object" and "$ref" not in schema
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
    assert "Tree" in schema["$defs"]


def test_an_agent_without_output_type_passes_no_schema_and_offers_no_tool() -> None:
    model = ScriptedModel([reply("hi")], supports_output_schema=True)
    result = Runner(ChatModelAgent("a", model)).query_sync("hi")
    assert result.final_output == "hi"
    assert model.requests[0].options == {} and model.requests[0].tools == ()


def test_supports_output_schema_reads_the_models_declaration() -> None:
    assert supports_output_schema(FunctionModel(lambda m, t: "x", supports_output_schema=True))
    assert not supports_output_schema(FunctionModel(lambda m, t: "x"))
    assert not supports_output_schema(object())


def test_strict_is_set_only_for_a_schema_openai_can_enforce() -> None:
    class Closed(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        name: str

    model = ScriptedModel([reply('{"name": "x"}')] * 2, supports_output_schema=True)
    Runner(ChatModelAgent("a", model, output_type=Closed)).query_sync("hi")
    Runner(ChatModelAgent("b", model, output_type=City)).query_sync("hi")
    assert model.requests[0].options["output_schema"].strict is True
    assert model.requests[1].options["output_schema"].strict is False


# --- the OpenAI adapter over real HTTP -------------------------------------------------------


async def _sse(events: list[dict[str, Any]]) -> AsyncIterator[str]:
    for event in events:
        yield f"data: {json.dumps(event)}\n\n"
    yield "data: [DONE]\n\n"


@pytest.fixture(scope="module")
def openai_server() -> Iterator[ScriptedServer]:
    exhausted = {"error": {"message": "script exhausted", "type": "x", "code": None}}
    with serving(ScriptedServer("/v1/chat/completions", _sse, exhausted), root="/v1") as fake:
        yield fake


def _completion(content: str) -> Scripted:
    return Scripted(
        body={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
        }
    )


def _chunk(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
    }


def test_openai_model_sends_the_json_schema_response_format(
    openai_server: ScriptedServer, streaming: bool
) -> None:
    from plait.models.openai import OpenAIModel

    half = len(PARIS_JSON) // 2
    answers = (
        [
            Scripted(events=[_chunk("nope")]),
            Scripted(events=[_chunk(PARIS_JSON[:half]), _chunk(PARIS_JSON[half:])]),
        ]
        if streaming
        else [_completion("nope"), _completion(PARIS_JSON)]
    )
    openai_server.reset(*answers)
    model = OpenAIModel("gpt-test", base_url=openai_server.base_url, api_key="sk", timeout=5.0)
    agent = ChatModelAgent("geo", model, output_type=City)
    result = Runner(agent, enable_streaming=streaming).query_sync("Paris?")
    assert result.error is None
    assert result.final_output == City(**PARIS)
    first, second = openai_server.requests
    assert first["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "City",
            "description": "A city and its population.",
            "schema": {k: v for k, v in City.model_json_schema().items() if k != "description"},
            "strict": False,
        },
    }
    assert "output_schema" not in first and "tools" not in first
    assert second["messages"][-1]["role"] == "user"
    assert "not valid JSON" in second["messages"][-1]["content"]


# --- the Anthropic adapter: structured outputs, or the final_result tool ---------------------


async def _anthropic_sse(events: list[dict[str, Any]]) -> AsyncIterator[str]:
    for event in events:
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"


@pytest.fixture(scope="module")
def anthropic_server() -> Iterator[ScriptedServer]:
    exhausted = {"type": "error", "error": {"type": "api_error", "message": "exhausted"}}
    with serving(ScriptedServer("/v1/messages", _anthropic_sse, exhausted), root="") as fake:
        yield fake


def _anthropic_reply(*content: dict[str, Any]) -> Scripted:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(content),
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 5},
    }
    return Scripted(body=body)


def test_anthropic_model_sends_the_schema_as_its_output_format(
    anthropic_server: ScriptedServer,
) -> None:
    from plait.models.anthropic import AnthropicModel

    anthropic_server.reset(_anthropic_reply({"type": "text", "text": PARIS_JSON}))
    model = AnthropicModel(
        "claude-test",
        base_url=anthropic_server.base_url,
        api_key="sk",
        timeout=5.0,
        output_config={"effort": "low"},
    )
    assert supports_output_schema(model)
    result = Runner(ChatModelAgent("geo", model, output_type=City)).query_sync("Paris?")
    assert result.error is None
    assert result.final_output == City(**PARIS)
    (request,) = anthropic_server.requests
    config = request["output_config"]
    assert config["effort"] == "low"  # the model's own output_config is kept
    assert config["format"]["type"] == "json_schema"
    schema = config["format"]["schema"]
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["properties"].keys() == {"name", "population"}
    assert "tools" not in request and "output_schema" not in request


def test_anthropic_model_without_structured_outputs_answers_by_final_result(
    anthropic_server: ScriptedServer,
) -> None:
    from plait.models.anthropic import AnthropicModel

    use = {"type": "tool_use", "id": "toolu_1", "name": "final_result", "input": PARIS}
    anthropic_server.reset(_anthropic_reply(use))
    model = AnthropicModel(
        "claude-test",
        base_url=anthropic_server.base_url,
        api_key="sk",
        timeout=5.0,
        structured_outputs=False,
    )
    assert not supports_output_schema(model)
    result = Runner(ChatModelAgent("geo", model, output_type=City)).query_sync("Paris?")
    assert result.error is None
    assert result.final_output == City(**PARIS)
    (request,) = anthropic_server.requests
    (final_tool,) = request["tools"]
    assert final_tool["name"] == "final_result"
    assert final_tool["input_schema"]["properties"].keys() == {"name", "population"}
    assert "output_config" not in request


# --- the embedded LocalModel: a grammar built from the schema --------------------------------


class Place(pydantic.BaseModel):
    city: str


class Report(pydantic.BaseModel):
    """Where, and whether it is sunny there."""

    place: Place
    sunny: bool


@pytest.mark.parametrize("steer", [True, False], ids=["steered", "one-grammar"])
def test_local_model_answers_with_json_decoded_under_the_schemas_grammar(
    steer: bool, streaming: bool
) -> None:
    from plait.models import LocalModel
    from plait.models.local import answer_schema

    schema = Report.model_json_schema()
    inlined = answer_schema(schema)
    assert "$defs" not in inlined and "$ref" not in json.dumps(inlined)
    assert inlined["properties"]["place"]["properties"] == {
        "city": {"title": "City", "type": "string"}
    }
    model = LocalModel(max_tokens=64, steer=steer)
    agent = ChatModelAgent(
        "weather", model, instruction="Tell the weather in a city.", output_type=Report
    )
    result = Runner(agent, enable_streaming=streaming).query_sync("Is it sunny in Paris?")
    assert result.error is None, result.error
    assert isinstance(result.final_output, Report)
    assert isinstance(result.final_output.place.city, str)
    variant = [e for e in result.events if e.message is not None][-1].message
    assert variant is not None
    text = variant.message if variant.stream is None else variant.stream.merged()
    assert text is not None
    assert Report.model_validate_json(text.content) == result.final_output


def test_local_model_refuses_a_recursive_output_schema() -> None:
    from plait.models.local import answer_schema

    class Node(pydantic.BaseModel):
        children: list[Node]

    with pytest.raises(UsageError, match="Node"):
        answer_schema(Node.model_json_schema())


# --- the docs ---------------------------------------------------------------------------------


def test_the_structured_output_example_of_the_docs_runs() -> None:
    page = (ROOT / "docs" / "capabilities" / "structured-output.md").read_text()
    section = page.split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    namespace: dict[str, Any] = {"__name__": "structured_output_example"}
    exec(
        compile(
            block.group(1), "docs/capabilities/structured-output.md", "exec", dont_inherit=True
        ),
        namespace,
    )
    invoice = namespace["result"].final_output
    assert invoice == namespace["Invoice"](number="INV-7", total=120.5)
    assert namespace["model"].remaining == 0
