"""The cost ledger over HTTP: `GET /v1/usage` shows each user their own model calls, an
admin key every user's, as rows or grouped; a run stopped and resumed is recorded once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.server import Quota, create_app
from plait.stores import SqliteStore
from tests.server.quota_support import CALL_COST, Clock, make_quota_agents, run
from tests.server.support import ServerThread, client

pytestmark = pytest.mark.timeout(60)

KEYS = {"key-alice": "alice", "key-bob": "bob", "key-root": "root"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Clock]]:
    """Start a server where alice has a budget of two model calls a day; root is an admin."""
    clock = Clock()
    app = create_app(
        make_quota_agents([]),
        store=SqliteStore(tmp_path / "plait.db"),
        api_keys=KEYS,
        admin_keys=["key-root"],
        quotas={"alice": Quota(model_calls_per_day=2)},
        clock=clock,
    )
    with ServerThread(app) as running:
        yield running.url, clock


def test_each_user_sees_their_calls_and_an_admin_sees_everyone_s(
    served: tuple[str, Clock],
) -> None:
    url, clock = served
    with (
        client(url, "key-alice") as alice,
        client(url, "key-bob") as bob,
        client(url, "key-root") as root,
    ):
        stopped = run(alice, "stepper")  # stopped by her budget after two calls
        run_id = stopped.headers["x-plait-checkpoint-id"]
        assert run(bob, "priced").json()["status"] == "completed"  # 4 calls, priced
        assert run(bob, "echo").json()["status"] == "completed"

        rows = alice.get("/v1/usage").json()["rows"]
        assert [(r["user"], r["agent"], r["run_id"]) for r in rows] == [
            ("alice", "stepper", run_id)
        ] * 2
        first = rows[0]
        assert set(first) == {
            "user", "agent", "model", "input_tokens", "output_tokens", "cost", "priced",
            "run_id", "time",
        }  # fmt: skip
        assert (first["model"], first["cost"], first["priced"]) == ("FunctionModel", 0.0, False)
        assert (first["input_tokens"], first["output_tokens"]) == (10, 5)

        models = bob.get("/v1/usage", params={"group_by": "model"}).json()["groups"]
        assert models == [
            {"model": "FunctionModel", "model_calls": 1, "input_tokens": 10,
             "output_tokens": 5, "cost": 0.0},
            {"model": "PricedModel", "model_calls": 4, "input_tokens": 40,
             "output_tokens": 20, "cost": pytest.approx(4 * CALL_COST)},
        ]  # fmt: skip

        users = root.get("/v1/usage", params={"group_by": "user"}).json()["groups"]
        assert [(g["user"], g["model_calls"]) for g in users] == [("alice", 2), ("bob", 5)]
        assert len(root.get("/v1/usage").json()["rows"]) == 7
        assert len(bob.get("/v1/usage").json()["rows"]) == 5  # bob is no admin

        clock.next_day()  # resumed the next day: the run goes on, its calls recorded once
        resumed = alice.post(
            f"/v1/runs/{stopped.json()['checkpoint_id']}/resume",
            json={"targets": {}, "stream": False},
        ).json()
        assert resumed["status"] == "completed"
        today = alice.get("/v1/usage").json()["rows"]
        assert [r["run_id"] for r in today] == [run_id] * 2
        days = alice.get(
            "/v1/usage", params={"from": "2026-05-01", "to": "2026-05-02", "group_by": "day"}
        ).json()["groups"]
        assert [(g["day"], g["model_calls"]) for g in days] == [
            ("2026-05-01", 2),
            ("2026-05-02", 2),
        ]
        agents = alice.get("/v1/usage", params={"from": "2026-05-01", "group_by": "agent"}).json()[
            "groups"
        ]
        assert agents == [
            {"agent": "stepper", "model_calls": 4, "input_tokens": 40, "output_tokens": 20,
             "cost": 0.0}
        ]  # fmt: skip


def test_a_bad_range_is_refused(served: tuple[str, Clock]) -> None:
    url, _ = served
    with client(url, "key-alice") as alice:
        bad = alice.get("/v1/usage", params={"from": "yesterday"})
        assert bad.status_code == 422
        assert "from" in bad.json()["error"]["message"]
        assert alice.get("/v1/usage", params={"group_by": "colour"}).status_code == 422
        backwards = alice.get("/v1/usage", params={"from": "2026-05-02", "to": "2026-05-01"})
        assert backwards.status_code == 422
        assert alice.get("/v1/usage", params={"from": "2020-01-01"}).status_code == 422
