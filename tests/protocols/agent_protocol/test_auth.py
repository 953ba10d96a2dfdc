"""The key of the langgraph-sdk client (`x-api-key`) on every route."""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import AuthenticationError

from tests.protocols.agent_protocol.support import SERVED, Served


async def test_the_sdk_key_header_is_accepted(served: Served) -> None:
    agents = await served.ann.http.get("/v1/agents")
    assert {agent["name"] for agent in agents} == SERVED


async def test_a_wrong_sdk_key_is_refused(served: Served) -> None:
    async with get_client(url=served.url, api_key="key-nobody") as stranger:
        with pytest.raises(AuthenticationError):
            await stranger.http.get("/v1/agents")


def test_a_bearer_key_wins_over_the_header(served: Served) -> None:
    headers = {"authorization": "Bearer wrong", "x-api-key": "key-ann"}
    response = httpx.get(f"{served.url}/v1/agents", headers=headers)
    assert response.status_code == 401


def _stream(served: Served, headers: dict[str, str], body: object) -> httpx.Response:
    thread = "door-thread"
    url = f"{served.url}/threads/{thread}/runs/stream"
    return httpx.post(url, json=body, headers=headers)


_RUN = {"assistant_id": "echo", "input": {"messages": [{"role": "user", "content": "hi"}]}}


async def test_a_streamed_thread_run_is_the_key_s_user_s(served: Served) -> None:
    body = {**_RUN, "if_not_exists": "create", "unknown_option": 1}  # extra fields: ignored
    started = _stream(served, {"x-api-key": "key-ann"}, body)
    assert started.status_code == 200, started.text
    assert "echo: hi" in started.text and "event: end" in started.text
    assert (await served.ann.threads.get("door-thread"))["thread_id"] == "door-thread"
    assert (await served.bob.threads.search()) == []


def test_what_the_stream_route_s_door_does_not_take_is_the_route_s_answer(
    served: Served,
) -> None:
    key = {"x-api-key": "key-ann"}
    assert _stream(served, {}, _RUN).status_code == 401
    assert _stream(served, {"x-api-key": "key-nobody"}, _RUN).status_code == 401
    missing = _stream(served, key, {"input": None})
    assert missing.status_code == 422
    assert "assistant_id" in missing.text
    assert _stream(served, key, {**_RUN, "after_seconds": 5}).status_code == 501
    assert _stream(served, key, _RUN).status_code == 404  # no such thread, none created
