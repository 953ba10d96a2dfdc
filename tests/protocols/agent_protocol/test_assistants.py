"""Assistants through the official langgraph-sdk client: served agents and stored,
versioned configurations, each user's own."""

from __future__ import annotations

import uuid

import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from tests.protocols.agent_protocol.support import SERVED, Served


async def test_each_served_agent_is_an_assistant(served: Served) -> None:
    found = await served.ann.assistants.search(limit=10)
    by_graph = {a["graph_id"]: a for a in found}
    assert set(by_graph) == SERVED
    assert by_graph["echo"]["assistant_id"] == str(uuid.uuid5(uuid.NAMESPACE_URL, "echo"))
    assert by_graph["echo"]["description"] == "Echoes the last message."
    assert await served.ann.assistants.count() == len(SERVED)
    assert await served.ann.assistants.count(graph_id="desk") == 1
    same = await served.ann.assistants.get(by_graph["asker"]["assistant_id"])
    assert same["graph_id"] == "asker"
    assert (await served.ann.assistants.get("asker"))["assistant_id"] == same["assistant_id"]


async def test_search_pages(served: Served) -> None:
    first = await served.ann.assistants.search(limit=2, sort_by="graph_id", sort_order="asc")
    rest = await served.ann.assistants.search(
        limit=10, offset=2, sort_by="graph_id", sort_order="asc"
    )
    assert [a["graph_id"] for a in first + rest] == sorted(SERVED)


async def test_a_team_draws_its_members(served: Served) -> None:
    graph = await served.ann.assistants.get_graph("desk")
    ids = {node["id"] for node in graph["nodes"]}
    assert {"desk", "desk/triage", "desk/billing"} <= ids
    assert any(edge["target"] == "desk/billing" for edge in graph["edges"])
    schemas = await served.ann.assistants.get_schemas("desk")
    assert schemas["graph_id"] == "desk"
    assert "messages" in schemas["input_schema"]["properties"]
    assert "instruction" in schemas["context_schema"]["properties"]


async def test_create_update_versions_and_latest(served: Served) -> None:
    made = await served.ann.assistants.create(
        "echo",
        config={"configurable": {"instruction": "Be brief.", "max_iterations": 2}},
        metadata={"team": "a"},
        name="brief echo",
    )
    assert made["version"] == 1
    assert uuid.UUID(made["assistant_id"]).version == 4
    key = made["assistant_id"]
    updated = await served.ann.assistants.update(key, metadata={"stage": "b"}, name="briefer")
    assert updated["version"] == 2
    assert updated["metadata"] == {"team": "a", "stage": "b"}
    assert updated["config"]["configurable"]["instruction"] == "Be brief."
    versions = await served.ann.assistants.get_versions(key)
    assert [v["version"] for v in versions] == [2, 1]
    back = await served.ann.assistants.set_latest(key, 1)
    assert (back["version"], back["name"]) == (1, "brief echo")
    assert (await served.ann.assistants.get(key))["name"] == "brief echo"
    assert await served.ann.assistants.count(metadata={"team": "a"}) == 1
    await served.ann.assistants.delete(key)
    with pytest.raises(NotFoundError):
        await served.ann.assistants.get(key)


async def test_an_unknown_configurable_key_is_refused(served: Served) -> None:
    with pytest.raises(UnprocessableEntityError):
        await served.ann.assistants.create("echo", config={"configurable": {"temperature": 1}})
    with pytest.raises(UnprocessableEntityError):
        await served.ann.assistants.create("echo", context={"max_iterations": 0})
    with pytest.raises(NotFoundError):
        await served.ann.assistants.create("nobody")


async def test_if_exists_and_a_served_agent_cannot_be_deleted(served: Served) -> None:
    key = str(uuid.uuid4())
    await served.ann.assistants.create("echo", assistant_id=key, name="one")
    with pytest.raises(ConflictError):
        await served.ann.assistants.create("echo", assistant_id=key)
    again = await served.ann.assistants.create("echo", assistant_id=key, if_exists="do_nothing")
    assert again["name"] == "one"
    with pytest.raises(ConflictError):
        await served.ann.assistants.delete(str(uuid.uuid5(uuid.NAMESPACE_URL, "echo")))


async def test_another_users_assistant_is_not_found(served: Served) -> None:
    made = await served.ann.assistants.create("echo", name="ann's")
    with pytest.raises(NotFoundError):
        await served.bob.assistants.get(made["assistant_id"])
    with pytest.raises(NotFoundError):
        await served.bob.assistants.update(made["assistant_id"], name="bob's")
    with pytest.raises(NotFoundError):
        await served.bob.assistants.delete(made["assistant_id"])
    assert await served.bob.assistants.count() == len(SERVED)
    assert await served.ann.assistants.count() == len(SERVED) + 1
