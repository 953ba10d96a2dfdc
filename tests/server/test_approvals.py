"""The approvals routes: each user's inbox, rules and audit log, and resumes answered by the
authenticated user."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from plait import ChatModelAgent, Message, tool
from plait.server import create_app
from plait.stores import SqliteStore
from plait.testing import FunctionModel, call
from plait.tools.base import ToolInfo

KEYS = {"key-alice": "alice", "key-bob": "bob"}


def shop(charges: list[int]) -> ChatModelAgent:
    """Return an agent that charges the amount the user names (with approval), then says
    what the tool answered."""

    @tool(effect="once", approval=True)
    def charge(cents: int) -> str:
        """Charge the customer."""
        charges.append(cents)
        return f"charged {cents}"

    def model(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
        if messages[-1].role == "tool":
            return f"result: {messages[-1].content}"
        cents = int(messages[-1].content.split()[-1])
        return call("charge", {"cents": cents})

    return ChatModelAgent("shop", FunctionModel(model), tools=[charge])


@pytest.fixture
def charges() -> list[int]:
    return []


@pytest.fixture
def app(tmp_path: Path, charges: list[int]) -> Any:
    return create_app(shop(charges), store=SqliteStore(tmp_path / "plait.db"), api_keys=KEYS)


@pytest.fixture
def alice(app: Any) -> Iterator[TestClient]:
    with TestClient(app, headers={"authorization": "Bearer key-alice"}) as http:
        yield http


@pytest.fixture
def bob(app: Any) -> Iterator[TestClient]:
    with TestClient(app, headers={"authorization": "Bearer key-bob"}) as http:
        yield http


def _pay(http: TestClient, cents: int) -> dict[str, Any]:
    response = http.post("/v1/agents/shop/runs", json={"input": f"pay {cents}", "stream": False})
    assert response.status_code == 200, response.text
    summary: dict[str, Any] = response.json()
    return {**summary, "run_id": response.headers["x-plait-checkpoint-id"]}


def _resume(http: TestClient, checkpoint_id: str, value: Any) -> Any:
    return http.post(f"/v1/runs/{checkpoint_id}/resume", json={"value": value, "stream": False})


def test_each_user_sees_only_their_own_inbox_and_answers_it(
    alice: TestClient, bob: TestClient, charges: list[int]
) -> None:
    first, second = _pay(alice, 500), _pay(alice, 700)
    assert first["status"] == second["status"] == "paused"
    inbox = alice.get("/v1/approvals").json()
    assert [(q["checkpoint_id"], q["tool"], q["arguments"], q["kind"]) for q in inbox] == [
        (first["checkpoint_id"], "charge", {"cents": 500}, "approval"),
        (second["checkpoint_id"], "charge", {"cents": 700}, "approval"),
    ]
    question = first["interrupts"][0]
    assert inbox[0]["interrupt_id"] == question["id"]
    assert inbox[0]["fingerprint"] == question["info"]["approval"]["fingerprint"]
    assert (inbox[0]["agent"], inbox[0]["expires_at"]) == ("shop", None)
    assert bob.get("/v1/approvals").json() == []
    answer = {"approved": True, "fingerprint": inbox[0]["fingerprint"]}
    assert _resume(bob, first["checkpoint_id"], answer).status_code == 404
    altered = {"approved": True, "fingerprint": inbox[1]["fingerprint"]}
    refused = _resume(alice, first["checkpoint_id"], altered)
    assert refused.status_code == 400 and "fingerprint" in refused.text
    assert len(alice.get("/v1/approvals").json()) == 2  # still pending
    done = _resume(alice, first["checkpoint_id"], answer)
    assert done.json()["final_output"] == "result: charged 500"
    assert _resume(alice, first["checkpoint_id"], answer).status_code == 409  # a replay
    assert charges == [500]
    assert [q["checkpoint_id"] for q in alice.get("/v1/approvals").json()] == [
        second["checkpoint_id"]
    ]
    [entry] = alice.get("/v1/audit").json()
    assert (entry["decision"], entry["approver"], entry["via"], entry["arguments"]) == (
        "approved",
        "alice",
        "resume",
        {"cents": 500},
    )
    assert (entry["checkpoint_id"], entry["interrupt_id"]) == (
        first["checkpoint_id"],
        question["id"],
    )
    assert bob.get("/v1/audit").json() == []


def test_a_rule_approves_its_users_calls_without_a_pause(
    alice: TestClient, bob: TestClient, charges: list[int]
) -> None:
    assert alice.post("/v1/approvals/rules", json={"tool": "charge"}).json() == {
        "tools": ["charge"]
    }
    done = _pay(alice, 300)
    assert (done["status"], done["final_output"]) == ("completed", "result: charged 300")
    assert _pay(bob, 400)["status"] == "paused"  # alice's rule is hers
    assert bob.get("/v1/approvals/rules").json() == {"tools": []}
    [entry] = alice.get("/v1/audit").json()
    assert (entry["decision"], entry["approver"], entry["via"], entry["interrupt_id"]) == (
        "approved",
        "alice",
        "rule",
        None,
    )
    assert entry["checkpoint_id"] == done["run_id"]
    assert alice.delete("/v1/approvals/rules/charge").status_code == 204
    assert alice.get("/v1/approvals/rules").json() == {"tools": []}
    assert _pay(alice, 600)["status"] == "paused"
    assert charges == [300]


def test_a_rejection_names_the_user_and_the_audit_is_newest_first(
    alice: TestClient, charges: list[int]
) -> None:
    for cents in (100, 200):
        paused = _pay(alice, cents)
        fingerprint = paused["interrupts"][0]["info"]["approval"]["fingerprint"]
        answer = {"approved": False, "fingerprint": fingerprint, "comment": f"not {cents}"}
        done = _resume(alice, paused["checkpoint_id"], answer).json()
        assert done["final_output"] == f"result: rejected by alice: not {cents}"
    assert charges == []
    audit = alice.get("/v1/audit").json()
    assert [(e["decision"], e["arguments"]) for e in audit] == [
        ("rejected", {"cents": 200}),
        ("rejected", {"cents": 100}),
    ]
    assert [e["arguments"] for e in alice.get("/v1/audit", params={"limit": 1}).json()] == [
        {"cents": 200}
    ]
    assert alice.get("/v1/audit", params={"limit": 0}).status_code == 422


def test_the_routes_need_a_key_and_a_well_formed_rule(alice: TestClient, app: Any) -> None:
    with TestClient(app) as anonymous:
        for path in ("/v1/approvals", "/v1/audit", "/v1/approvals/rules"):
            assert anonymous.get(path).status_code == 401
    assert alice.post("/v1/approvals/rules", json={}).status_code == 422
    assert alice.post("/v1/approvals/rules", json={"tool": "a/b"}).status_code == 422
    paths = alice.get("/openapi.json").json()["paths"]
    assert {"/v1/approvals", "/v1/approvals/rules", "/v1/audit"} <= set(paths)


def test_the_inbox_spans_workers_sharing_a_store(tmp_path: Path, charges: list[int]) -> None:
    headers = {"authorization": "Bearer key-alice"}
    apps = [
        create_app(shop(charges), store=SqliteStore(tmp_path / "shared.db"), api_keys=KEYS)
        for _ in range(2)
    ]
    with TestClient(apps[0], headers=headers) as one, TestClient(apps[1], headers=headers) as two:
        paused = _pay(one, 900)
        [question] = two.get("/v1/approvals").json()
        assert question["checkpoint_id"] == paused["checkpoint_id"]
        answer = {"approved": True, "fingerprint": question["fingerprint"]}
        done = _resume(two, question["checkpoint_id"], answer).json()
        assert done["final_output"] == "result: charged 900"
        assert one.get("/v1/approvals").json() == []
        assert [e["approver"] for e in one.get("/v1/audit").json()] == ["alice"]
    assert charges == [900]


def test_answered_approvals_leave_the_stored_inbox_of_workers_sharing_a_store(
    tmp_path: Path, charges: list[int]
) -> None:
    path = tmp_path / "shared.db"
    headers = {"authorization": "Bearer key-alice"}
    apps = [create_app(shop(charges), store=SqliteStore(path), api_keys=KEYS) for _ in range(2)]

    def stored() -> list[tuple[str, str]]:  # the inbox record, as the store holds it
        async def read() -> Any:
            async with SqliteStore(path) as store:
                return await store.get_session_record("alice/s/plait.effects/inbox")

        found = asyncio.run(read())
        items = [] if found is None else json.loads(found.data)["items"]
        return [(i["checkpoint_id"], i["interrupt_id"]) for i in items]

    with TestClient(apps[0], headers=headers) as one, TestClient(apps[1], headers=headers) as two:
        waiting = [_pay(one, 1), _pay(two, 2)]
        open_ids = [(w["checkpoint_id"], w["interrupts"][0]["id"]) for w in waiting]
        assert stored() == open_ids
        for n in range(40):
            asks, answers = (one, two) if n % 2 else (two, one)
            paused = _pay(asks, 100 + n)
            assert len(stored()) == 3
            question = paused["interrupts"][0]["info"]["approval"]
            answer = {"approved": n % 4 != 3, "fingerprint": question["fingerprint"]}
            done = _resume(answers, paused["checkpoint_id"], answer).json()
            assert done["status"] == "completed", done
            assert stored() == open_ids
        for http in (one, two):
            inbox = http.get("/v1/approvals").json()
            assert [(q["checkpoint_id"], q["interrupt_id"]) for q in inbox] == open_ids
    assert len(charges) == 30
