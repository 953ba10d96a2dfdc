"""AnthropicModel over real HTTP against a scripted Messages API server, and `infer_anthropic`."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import plait
from plait import Message, ToolCall, Usage
from plait.errors import ModelError, UsageError
from plait.messages import merge_chunks
from plait.models.anthropic import AnthropicModel, infer_anthropic
from plait.tools import ToolInfo
from tests.models.scripted_server import Scripted, ScriptedServer, serving

# --- the scripted server ----------------------------------------------------------------------


async def _sse(events: list[dict[str, Any]]) -> AsyncIterator[str]:
    for event in events:
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"


@pytest.fixture(scope="module")
def fake_server() -> Iterator[ScriptedServer]:
    with serving(
        ScriptedServer("/v1/messages", _sse, _error_body("api_error", "script exhausted")), root=""
    ) as fake:
        yield fake


@pytest.fixture
def server(fake_server: ScriptedServer) -> ScriptedServer:
    fake_server.reset()
    return fake_server


def _model(server: ScriptedServer, **kwargs: Any) -> AnthropicModel:
    kwargs.setdefault("retry_base_delay", 0.01)
    kwargs.setdefault("timeout", 5.0)
    return AnthropicModel("claude-test", base_url=server.base_url, api_key="sk-ant", **kwargs)


# --- response builders ------------------------------------------------------------------------


def _error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _failure(status: int, message: str, **headers: str) -> Scripted:
    kinds = {400: "invalid_request_error", 429: "rate_limit_error", 529: "overloaded_error"}
    body = _error_body(kinds.get(status, "api_error"), message)
    return Scripted(body=body, status=status, headers=headers)


def _reply(*content: dict[str, Any], usage: tuple[int, int] = (3, 5)) -> Scripted:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }
    return Scripted(body=body)


def _text(text: str, usage: tuple[int, int] = (3, 5)) -> Scripted:
    return _reply({"type": "text", "text": text}, usage=usage)


def _tool_use(id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def _message_start(input_tokens: int) -> dict[str, Any]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }
    return {"type": "message_start", "message": message}


def _block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _text_delta(index: int, text: str) -> dict[str, Any]:
    return _delta(index, {"type": "text_delta", "text": text})


def _json_delta(index: int, partial: str) -> dict[str, Any]:
    return _delta(index, {"type": "input_json_delta", "partial_json": partial})


def _block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def _message_end(output_tokens: int, stop: str = "end_turn") -> list[dict[str, Any]]:
    delta = {"stop_reason": stop, "stop_sequence": None}
    return [
        {"type": "message_delta", "delta": delta, "usage": {"output_tokens": output_tokens}},
        {"type": "message_stop"},
    ]


WEATHER = ToolInfo(
    name="weather",
    description="Get the weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


# --- requests ---------------------------------------------------------------------------------


async def test_request_body_converts_messages_tools_and_options(server: ScriptedServer) -> None:
    server.reset(_text("ok"))
    model = _model(server, temperature=0.5, max_tokens=100)
    history = [
        Message.system("be brief"),
        Message.user("weather in Paris and Rome?"),
        Message.system("answer in French"),
        Message.assistant(
            "Let me check.",
            (
                ToolCall(id="t1", name="weather", arguments='{"city":"Paris"}'),
                ToolCall(id="t2", name="weather", arguments=""),
            ),
        ),
        Message.tool("sunny", "t1", name="weather"),
        Message.tool("rainy", "t2", name="weather"),
        Message.assistant("Sunny and rainy."),
        Message.user("thanks"),
    ]
    await model.generate(history, tools=[WEATHER], temperature=0.1, tool_choice="required")
    assert server.requests == [
        {
            "model": "claude-test",
            "max_tokens": 100,
            "temperature": 0.1,
            "system": "be brief\n\nanswer in French",
            "tool_choice": {"type": "any"},
            "messages": [
                {"role": "user", "content": "weather in Paris and Rome?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Let me check."},
                        _tool_use("t1", "weather", {"city": "Paris"}),
                        _tool_use("t2", "weather", {}),
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
                        {"type": "tool_result", "tool_use_id": "t2", "content": "rainy"},
                    ],
                },
                {"role": "assistant", "content": "Sunny and rainy."},
                {"role": "user", "content": "thanks"},
            ],
            "tools": [
                {
                    "name": "weather",
                    "description": "Get the weather.",
                    "input_schema": WEATHER.parameters,
                }
            ],
        }
    ]
    headers = server.headers[0]  # the SDK version decides which header carries the key
    assert "sk-ant" in headers.get("x-api-key", "") + headers.get("authorization", "")
    await model.aclose()


async def test_tool_results_split_by_a_user_message_are_separate(server: ScriptedServer) -> None:
    server.reset(_text("ok"))
    call = ToolCall(id="t1", name="weather", arguments="{}")
    history = [
        Message.user("q"),
        Message.assistant("", (call,)),
        Message.tool("a", "t1"),
        Message.user("more"),
    ]
    await _model(server).generate(history)
    messages = server.requests[0]["messages"]
    assert messages[1] == {"role": "assistant", "content": [_tool_use("t1", "weather", {})]}
    assert messages[2:] == [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}]},
        {"role": "user", "content": "more"},
    ]
    assert "system" not in server.requests[0]
    assert server.requests[0]["max_tokens"] == 1024


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        ("auto", None, {"type": "auto"}),
        ("none", None, {"type": "none"}),
        ("required", None, {"type": "any"}),
        ("weather", None, {"type": "tool", "name": "weather"}),
        ({"type": "any"}, None, {"type": "any"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("weather", False, {"type": "tool", "name": "weather", "disable_parallel_tool_use": True}),
        (None, True, None),
    ],
)
async def test_tool_choice_mapping(
    server: ScriptedServer, choice: Any, parallel: bool | None, expected: dict[str, Any] | None
) -> None:
    server.reset(_text("ok"))
    model = _model(server)
    await model.generate(
        [Message.user("q")], tools=[WEATHER], tool_choice=choice, parallel_tool_calls=parallel
    )
    request = server.requests[0]
    assert request.get("tool_choice") == expected
    assert "parallel_tool_calls" not in request
    await model.aclose()


async def test_tool_options_are_dropped_without_tools(server: ScriptedServer) -> None:
    server.reset(_text("ok"))
    model = _model(server, tool_choice="weather", parallel_tool_calls=False, temperature=0.3)
    await model.generate([Message.user("q")], temperature=None)
    assert not {"tool_choice", "parallel_tool_calls", "tools", "temperature"} & set(
        server.requests[0]
    )


async def test_unparsable_tool_arguments_name_the_call(server: ScriptedServer) -> None:
    bad = Message.assistant("", (ToolCall(id="call_9", name="weather", arguments="{oops"),))
    with pytest.raises(UsageError, match="call_9"):
        await _model(server).generate([Message.user("q"), bad, Message.tool("x", "call_9")])
    not_object = Message.assistant("", (ToolCall(id="call_8", name="weather", arguments="[1]"),))
    with pytest.raises(UsageError, match="call_8"):
        await _model(server).generate([Message.user("q"), not_object])
    with pytest.raises(UsageError, match="tool_call_id"):
        await _model(server).generate([Message.tool("x", None)])
    assert server.requests == []


# --- generate ---------------------------------------------------------------------------------


async def test_text_reply_with_usage(server: ScriptedServer) -> None:
    server.reset(
        _reply({"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}, usage=(12, 4))
    )
    reply = await _model(server).generate([Message.user("hi")])
    assert reply == Message.assistant("Hello there", usage=Usage(input_tokens=12, output_tokens=4))


async def test_reply_with_two_tool_use_blocks(server: ScriptedServer) -> None:
    server.reset(
        _reply(
            {"type": "text", "text": "Checking both."},
            _tool_use("toolu_1", "weather", {"city": "Paris"}),
            _tool_use("toolu_2", "weather", {"city": "Rome"}),
        )
    )
    reply = await _model(server).generate([Message.user("both")], tools=[WEATHER])
    assert reply.content == "Checking both."
    assert reply.tool_calls == (
        ToolCall(id="toolu_1", name="weather", arguments='{"city": "Paris"}'),
        ToolCall(id="toolu_2", name="weather", arguments='{"city": "Rome"}'),
    )
    assert reply.usage == Usage(input_tokens=3, output_tokens=5)


async def test_cached_input_tokens_are_counted(server: ScriptedServer) -> None:
    answer = _text("ok")
    assert answer.body is not None
    answer.body["usage"].update(cache_read_input_tokens=100, cache_creation_input_tokens=20)
    server.reset(answer)
    reply = await _model(server).generate([Message.user("q")])
    assert reply.usage == Usage(input_tokens=123, output_tokens=5)


# --- stream -----------------------------------------------------------------------------------


async def test_stream_text_in_chunks_with_usage(server: ScriptedServer) -> None:
    events = [
        _message_start(7),
        _block_start(0, {"type": "text", "text": ""}),
        {"type": "ping"},
        _text_delta(0, "Hel"),
        _text_delta(0, "lo "),
        _text_delta(0, "world"),
        _block_stop(0),
        *_message_end(3),
    ]
    server.reset(Scripted(events=events))
    chunks = [c async for c in _model(server).stream([Message.user("hi")])]
    assert [c.content for c in chunks] == ["", "Hel", "lo ", "world", ""]
    assert chunks[0].usage == Usage(input_tokens=7)
    assert chunks[-1].usage == Usage(output_tokens=3)
    assert merge_chunks(chunks) == Message.assistant(
        "Hello world", usage=Usage(input_tokens=7, output_tokens=3)
    )
    assert server.requests[0]["stream"] is True


async def test_stream_tool_use_json_pieces_merge_by_index(server: ScriptedServer) -> None:
    events = [
        _message_start(9),
        _block_start(0, {"type": "text", "text": ""}),
        _text_delta(0, "Checking."),
        _block_stop(0),
        _block_start(1, {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}),
        _json_delta(1, ""),
        _json_delta(1, '{"ci'),
        _json_delta(1, 'ty": "Paris"}'),
        _block_stop(1),
        _block_start(2, {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {}}),
        _json_delta(2, '{"city"'),
        _json_delta(2, ': "Rome"}'),
        _block_stop(2),
        *_message_end(2, stop="tool_use"),
    ]
    server.reset(Scripted(events=events))
    chunks = [c async for c in _model(server).stream([Message.user("q")], tools=[WEATHER])]
    starts = [c.tool_calls for c in chunks if c.tool_calls and c.tool_calls[0].id]
    assert starts[0] == (ToolCall(id="toolu_1", name="weather", arguments="", index=1),)
    assert ToolCall(id="", name="", arguments='{"ci', index=1) in [
        tc for c in chunks for tc in c.tool_calls
    ]
    merged = merge_chunks(chunks)
    assert merged.content == "Checking."
    assert merged.tool_calls == (
        ToolCall(id="toolu_1", name="weather", arguments='{"city": "Paris"}'),
        ToolCall(id="toolu_2", name="weather", arguments='{"city": "Rome"}'),
    )
    assert merged.usage == Usage(input_tokens=9, output_tokens=2)


async def test_stream_opening_is_retried(server: ScriptedServer) -> None:
    events = [_message_start(1), _text_delta(0, "ok"), *_message_end(1)]
    server.reset(_failure(529, "Overloaded"), Scripted(events=events))
    chunks = [c async for c in _model(server).stream([Message.user("q")])]
    assert merge_chunks(chunks).content == "ok"
    assert len(server.requests) == 2


async def test_error_event_mid_stream_is_a_model_error(server: ScriptedServer) -> None:
    events = [
        _message_start(1),
        _text_delta(0, "par"),
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded mid-way"}},
    ]
    server.reset(Scripted(events=events))
    received: list[Message] = []

    async def read() -> None:
        async for chunk in _model(server).stream([Message.user("q")]):
            received.append(chunk)

    with pytest.raises(ModelError, match="Overloaded mid-way"):
        await read()
    assert [c.content for c in received] == ["", "par"]
    assert len(server.requests) == 1


# --- retries and errors -----------------------------------------------------------------------


async def test_429_then_success_is_retried(server: ScriptedServer) -> None:
    server.reset(_failure(429, "slow down"), _text("done"))
    reply = await _model(server, max_retries=2).generate([Message.user("q")])
    assert reply.content == "done"
    assert len(server.requests) == 2


async def test_retry_after_header_is_honoured_within_the_cap(server: ScriptedServer) -> None:
    server.reset(_failure(429, "slow down", **{"retry-after": "30"}), _text("done"))
    started = time.monotonic()
    reply = await _model(server, retry_max_delay=0.05).generate([Message.user("q")])
    assert reply.content == "done"
    assert time.monotonic() - started < 5


async def test_500_until_retries_run_out(server: ScriptedServer) -> None:
    server.reset(*(_failure(500, "internal trouble") for _ in range(3)), _text("never"))
    with pytest.raises(ModelError) as info:
        await _model(server, max_retries=2).generate([Message.user("q")])
    assert info.value.status_code == 500
    assert "internal trouble" in str(info.value)
    assert len(server.requests) == 3


async def test_400_fails_at_once_with_the_provider_message(server: ScriptedServer) -> None:
    server.reset(_failure(400, "max_tokens: Field required"), _text("never"))
    with pytest.raises(ModelError) as info:
        await _model(server, max_retries=3).generate([Message.user("q")])
    assert info.value.status_code == 400
    assert "max_tokens: Field required" in str(info.value)
    assert len(server.requests) == 1


async def test_timeout_is_not_retried(server: ScriptedServer) -> None:
    server.reset(Scripted(body={}, delay=1.0), _text("never"))
    with pytest.raises(ModelError, match="timed out") as info:
        await _model(server, timeout=0.2).generate([Message.user("q")])
    assert info.value.status_code is None
    assert len(server.requests) == 1


async def test_connection_errors_are_retried_then_reported() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = AnthropicModel(
        "claude-test", base_url=f"http://127.0.0.1:{port}", api_key="k", retry_base_delay=0.01
    )
    with pytest.raises(ModelError, match="could not reach") as info:
        await model.generate([Message.user("q")])
    assert info.value.status_code is None


# --- configuration ----------------------------------------------------------------------------


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(UsageError, match=r'pip install "plait\[anthropic\]"'):
        AnthropicModel("claude-test")


def test_without_a_key_or_base_url_the_constructor_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY") as info:
        AnthropicModel("claude-test")
    assert "\n" not in str(info.value)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token")  # the SDK's other credential
    assert AnthropicModel("claude-test").model == "claude-test"


async def test_a_server_at_a_base_url_needs_no_key(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    server.reset(_text("hi"))
    model = AnthropicModel("claude-test", base_url=server.base_url, timeout=5.0)
    assert (await model.generate([Message.user("q")])).content == "hi"
    sent = server.headers[0]
    assert "no-key" in sent.get("x-api-key", "") + sent.get("authorization", "")  # by SDK version
    await model.aclose()


@pytest.mark.parametrize("kwargs", [{"max_tokens": 0}, {"timeout": 0}, {"max_retries": -1}])
def test_bad_settings_are_usage_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        AnthropicModel("claude-test", **kwargs)
    with pytest.raises(UsageError, match="model name"):
        AnthropicModel("")


def test_infer_anthropic_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://localhost:1234")
    model = infer_anthropic(" claude-x ")
    assert (model.model, model.base_url, model._api_key) == (
        "claude-x",
        "http://localhost:1234",
        "sk-env",
    )
    with pytest.raises(UsageError, match='"anthropic:<model>"'):
        infer_anthropic("  ")


# --- event loops and agents -------------------------------------------------------------------


def test_same_model_from_two_event_loops(server: ScriptedServer) -> None:
    server.reset(_text("one"), _text("two"))
    model = _model(server)

    async def ask(text: str) -> tuple[str, Any]:
        reply = await model.generate([Message.user(text)])
        return reply.content, model._client()

    first, first_client = asyncio.run(ask("1"))
    second, second_client = asyncio.run(ask("2"))
    assert (first, second) == ("one", "two")
    assert first_client is not second_client
    assert first_client.is_closed() and second_client.is_closed()


async def test_aclose_closes_the_loops_client(server: ScriptedServer) -> None:
    server.reset(_text("one"), _text("two"))
    model = _model(server)
    await model.generate([Message.user("1")])
    client = model._client()
    await model.aclose()
    assert client.is_closed()
    assert (await model.generate([Message.user("2")])).content == "two"
    assert model._client() is not client
    await model.aclose()


@plait.tool
def weather(city: str) -> str:
    """Get the weather.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


def test_agent_runs_a_tool_round_against_the_server(server: ScriptedServer) -> None:
    server.reset(
        _reply(_tool_use("toolu_1", "weather", {"city": "Oslo"})), _text("It is sunny in Oslo.")
    )
    agent = plait.ChatModelAgent("forecaster", _model(server), tools=[weather])
    result = plait.Runner(agent).query_sync("Weather in Oslo?")
    assert result.error is None
    assert result.final_output == "It is sunny in Oslo."
    first, second = server.requests
    assert [t["name"] for t in first["tools"]] == ["weather"]
    assert second["messages"][-2] == {
        "role": "assistant",
        "content": [_tool_use("toolu_1", "weather", {"city": "Oslo"})],
    }
    assert second["messages"][-1] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny in Oslo"}],
    }


def test_infer_builds_an_anthropic_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from plait.models import AnthropicModel, infer

    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    model = infer("anthropic:claude-test")
    assert isinstance(model, AnthropicModel)
    assert model.model == "claude-test"
