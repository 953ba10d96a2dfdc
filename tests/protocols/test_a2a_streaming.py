"""A2A streaming as clients use it: a long answer is one artifact sent in a few chunks (not an
event per token), and the run stops when its client cancels the task or goes away."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_text_parts
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

from plait import ChatModelAgent
from plait.protocols import a2a
from plait.testing import ScriptedModel
from tests.protocols.a2a_support import WAIT, HangingModel, waited
from tests.server.support import ServerThread, parse_sse

TOKENS = 6000


@pytest.fixture
def serve() -> Iterator[Any]:
    """Return a function that serves an ASGI app until the test ends; it returns the URL."""
    with contextlib.ExitStack() as stack:
        yield lambda app: stack.enter_context(ServerThread(app)).url


def user_message(text: str) -> Message:
    return Message(
        role=Role.ROLE_USER, message_id=f"m-{time.monotonic_ns()}", parts=[Part(text=text)]
    )


def long_answer() -> str:
    return " ".join(f"word{i}" for i in range(TOKENS))


async def test_a_long_streamed_answer_is_one_artifact_in_few_chunks(serve: Any) -> None:
    answer = long_answer()
    url = serve(a2a.app(ChatModelAgent("talker", ScriptedModel([answer]))))
    artifacts, statuses = [], []
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=WAIT) as http:
        client = await create_client(url, client_config=ClientConfig(httpx_client=http))
        request = SendMessageRequest(message=user_message("talk"))
        async for response in client.send_message(request):
            if response.HasField("artifact_update"):
                artifacts.append(response.artifact_update)
            elif response.HasField("status_update"):
                statuses.append(response.status_update.status.state)
    elapsed = time.monotonic() - started
    assert statuses == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]
    assert {u.artifact.artifact_id for u in artifacts} == {"answer"}
    assert [u.append for u in artifacts] == [False] + [True] * (len(artifacts) - 1)
    assert [u.last_chunk for u in artifacts] == [False] * (len(artifacts) - 1) + [True]
    text = "".join("".join(get_text_parts(u.artifact.parts)) for u in artifacts)
    assert text == answer
    # a chunk is sent when it holds 4 KB, or 50 ms after its first text: never per token
    by_size = math.ceil(len(answer.encode()) / 4096)
    by_time = math.ceil(elapsed / 0.05)
    assert len(artifacts) <= by_size + by_time + 1
    assert all(
        len("".join(get_text_parts(u.artifact.parts)).encode()) <= 4096 + 16 for u in artifacts
    )
    assert len(artifacts) < TOKENS / 20


async def test_a_0_3_stream_of_a_long_answer_is_a_few_artifact_updates(serve: Any) -> None:
    answer = long_answer()
    url = serve(a2a.app(ChatModelAgent("talker", ScriptedModel([answer]))))
    message = {"role": "user", "parts": [{"kind": "text", "text": "talk"}], "messageId": "m1"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": message}}
    async with (
        httpx.AsyncClient(timeout=WAIT) as http,
        http.stream("POST", url + "/", json=body) as response,
    ):
        lines = [line async for line in response.aiter_lines()]
    results = [data["result"] for _, data in parse_sse(iter(lines))]
    kinds = [r["kind"] for r in results]
    assert kinds[0] == "task" and kinds[-1] == "status-update"
    updates = [r for r in results if r["kind"] == "artifact-update"]
    assert 1 <= len(updates) < TOKENS / 20
    assert "".join(p["text"] for u in updates for p in u["artifact"]["parts"]) == answer
    assert results[-1]["final"] is True and results[-1]["status"]["state"] == "completed"


async def test_a_client_that_leaves_a_blocking_send_stops_the_run(serve: Any) -> None:
    model = HangingModel()
    url = serve(a2a.app(ChatModelAgent("slow", model)))

    async def send() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            config = ClientConfig(streaming=False, httpx_client=http)
            client = await create_client(url, client_config=config)
            [_ async for _ in client.send_message(SendMessageRequest(message=user_message("go")))]

    sending = asyncio.ensure_future(send())
    assert await waited(model.started)
    sending.cancel()  # the client gives up: its connection closes
    with contextlib.suppress(asyncio.CancelledError):
        await sending
    assert await waited(model.stopped)  # the server stopped the run


async def test_a_client_that_leaves_a_stream_stops_the_run(serve: Any) -> None:
    model = HangingModel()
    url = serve(a2a.app(ChatModelAgent("slow", model)))
    seen: list[str] = []
    async with httpx.AsyncClient(timeout=WAIT) as http:
        client = await create_client(url, client_config=ClientConfig(httpx_client=http))
        responses = client.send_message(SendMessageRequest(message=user_message("go")))
        async for response in responses:
            if response.HasField("artifact_update"):
                seen.extend(get_text_parts(response.artifact_update.artifact.parts))
                break  # the reader leaves after the first words
        await responses.aclose()
    assert seen == ["thinking "]
    assert await waited(model.stopped)


async def test_cancelling_a_running_task_stops_its_run(serve: Any) -> None:
    model = HangingModel()
    url = serve(a2a.app(ChatModelAgent("slow", model)))
    message = {"role": "user", "parts": [{"kind": "text", "text": "go"}], "messageId": "m1"}
    params = {"message": message, "configuration": {"blocking": False}}
    async with httpx.AsyncClient(timeout=WAIT) as http:
        sent = await http.post(
            url + "/", json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params}
        )
        task_id = sent.json()["result"]["id"]
        assert await waited(model.started)  # the answer came back; the run goes on
        assert not model.stopped.is_set()
        canceled = await http.post(
            url + "/",
            json={"jsonrpc": "2.0", "id": 2, "method": "tasks/cancel", "params": {"id": task_id}},
        )
        assert canceled.json()["result"]["status"]["state"] == "canceled"
        assert await waited(model.stopped)
        found = await http.post(
            url + "/",
            json={"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": task_id}},
        )
    assert found.json()["result"]["status"]["state"] == "canceled"
