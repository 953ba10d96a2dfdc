"""`GET /v1/runs/{checkpoint_id}/spans`: a run's spans as this process kept them, for the
caller's own runs only, and `enabled` false when tracing keeps none."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NoOpTracerProvider

from plait import ChatModelAgent, interrupt, tool, tracing
from plait.server import create_app
from plait.stores import from_url
from plait.testing import FunctionModel, call, reply

KEYS = {"key-alice": "alice", "key-bob": "bob"}


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool
def approve(item: str) -> str:
    """Ask a person to approve.

    Args:
        item: What to approve.
    """
    return f"{item}: {interrupt({'approve': item})}"


def _calc(messages: list[Any], tools: Any) -> Any:
    if messages[-1].role == "tool":
        return reply(f"it is {messages[-1].content}")
    if messages[-1].content == "buy":
        return call("approve", {"item": "a book"})
    return call("add", {"a": 1, "b": 2})


def _agent() -> ChatModelAgent:
    return ChatModelAgent("calc", FunctionModel(_calc), tools=[add, approve], description="Adds.")


@pytest.fixture
def http() -> Iterator[TestClient]:
    """A server with two users, alice's key sent by default."""
    app = create_app([_agent()], store=from_url("memory://"), api_keys=KEYS)
    with TestClient(app, headers={"authorization": "Bearer key-alice"}) as client:
        yield client


@pytest.fixture
def traced() -> Iterator[None]:
    tracing.instrument(TracerProvider())
    yield
    tracing.uninstrument()


def _run(http: TestClient, text: str) -> dict[str, Any]:
    response = http.post("/v1/agents/calc/runs", json={"input": text, "stream": False})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    body["run_id"] = response.headers["x-plait-checkpoint-id"]
    return body


def _names(body: dict[str, Any]) -> list[str]:
    return [span["name"] for span in body["spans"]]


def test_the_spans_of_a_run_with_a_tool(http: TestClient, traced: None) -> None:
    run = _run(http, "1 + 2?")
    assert run["status"] == "completed" and run["final_output"] == "it is 3"
    response = http.get(f"/v1/runs/{run['run_id']}/spans")
    assert response.status_code == 200
    body = response.json()
    assert body["enabled"] is True
    assert _names(body) == [
        "invoke_agent calc",
        "chat FunctionModel",
        "execute_tool add",
        "chat FunctionModel",
    ]
    root, chat, tool_span, _ = body["spans"]
    assert root["parent_id"] is None
    assert {chat["parent_id"], tool_span["parent_id"]} == {root["span_id"]}
    assert len({span["trace_id"] for span in body["spans"]}) == 1
    assert tool_span["attributes"] == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": tool_span["attributes"]["gen_ai.tool.call.id"],
    }
    assert chat["attributes"]["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert chat["status"] == {"code": "UNSET", "description": None}
    for span in body["spans"]:
        assert root["start_ns"] <= span["start_ns"] <= span["end_ns"] <= root["end_ns"]
        assert span["duration_ms"] == pytest.approx((span["end_ns"] - span["start_ns"]) / 1e6)
        assert span["kind"] in ("internal", "client") and span["events"] == []


def test_a_paused_run_has_its_interrupt_and_a_resume_replaces_its_spans(
    http: TestClient, traced: None
) -> None:
    run = _run(http, "buy")
    assert run["status"] == "paused"
    paused = http.get(f"/v1/runs/{run['run_id']}/spans").json()
    assert _names(paused) == ["invoke_agent calc", "chat FunctionModel", "execute_tool approve"]
    assert [event["name"] for event in paused["spans"][0]["events"]] == ["interrupt"]

    answer = {"value": "yes", "stream": False}
    resumed = http.post(f"/v1/runs/{run['checkpoint_id']}/resume", json=answer)
    assert resumed.json()["final_output"] == "it is a book: yes"
    body = http.get(f"/v1/runs/{run['run_id']}/spans").json()
    assert _names(body) == ["invoke_agent calc", "execute_tool approve", "chat FunctionModel"]
    [link] = body["spans"][0]["links"]
    assert link["span_id"] == paused["spans"][0]["span_id"]


def test_without_tracing_spans_are_not_enabled(http: TestClient) -> None:
    run = _run(http, "1 + 2?")
    assert http.get(f"/v1/runs/{run['run_id']}/spans").json() == {
        "enabled": False,
        "spans": [],
    }


def test_tracing_on_a_provider_that_is_not_the_sdks_keeps_no_spans(http: TestClient) -> None:
    tracing.instrument(NoOpTracerProvider())
    try:
        run = _run(http, "1 + 2?")
        body = http.get(f"/v1/runs/{run['run_id']}/spans").json()
    finally:
        tracing.uninstrument()
    assert body == {"enabled": False, "spans": []}


def test_another_users_run_and_an_unknown_run_are_not_found(http: TestClient, traced: None) -> None:
    run = _run(http, "1 + 2?")
    path = f"/v1/runs/{run['run_id']}/spans"
    bob = {"authorization": "Bearer key-bob"}
    response = http.get(path, headers=bob)
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "CheckpointNotFound"
    assert http.get(path, headers={"authorization": "Bearer nobody"}).status_code == 401
    assert http.get("/v1/runs/no-such-run/spans").status_code == 404
    assert http.get(f"/v1/runs/{'x' * 200}/spans").status_code == 404
    assert http.get(path).status_code == 200  # alice's own
