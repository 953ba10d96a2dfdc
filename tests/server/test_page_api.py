"""What the dev page reads besides runs: an agent's input schema (the Agent Protocol's
`get_schemas`: the session values its agents read), the caller's memories (`GET /v1/memory`)
and the app's instance (`/ui/instance`, which changes when `plait dev` reloads the app)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from plait import ChatModelAgent, Team
from plait.examples.teams import research_graph
from plait.memory import RecallTool, SqliteMemoryService
from plait.server import create_app
from plait.stores import MemoryStore
from plait.testing import ScriptedModel
from tests.server.support import ServerThread, client

KEYS = {"key-alice": "alice", "key-bob": "bob"}
LOCAL = "http://localhost"  # a server without keys answers loopback names only


def _model() -> ScriptedModel:
    return ScriptedModel([])


async def _remember(path: Path) -> None:
    memory = SqliteMemoryService(path)
    try:
        await memory.add("alice", "Alice likes tea with lemon.", {"source": "chat"})
        await memory.add("alice", "Alice flies to Oslo in May.")
        await memory.add("bob", "Bob likes tea too.")
    finally:
        await memory.close()


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("memory") / "memory.db"
    asyncio.run(_remember(path))
    writer = ChatModelAgent("writer", _model(), instruction="Write for {audience}.")
    helper = ChatModelAgent(
        "helper",
        _model(),
        instruction="Help {customer} in a {tone?} tone; {{literal}} braces stay.",
        tools=[RecallTool(SqliteMemoryService(path))],
    )
    desk = Team.coordinator(helper, [writer], name="desk")
    agents = {"desk": desk, "research": research_graph(), "plain": ChatModelAgent("p", _model())}
    app = create_app(agents, store=MemoryStore(), api_keys=KEYS)
    with ServerThread(app) as running:
        yield running.url


@pytest.fixture
def alice(base_url: str) -> Iterator[httpx.Client]:
    with client(base_url, "key-alice") as http:
        yield http


def _input(http: httpx.Client, agent: str) -> dict[str, Any]:
    found: dict[str, Any] = http.get(f"/assistants/{agent}/schemas").json()["input_schema"]
    return found


def test_the_input_schema_names_the_session_values_the_agents_read(alice: httpx.Client) -> None:
    desk = _input(alice, "desk")
    assert set(desk["properties"]) == {"messages", "customer", "tone", "audience", "user_id"}
    assert desk["required"] == ["audience", "customer"]  # `{tone?}` is optional
    assert desk["properties"]["customer"] == {"type": "string"}
    assert desk["additionalProperties"] is True
    research = _input(alice, "research")
    assert set(research["properties"]) == {"messages", "requirements", "report"}
    assert research["properties"]["report"] == {"type": "string"}
    assert research["properties"]["messages"]["x-plait-reducer"] == "append"
    assert research["properties"]["messages"]["items"]["properties"]["role"]["enum"]
    plain = _input(alice, "plain")
    assert set(plain["properties"]) == {"messages"} and plain["required"] == []
    whole = alice.get("/assistants/research/schemas").json()
    assert whole["state_schema"] == research
    assert alice.get("/assistants/nobody/schemas").status_code == 404


def test_memory_is_searched_as_the_caller(alice: httpx.Client, base_url: str) -> None:
    found = alice.get("/v1/memory", params={"query": "tea"}).json()
    assert (found["enabled"], found["user"]) == (True, "alice")
    assert [item["text"] for item in found["items"]] == ["Alice likes tea with lemon."]
    assert found["items"][0]["metadata"] == {"source": "chat"}
    assert found["items"][0]["score"] > 1
    with client(base_url, "key-bob") as bob:
        theirs = bob.get("/v1/memory", params={"query": "tea"}).json()["items"]
    assert [item["text"] for item in theirs] == ["Bob likes tea too."]
    assert alice.get("/v1/memory", params={"query": "tea", "k": 0}).status_code == 422
    assert alice.get("/v1/memory").status_code == 422
    with client(base_url) as nobody:
        assert nobody.get("/v1/memory", params={"query": "tea"}).status_code == 401


def test_without_a_memory_service_memory_says_so() -> None:
    app = create_app(ChatModelAgent("a", _model()), store=MemoryStore())
    with TestClient(app, base_url=LOCAL) as http:
        found = http.get("/v1/memory", params={"query": "tea"}).json()
    assert found == {"enabled": False, "user": "local", "items": []}


def test_each_app_has_an_instance_of_its_own() -> None:
    agent = ChatModelAgent("a", _model())
    seen = []
    for _ in range(2):  # as `plait dev` makes a new app on each reload
        app = create_app(agent, store=MemoryStore(), api_keys=KEYS, ui=True)
        with TestClient(app, base_url=LOCAL) as http:
            first, again = http.get("/ui/instance"), http.get("/ui/instance")
        assert first.status_code == 200  # no key: it holds no data
        assert first.json() == again.json()
        assert first.headers["cache-control"] == "no-cache"
        seen.append(first.json()["instance"])
    assert seen[0] != seen[1]
    assert all(len(instance) == 32 for instance in seen)
