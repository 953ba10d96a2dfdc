"""OpenAIModel against a real OpenAI-compatible server: llama-cpp-python's own, over HTTP.

The server serves the embedded Gemma 3 270M weights. The file has no chat template, so the
server is told to use ChatML (its fallback, llama-2, makes this base model stop at once); the
replies are not sensible text. What is checked is the protocol: chat with usage, streaming
(this server sends no usage chunk), and a tool call forced by a named `tool_choice`, which the
server decodes under the tool's JSON schema.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from plait import Message
from plait.examples.router import get_weather
from plait.messages import merge_chunks
from plait.models import OpenAIModel
from plait.models.local import default_threads, default_weights


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    threads = str(default_threads())
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(default_weights()),
        "--model_alias",
        "gemma-3-270m",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--logits_all",
        "false",
        "--chat_format",
        "chatml",
        "--n_ctx",
        "2048",
        "--n_threads",
        threads,
        "--n_threads_batch",
        threads,
    ]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    log = log_path.open("w")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {log_path.read_text()[-2000:]}")
            try:
                if httpx.get(f"{base}/models", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "llama_cpp.server did not start in 60 s"
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


def _model(base: str) -> OpenAIModel:
    return OpenAIModel("gemma-3-270m", base_url=base, api_key="none", timeout=120, max_tokens=16)


async def test_plain_chat_returns_text_and_usage(server: str) -> None:
    model = _model(server)
    reply = await model.generate([Message.system("Be brief."), Message.user("Say hello.")])
    assert reply.role == "assistant" and not reply.tool_calls
    assert isinstance(reply.content, str)
    assert reply.usage is not None
    assert reply.usage.input_tokens > 3 and 1 <= reply.usage.output_tokens <= 16
    await model.aclose()


async def test_streaming_a_forced_tool_call_merges_its_argument_deltas(server: str) -> None:
    # This base model may end a free reply at once; a forced tool call always streams its
    # arguments, in pieces that must merge (by index) into valid JSON.
    model = _model(server)
    calls = [
        c
        async for c in model.stream(
            [Message.user("What's the weather like in Tokyo?")],
            tools=[get_weather.info()],
            tool_choice="get_weather",
            max_tokens=48,
        )
    ]
    deltas = [tc for c in calls for tc in c.tool_calls]
    assert len(deltas) > 1 and {d.index for d in deltas} == {0}
    (tc,) = merge_chunks(calls).tool_calls
    assert tc.name == "get_weather" and tc.id == deltas[0].id
    assert tc.arguments == "".join(d.arguments for d in deltas)
    assert tc.arguments.lstrip().startswith("{") and '"city"' in tc.arguments
    await model.aclose()


async def test_a_named_tool_choice_gets_a_schema_valid_tool_call(server: str) -> None:
    model = _model(server)
    reply = await model.generate(
        [Message.user("What's the weather like in Tokyo?")],
        tools=[get_weather.info()],
        tool_choice="get_weather",
        max_tokens=48,
    )
    (tc,) = reply.tool_calls
    assert tc.name == "get_weather" and tc.id
    # the server's grammar follows the schema's shape; it does not bound the string, so the
    # text may run to max_tokens: check the shape rather than parse it
    assert tc.arguments.lstrip().startswith("{") and '"city"' in tc.arguments
    await model.aclose()
