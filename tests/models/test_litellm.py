"""LiteLLMModel over real HTTP against the scripted OpenAI-compatible server of test_openai.

litellm routes "openai/<model>" with an `api_base` to that server through its OpenAI
provider, so these tests check plait's side: the request, the conversion, the retries and
the errors. Nothing here reaches the internet.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from typing import Any

import pytest

import plait
from plait import Message, ToolCall, Usage
from plait.errors import ModelError, UsageError
from plait.messages import merge_chunks
from plait.models.litellm import LiteLLMModel
from tests.models import test_openai
from tests.models.scripted_server import Scripted, ScriptedServer
from tests.models.test_openai import (
    WEATHER,
    _call_delta,
    _chunk,
    _failure,
    _text,
    _tool_calls,
    weather,
)

# litellm's streaming triggers two pydantic warnings, which litellm silences with filters of
# its own added at import; pytest replaces those filters, so the two are named here.
pytestmark = [
    pytest.mark.filterwarnings(
        "ignore:Items? .* using the `ReadOnly` qualifier. Pydantic will not protect:UserWarning"
    ),
    pytest.mark.filterwarnings(
        "ignore:Accessing the 'model_(computed_)?fields' attribute on the instance is deprecated"
        ":pydantic.warnings.PydanticDeprecatedSince211"
    ),
]

# The same scripted OpenAI-protocol server as test_openai's (one per module).
fake_server = test_openai.fake_server
server = test_openai.server


def _model(server: ScriptedServer, **kwargs: Any) -> LiteLLMModel:
    kwargs.setdefault("retry_base_delay", 0.01)
    kwargs.setdefault("timeout", 5.0)
    return LiteLLMModel("openai/gpt-test", api_base=server.base_url, api_key="sk-test", **kwargs)


def _finish(reason: str) -> dict[str, Any]:
    """Return the chunk that ends a streamed choice (litellm requires one)."""
    chunk = _chunk({})
    chunk["choices"][0]["finish_reason"] = reason
    return chunk


# --- generate ---------------------------------------------------------------------------------


async def test_text_reply_with_usage_and_the_request_sent(server: ScriptedServer) -> None:
    server.reset(_text("Hello there", usage=(12, 4)))
    model = _model(server, temperature=0.5)
    reply = await model.generate([Message.system("be brief"), Message.user("hi")])
    assert reply == Message.assistant("Hello there", usage=Usage(input_tokens=12, output_tokens=4))
    assert server.requests == [
        {
            "model": "gpt-test",
            "temperature": 0.5,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
            ],
        }
    ]
    assert server.headers[0]["authorization"] == "Bearer sk-test"


async def test_tool_call_with_arguments(server: ScriptedServer) -> None:
    server.reset(_tool_calls(("c1", "weather", '{"city":"Paris"}')))
    history = [
        Message.user("weather in Paris?"),
        Message.assistant("", (ToolCall(id="c0", name="weather", arguments='{"city":"Rome"}'),)),
        Message.tool("rainy", "c0", name="weather"),
    ]
    reply = await _model(server).generate(history, tools=[WEATHER])
    assert reply.tool_calls == (ToolCall(id="c1", name="weather", arguments='{"city":"Paris"}'),)
    assert reply.usage == Usage(input_tokens=3, output_tokens=5)
    request = server.requests[0]
    assert request["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Get the weather.",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert request["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"city":"Rome"}'
    assert request["messages"][2] == {"role": "tool", "tool_call_id": "c0", "content": "rainy"}


async def test_named_tool_choice_is_forwarded_only_with_tools(server: ScriptedServer) -> None:
    server.reset(_text("a"), _text("b"))
    model = _model(server, tool_choice="weather", parallel_tool_calls=False)
    await model.generate([Message.user("q")], tools=[WEATHER])
    await model.generate([Message.user("q")])
    first, second = server.requests
    assert first["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert first["parallel_tool_calls"] is False
    assert not {"tool_choice", "parallel_tool_calls", "tools"} & second.keys()


# --- stream -----------------------------------------------------------------------------------


async def test_stream_text_and_tool_call_deltas_merge_by_index(server: ScriptedServer) -> None:
    events = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "Let me "}),
        _chunk({"content": "check."}),
        _chunk(_call_delta(0, "", id="c1", name="weather")),
        _chunk(_call_delta(0, '{"ci')),
        _chunk(_call_delta(1, '{"city"', id="c2", name="weather")),
        _chunk(_call_delta(0, 'ty": "Paris"}')),
        _chunk(_call_delta(1, ': "Rome"}')),
        _finish("tool_calls"),
        _chunk(usage=(9, 2)),
    ]
    server.reset(Scripted(events=events))
    chunks = [c async for c in _model(server).stream([Message.user("q")], tools=[WEATHER])]
    assert [c.content for c in chunks[:2]] == ["Let me ", "check."]
    assert chunks[3].tool_calls == (ToolCall(id="", name="", arguments='{"ci', index=0),)
    assert chunks[-1].usage == Usage(input_tokens=9, output_tokens=2)
    merged = merge_chunks(chunks)
    assert merged.content == "Let me check."
    assert merged.tool_calls == (
        ToolCall(id="c1", name="weather", arguments='{"city": "Paris"}'),
        ToolCall(id="c2", name="weather", arguments='{"city": "Rome"}'),
    )
    assert merged.usage == Usage(input_tokens=9, output_tokens=2)
    request = server.requests[0]
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}


async def test_stream_opening_is_retried(server: ScriptedServer) -> None:
    events = [_chunk({"content": "ok"}), _finish("stop")]
    server.reset(_failure(503, "busy"), Scripted(events=events))
    chunks = [c async for c in _model(server).stream([Message.user("q")])]
    assert merge_chunks(chunks).content == "ok"
    assert len(server.requests) == 2


# --- retries and errors -----------------------------------------------------------------------


async def test_429_then_success_is_retried(server: ScriptedServer) -> None:
    server.reset(_failure(429, "slow down"), _text("done"))
    reply = await _model(server, max_retries=2).generate([Message.user("q")])
    assert reply.content == "done"
    assert len(server.requests) == 2


async def test_retry_after_header_is_honoured(server: ScriptedServer) -> None:
    server.reset(_failure(429, "slow down", **{"retry-after": "0.3"}), _text("done"))
    model = _model(server, retry_base_delay=0.0)  # without Retry-After the wait would be 0
    started = time.monotonic()
    assert (await model.generate([Message.user("q")])).content == "done"
    assert time.monotonic() - started >= 0.3


async def test_500_until_retries_run_out(server: ScriptedServer) -> None:
    server.reset(*(_failure(500, "internal trouble") for _ in range(4)))
    with pytest.raises(ModelError) as info:
        await _model(server, max_retries=2).generate([Message.user("q")])
    assert info.value.status_code == 500
    assert "internal trouble" in str(info.value)
    assert len(server.requests) == 3  # plait's 2 retries, none of litellm's


async def test_400_fails_at_once_with_the_provider_message(
    server: ScriptedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reset(_failure(400, "Invalid value for 'temperature'"), _text("never"))
    with pytest.raises(ModelError) as info:
        await _model(server, max_retries=3).generate([Message.user("q")])
    assert info.value.status_code == 400
    assert "Invalid value for 'temperature'" in str(info.value)
    assert len(server.requests) == 1
    assert "Give Feedback" not in capsys.readouterr().out  # litellm's banner is off


async def test_timeout_is_a_model_error_and_not_retried(server: ScriptedServer) -> None:
    server.reset(Scripted(body={}, delay=1.0), _text("never"))
    with pytest.raises(ModelError, match="timed out") as info:
        await _model(server, timeout=0.2).generate([Message.user("q")])
    assert info.value.status_code is None
    assert len(server.requests) == 1


async def test_connection_errors_are_model_errors() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = LiteLLMModel(
        "openai/gpt-test", api_base=f"http://127.0.0.1:{port}/v1", api_key="k", timeout=5.0
    )
    with pytest.raises(ModelError, match="Connection error") as info:
        await model.generate([Message.user("q")])
    assert info.value.status_code == 500  # litellm reports a refused connection as a 500


# --- configuration ----------------------------------------------------------------------------


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)
    with pytest.raises(UsageError, match=r'pip install "plait\[litellm\]"'):
        LiteLLMModel("openai/gpt-test")


def test_litellm_is_made_quiet_and_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_OFFLINE_MODE", "LITELLM_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LITELLM_MODE", "DEV")  # a value the user set is kept
    model = LiteLLMModel("openai/gpt-test", api_base="http://127.0.0.1:9/v1")
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert os.environ["LITELLM_OFFLINE_MODE"] == "true"
    assert os.environ["LITELLM_MODE"] == "DEV"
    assert sys.modules["litellm"].suppress_debug_info is True
    assert repr(model) == "LiteLLMModel('openai/gpt-test', api_base='http://127.0.0.1:9/v1')"


@pytest.mark.parametrize("kwargs", [{"timeout": 0}, {"max_retries": -1}])
def test_bad_settings_are_usage_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError, match="LiteLLMModel"):
        LiteLLMModel("openai/gpt-test", **kwargs)


# --- event loops and agents -------------------------------------------------------------------


def test_same_model_from_two_event_loops(server: ScriptedServer) -> None:
    server.reset(_text("one"), _text("two"))
    model = _model(server)

    async def ask(text: str) -> str:
        return (await model.generate([Message.user(text)])).content

    assert (asyncio.run(ask("1")), asyncio.run(ask("2"))) == ("one", "two")


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


def test_infer_builds_a_litellm_model_keeping_the_whole_name() -> None:
    from plait.models import infer

    model = infer("litellm:ollama/llama3:8b")
    assert isinstance(model, LiteLLMModel) and model.model == "ollama/llama3:8b"
