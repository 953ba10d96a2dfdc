"""`GET /v1/runs/{id}/turn`: a paused run's request, its turn so far, and for each pending
interrupt the agents on its path and the tool call that asked (from the run's checkpoint)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from plait import ChatModelAgent, tool
from plait.server import create_app
from plait.stores import MemoryStore
from plait.testing import ScriptedModel, call, reply
from tests.server.support import ServerThread, client
from tests.server.test_page_runs import page_agents

KEYS = {"key-alice": "alice", "key-bob": "bob"}


@tool(approval=True)
def deploy(version: str) -> str:
    """Deploy a version once a person approves.

    Args:
        version: The version.
    """
    return f"deployed {version}"


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    script = [call("deploy", {"version": "2.4.0"}), reply("Deployed.")]
    release = ChatModelAgent("release", ScriptedModel(script, per_run=True), tools=[deploy])
    app = create_app({**page_agents(), "release": release}, store=MemoryStore(), api_keys=KEYS)
    with ServerThread(app) as running:
        yield running.url


@pytest.fixture
def alice(base_url: str) -> Iterator[httpx.Client]:
    with client(base_url, "key-alice") as http:
        yield http


def _run(http: httpx.Client, agent: str, text: str, session: str | None = None) -> dict[str, Any]:
    body = {"input": text, "stream": False, "session_id": session}
    summary: dict[str, Any] = http.post(f"/v1/agents/{agent}/runs", json=body).json()
    return summary


def test_a_paused_runs_turn_names_the_agents_and_the_tool_call_that_asked(
    alice: httpx.Client,
) -> None:
    paused = _run(alice, "shipping", "ship the release", "s-1")
    assert paused["status"] == "paused"
    turn = alice.get(f"/v1/runs/{paused['checkpoint_id']}/turn").json()
    assert turn["run_id"] == turn["checkpoint_id"] == paused["checkpoint_id"]
    assert (turn["agent"], turn["session_id"]) == ("shipping", "s-1")
    assert [(m["author"], m["content"]) for m in turn["request"]] == [("user", "ship the release")]
    assert [m["author"] for m in turn["turn"]] == ["user", "lead"]
    assert turn["turn"][1]["tool_calls"][0]["name"] == "approver"
    (asked,) = turn["interrupts"]
    assert asked["interrupt_id"] == paused["interrupts"][0]["id"]
    assert asked["info"] == {"question": "Ship it?"}
    assert asked["agents"] == ["shipping", "lead", "approver"]
    assert asked["tool"] == "ask"
    assert asked["arguments"] == {"question": "Ship it?"}  # from the nested agent's record
    assert asked["call_id"] and asked["call_id"] in asked["address"]


def test_an_approvals_turn_has_its_call(alice: httpx.Client) -> None:
    paused = _run(alice, "release", "ship 2.4.0")
    (asked,) = alice.get(f"/v1/runs/{paused['checkpoint_id']}/turn").json()["interrupts"]
    assert (asked["agents"], asked["tool"]) == (["release"], "deploy")
    assert asked["arguments"] == {"version": "2.4.0"}
    assert asked["info"]["approval"]["arguments"] == {"version": "2.4.0"}


def test_a_run_without_a_checkpoint_or_of_another_user_is_not_found(
    alice: httpx.Client, base_url: str
) -> None:
    done = _run(alice, "counter", "count")
    assert done["status"] == "completed"
    run_id = alice.get("/v1/runs?status=completed").json()["runs"][0]["run_id"]
    gone = alice.get(f"/v1/runs/{run_id}/turn")
    assert gone.status_code == 404
    assert "keeps no checkpoint" in gone.json()["error"]["message"]
    assert alice.get("/v1/runs/nope/turn").status_code == 404
    paused = _run(alice, "shipping", "ship again")
    with client(base_url, "key-bob") as bob:
        assert bob.get(f"/v1/runs/{paused['checkpoint_id']}/turn").status_code == 404
