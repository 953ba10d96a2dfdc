"""Time travel over HTTP: `GET /v1/runs/{id}/history` lists a run's kept steps and `POST
/v1/runs/{id}/fork` starts a new run from one, answering like a resume."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from plait import AgentContext, AgentEvent, ChatModelAgent, Message, ToolInfo, tool
from plait.core.agent import Agent
from plait.server import create_app
from plait.stores import SqliteStore
from plait.testing import FunctionModel, call
from tests.server.support import ServerThread, client, stream_run

pytestmark = pytest.mark.timeout(60)

KEYS = {"key-alice": "alice", "key-bob": "bob"}


@tool
def add(ctx: AgentContext, a: int, b: int) -> str:
    """Add two numbers, in the session's unit."""
    return f"{a + b}{ctx.session_values.get('unit', '')}"


def _counting(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
    """Call `add` three times, then answer with the results."""
    results = [m.content for m in messages if m.role == "tool"]
    if len(results) < 3:
        return call("add", {"a": len(results), "b": 1}, id=f"call-{len(results)}")
    return "results: " + ", ".join(results)


def counting_agent() -> Agent:
    """Return the agent these tests run: three tool rounds, each a kept step."""
    return ChatModelAgent("calc", FunctionModel(_counting), description="Adds.", tools=[add])


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = SqliteStore(Path(tmp_path_factory.mktemp("travel")) / "plait.db")
    app = create_app(counting_agent(), store=store, api_keys=KEYS)
    with ServerThread(app) as running:
        yield running.url


@pytest.fixture
def alice(base_url: str) -> Iterator[httpx.Client]:
    with client(base_url, "key-alice") as http:
        yield http


@pytest.fixture
def bob(base_url: str) -> Iterator[httpx.Client]:
    with client(base_url, "key-bob") as http:
        yield http


def _run(http: httpx.Client, unit: str = "m") -> str:
    """Run the agent to its end; return the run's id."""
    body = {"input": "go", "session_values": {"unit": unit}, "stream": False}
    response = http.post("/v1/agents/calc/runs", json=body)
    assert response.json()["final_output"] == f"results: 1{unit}, 2{unit}, 3{unit}"
    return response.headers["x-plait-checkpoint-id"]


def _error(response: httpx.Response, status: int, type: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["type"] == type


def test_the_history_lists_each_step_with_its_agent_event_and_values(
    alice: httpx.Client,
) -> None:
    run_id = _run(alice)
    response = alice.get(f"/v1/runs/{run_id}/history")
    assert response.status_code == 200
    steps: list[dict[str, Any]] = response.json()
    assert [(s["step"], s["agent"], s["session_values"]) for s in steps] == [
        (1, "calc", {"unit": "m"}),
        (2, "calc", {"unit": "m"}),
        (3, "calc", {"unit": "m"}),
    ]
    events = [AgentEvent.from_json(json.dumps(s["event"])) for s in steps]
    texts = [e.message.message.content for e in events if e.message and e.message.message]
    assert texts == ["1m", "2m", "3m"]


def test_a_fork_answers_like_a_resume_and_leaves_the_original_as_it_was(
    alice: httpx.Client,
) -> None:
    run_id = _run(alice)
    before = alice.get(f"/v1/runs/{run_id}/history").json()
    summary_before = alice.get(f"/v1/runs/{run_id}").json()
    body = {"step": 2, "session_values": {"unit": "km"}, "stream": False}
    response = alice.post(f"/v1/runs/{run_id}/fork", json=body)
    assert response.status_code == 200, response.text
    fork_id = response.headers["x-plait-checkpoint-id"]
    assert fork_id != run_id
    forked = response.json()
    assert (forked["status"], forked["final_output"]) == ("completed", "results: 1m, 2m, 3km")
    assert forked["agent"] == "calc" and forked["events"]
    assert alice.get(f"/v1/runs/{fork_id}").json()["status"] == "completed"
    assert [s["step"] for s in alice.get(f"/v1/runs/{fork_id}/history").json()] == [2, 3]
    assert alice.get(f"/v1/runs/{run_id}/history").json() == before
    assert alice.get(f"/v1/runs/{run_id}").json() == summary_before


def test_a_streamed_fork_sends_its_events_then_its_summary(alice: httpx.Client) -> None:
    run_id = _run(alice)
    response, events = stream_run(alice, f"/v1/runs/{run_id}/fork", {"step": 1})
    assert response.status_code == 200
    assert response.headers["x-plait-checkpoint-id"] not in ("", run_id)
    names = [name for name, _ in events]
    assert names[-1] == "run_end" and set(names[:-1]) == {"agent_event"}
    assert events[-1][1]["final_output"] == "results: 1m, 2m, 3m"


def test_another_users_run_and_unknown_steps_are_not_found(
    alice: httpx.Client, bob: httpx.Client
) -> None:
    run_id = _run(alice)
    _error(bob.get(f"/v1/runs/{run_id}/history"), 404, "CheckpointNotFound")
    _error(bob.post(f"/v1/runs/{run_id}/fork", json={"step": 1}), 404, "CheckpointNotFound")
    _error(alice.post(f"/v1/runs/{run_id}/fork", json={"step": 9}), 404, "CheckpointNotFound")
    _error(alice.get("/v1/runs/unknown/history"), 404, "CheckpointNotFound")
    _error(alice.post("/v1/runs/unknown/fork", json={"step": 1}), 404, "CheckpointNotFound")
    assert alice.post(f"/v1/runs/{run_id}/fork", json={"step": "1"}).status_code == 422
    assert alice.post(f"/v1/runs/{run_id}/fork", json={}).status_code == 422
    extra = {"step": 1, "what": True}
    assert alice.post(f"/v1/runs/{run_id}/fork", json=extra).status_code == 422
    # bob's own run of the same agent is his
    bob_run = _run(bob, unit="s")
    assert len(bob.get(f"/v1/runs/{bob_run}/history").json()) == 3
