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
