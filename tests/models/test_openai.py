"""OpenAIModel over real HTTP against a scripted OpenAI-compatible server, and `infer`."""

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
from plait.models import infer
from plait.models.openai import OpenAIModel
from plait.tools import ToolInfo
from tests.models.scripted_server import Scripted, ScriptedServer, serving

# --- the scripted server ----------------------------------------------------------------------


async def _sse(events: list[dict[str, Any]]) -> AsyncIterator[str]:
    for event in events:
        yield f"data: {json.dumps(event)}\n\n"
    yield "data: [DONE]\n\n"


@pytest.fixture(scope="module")
def fake_server() -> Iterator[ScriptedServer]:
    with serving(
        ScriptedServer("/v1/chat/completions", _sse, _error("script exhausted")), root="/v1"
    ) as fake:
        yield fake


@pytest.fixture
def server(fake_server: ScriptedServer) -> ScriptedServer:
    fake_server.reset()
    return fake_server


def _model(server: ScriptedServer, **kwargs: Any) -> OpenAIModel:
    kwargs.setdefault("retry_base_delay", 0.01)
    kwargs.setdefault("timeout", 5.0)
    return OpenAIModel("gpt-test", base_url=server.base_url, api_key="sk-test", **kwargs)


# --- response builders ------------------------------------------------------------------------


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


def _completion(message: dict[str, Any], usage: tuple[int, int] = (3, 5)) -> Scripted:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        },
    }
    return Scripted(body=body)


def _text(content: str, usage: tuple[int, int] = (3, 5)) -> Scripted:
    return _completion({"role": "assistant", "content": content}, usage)


def _tool_calls(*calls: tuple[str, str, str]) -> Scripted:
    tool_calls = [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
        for cid, name, args in calls
    ]
    return _completion({"role": "assistant", "content": None, "tool_calls": tool_calls})


def _failure(status: int, message: str, **headers: str) -> Scripted:
    return Scripted(body=_error(message), status=status, headers=headers)


def _chunk(
    delta: dict[str, Any] | None = None, usage: tuple[int, int] | None = None
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    if usage is not None:
        chunk["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        }
    return chunk


def _call_delta(
    index: int, arguments: str, id: str | None = None, name: str | None = None
) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    delta: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        delta.update(id=id, type="function")
    return {"tool_calls": [delta]}


WEATHER = ToolInfo(
    name="weather",
    description="Get the weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


# --- requests ---------------------------------------------------------------------------------


async def test_request_body_has_messages_tools_and_options(server: ScriptedServer) -> None:
    server.reset(_text("ok"))
    model = _model(server, temperature=0.5, max_tokens=100)
    history = [
        Message.system("be brief"),
        Message.user("weather in Paris?"),
        Message.assistant("", (ToolCall(id="c1", name="weather", arguments='{"city":"Paris"}'),)),
        Message.tool("sunny", "c1", name="weather"),
        Message.user("thanks"),
    ]
    await model.generate(
        history, tools=[WEATHER], temperature=0.1, tool_choice="required", parallel_tool_calls=False
    )
    assert server.requests == [
        {
            "model": "gpt-test",
            "temperature": 0.1,
            "max_tokens": 100,
            "tool_choice": "required",
            "parallel_tool_calls": False,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "weather in Paris?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                {"role": "user", "content": "thanks"},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "weather",
                        "description": "Get the weather.",
                        "parameters": WEATHER.parameters,
                    },
                }
            ],
        }
    ]
    await model.aclose()


async def test_tool_choice_by_name_and_tool_options_without_tools(server: ScriptedServer) -> None:
    server.reset(_text("a"), _text("b"))
    model = _model(server, tool_choice="weather", parallel_tool_calls=True, temperature=0.3)
    await model.generate([Message.user("q")], tools=[WEATHER])
    await model.generate([Message.user("q")], temperature=None)
    first, second = server.requests
    assert first["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert first["temperature"] == 0.3
    assert not {"tool_choice", "parallel_tool_calls", "tools", "temperature"} & second.keys()
    await model.aclose()


# --- generate ---------------------------------------------------------------------------------


async def test_text_reply_with_usage(server: ScriptedServer) -> None:
    server.reset(_text("Hello there", usage=(12, 4)))
    reply = await _model(server).generate([Message.user("hi")])
    assert reply == Message.assistant("Hello there", usage=Usage(input_tokens=12, output_tokens=4))


async def test_reply_with_two_parallel_tool_calls(server: ScriptedServer) -> None:
    server.reset(
        _tool_calls(("c1", "weather", '{"city":"Paris"}'), ("c2", "weather", '{"city":"Rome"}'))
    )
    reply = await _model(server).generate([Message.user("both")], tools=[WEATHER])
    assert reply.content == ""
    assert reply.tool_calls == (
        ToolCall(id="c1", name="weather", arguments='{"city":"Paris"}'),
        ToolCall(id="c2", name="weather", arguments='{"city":"Rome"}'),
    )
    assert reply.usage == Usage(input_tokens=3, output_tokens=5)


async def test_refusal_becomes_the_content(server: ScriptedServer) -> None:
    server.reset(_completion({"role": "assistant", "content": None, "refusal": "I can't help."}))
    reply = await _model(server).generate([Message.user("bad")])
    assert reply.content == "I can't help."


# --- stream -----------------------------------------------------------------------------------


async def test_stream_text_in_chunks_then_usage(server: ScriptedServer) -> None:
    events = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "Hel"}),
        _chunk({"content": "lo "}),
        _chunk({"content": "world"}),
        _chunk({}),
        _chunk(usage=(7, 3)),
    ]
    server.reset(Scripted(events=events))
    chunks = [c async for c in _model(server).stream([Message.user("hi")])]
    assert [c.content for c in chunks] == ["Hel", "lo ", "world", ""]
    assert chunks[-1].usage == Usage(input_tokens=7, output_tokens=3)
    assert merge_chunks(chunks) == Message.assistant(
        "Hello world", usage=Usage(input_tokens=7, output_tokens=3)
    )
    request = server.requests[0]
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}


async def test_stream_tool_call_arguments_in_pieces_merge_by_index(server: ScriptedServer) -> None:
    events = [
        _chunk({"role": "assistant", "content": None}),
        _chunk(_call_delta(0, "", id="c1", name="weather")),
        _chunk(_call_delta(0, '{"ci')),
        _chunk(_call_delta(1, '{"city"', id="c2", name="weather")),
        _chunk(_call_delta(0, 'ty": "Paris"}')),
        _chunk(_call_delta(1, ': "Rome"}')),
        _chunk(usage=(9, 2)),
    ]
    server.reset(Scripted(events=events))
    chunks = [c async for c in _model(server).stream([Message.user("q")], tools=[WEATHER])]
    assert chunks[0].tool_calls == (ToolCall(id="c1", name="weather", arguments="", index=0),)
    assert chunks[1].tool_calls == (ToolCall(id="", name="", arguments='{"ci', index=0),)
    merged = merge_chunks(chunks)
    assert merged.tool_calls == (
        ToolCall(id="c1", name="weather", arguments='{"city": "Paris"}'),
        ToolCall(id="c2", name="weather", arguments='{"city": "Rome"}'),
    )
    assert merged.usage == Usage(input_tokens=9, output_tokens=2)


async def test_stream_opening_is_retried(server: ScriptedServer) -> None:
    server.reset(_failure(503, "busy"), Scripted(events=[_chunk({"content": "ok"})]))
    chunks = [c async for c in _model(server).stream([Message.user("q")])]
    assert merge_chunks(chunks).content == "ok"
    assert len(server.requests) == 2


async def test_error_event_mid_stream_is_a_model_error(server: ScriptedServer) -> None:
    events = [_chunk({"content": "par"}), {"error": {"message": "overloaded mid-stream"}}]
    server.reset(Scripted(events=events))
    received: list[Message] = []

    async def read() -> None:
        async for chunk in _model(server).stream([Message.user("q")]):
            received.append(chunk)

    with pytest.raises(ModelError, match="overloaded mid-stream"):
        await read()
    assert [c.content for c in received] == ["par"]
    assert len(server.requests) == 1


# --- retries and errors -----------------------------------------------------------------------


async def test_429_twice_then_success_is_retried(server: ScriptedServer) -> None:
    server.reset(_failure(429, "slow down"), _failure(429, "slow down"), _text("done"))
    reply = await _model(server, max_retries=2).generate([Message.user("q")])
    assert reply.content == "done"
    assert len(server.requests) == 3


async def test_retry_after_header_is_honoured_within_the_cap(server: ScriptedServer) -> None:
    server.reset(_failure(429, "slow down", **{"retry-after": "30"}), _text("done"))
    model = _model(server, retry_max_delay=0.05)
    started = time.monotonic()
    assert (await model.generate([Message.user("q")])).content == "done"
    assert time.monotonic() - started < 5


async def test_500_until_retries_run_out(server: ScriptedServer) -> None:
    server.reset(*(_failure(500, "internal trouble") for _ in range(3)))
    with pytest.raises(ModelError) as info:
        await _model(server, max_retries=2).generate([Message.user("q")])
    assert info.value.status_code == 500
    assert "internal trouble" in str(info.value)
    assert len(server.requests) == 3


async def test_400_fails_at_once_with_the_provider_message(server: ScriptedServer) -> None:
    server.reset(_failure(400, "Invalid value for 'temperature'"), _text("never"))
    with pytest.raises(ModelError) as info:
        await _model(server, max_retries=3).generate([Message.user("q")])
    assert info.value.status_code == 400
    assert "Invalid value for 'temperature'" in str(info.value)
    assert len(server.requests) == 1


async def test_timeout_is_a_model_error(server: ScriptedServer) -> None:
    server.reset(Scripted(body={}, delay=1.0))
    with pytest.raises(ModelError, match="timed out") as info:
        await _model(server, timeout=0.2).generate([Message.user("q")])
    assert info.value.status_code is None
    assert len(server.requests) == 1


async def test_connection_errors_are_retried_then_reported() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAIModel(
        "gpt-test", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", retry_base_delay=0.01
    )
    with pytest.raises(ModelError, match="could not reach") as info:
        await model.generate([Message.user("q")])
    assert info.value.status_code is None


# --- configuration ----------------------------------------------------------------------------


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(UsageError, match=r'pip install "plait\[openai\]"'):
        OpenAIModel("gpt-test")


def test_without_a_key_or_base_url_the_constructor_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(UsageError, match="OPENAI_API_KEY") as info:
        OpenAIModel("gpt-test")
    assert "\n" not in str(info.value)
    assert OpenAIModel("gpt-test", api_key="sk-given")._api_key == "sk-given"


@pytest.mark.parametrize("how", ["argument", "variable"])
async def test_a_server_at_a_base_url_needs_no_key(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    base_url: str | None = server.base_url
    if how == "variable":
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        base_url = None
    server.reset(_text("no key"), _text("a key"))
    model = OpenAIModel("gpt-test", base_url=base_url, timeout=5.0)
    assert (await model.generate([Message.user("q")])).content == "no key"
    await model.aclose()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")  # a key that is set is sent
    model = OpenAIModel("gpt-test", base_url=base_url, timeout=5.0)
    assert (await model.generate([Message.user("q")])).content == "a key"
    await model.aclose()
    assert [h["authorization"] for h in server.headers] == ["Bearer no-key", "Bearer sk-env"]


def test_infer_openai_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:1234/v1")
    model = infer("openai:gpt-x")
    assert isinstance(model, OpenAIModel)
    assert (model.model, model.base_url, model._api_key) == (
        "gpt-x",
        "http://localhost:1234/v1",
        "sk-env",
    )
    monkeypatch.setenv("PLAIT_MODEL", "openai:gpt-y")
    from_env = infer()
    assert isinstance(from_env, OpenAIModel) and from_env.model == "gpt-y"


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


@plait.tool
def weather(city: str) -> str:
    """Get the weather.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


def test_agent_runs_a_tool_round_against_the_server(server: ScriptedServer) -> None:
    server.reset(_tool_calls(("c1", "weather", '{"city": "Oslo"}')), _text("It is sunny in Oslo."))
    agent = plait.ChatModelAgent("forecaster", _model(server), tools=[weather])
    result = plait.Runner(agent).query_sync("Weather in Oslo?")
    assert result.error is None
    assert result.final_output == "It is sunny in Oslo."
    first, second = server.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["weather"]
    assert second["messages"][-2]["tool_calls"][0]["id"] == "c1"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "sunny in Oslo",
    }


async def test_streamed_calls_without_ids_get_unique_ids_before_the_agent_runs_them(
    server: ScriptedServer,
) -> None:
    no_ids = [
        _chunk({"role": "assistant", "content": None}),
        _chunk(_call_delta(0, '{"city": "Oslo"}', name="weather")),
        _chunk(_call_delta(1, '{"city": "Rome"}', name="weather")),
        _chunk(usage=(9, 2)),
    ]
    answer = [_chunk({"role": "assistant", "content": "Sunny in both."}), _chunk(usage=(9, 2))]
    server.reset(Scripted(events=no_ids), Scripted(events=answer))
    agent = plait.ChatModelAgent("forecaster", _model(server), tools=[weather])
    result = await plait.Runner(agent, enable_streaming=True).query("Oslo and Rome?").collect()
    assert result.final_output == "Sunny in both."
    calling, first, second = server.requests[1]["messages"][-3:]
    ids = [tc["id"] for tc in calling["tool_calls"]]
    assert len(set(ids)) == 2 and all(ids)
    assert (first["tool_call_id"], first["content"]) == (ids[0], "sunny in Oslo")
    assert (second["tool_call_id"], second["content"]) == (ids[1], "sunny in Rome")


def test_a_tools_effect_and_approval_are_never_sent_to_the_provider(server: ScriptedServer) -> None:
    @plait.tool(effect="once", approval=plait.Approval(expires_in=60))
    def pay(cents: int) -> str:
        """Pay."""
        return "paid"

    assert pay.info().effect == "once"
    server.reset(_text("no payment today"))
    agent = plait.ChatModelAgent("payer", _model(server), tools=[pay])
    assert plait.Runner(agent).query_sync("pay?").final_output == "no payment today"
    [request] = server.requests
    [sent] = request["tools"]
    assert sent == {"type": "function", "function": {"name": "pay", "description": "Pay.",
                    "parameters": pay.info().parameters}}  # fmt: skip
