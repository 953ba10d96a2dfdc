"""Two servers on one store serve each other's runs: one SQLite file, or PostgreSQL.

The PostgreSQL server is `PLAIT_TEST_POSTGRES_DSN` (default
`postgresql://postgres@127.0.0.1:5432/test`); those tests skip when none answers. Each test
uses tables of its own and drops them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from plait.server import create_app
from plait.stores import Store
from tests.server.conftest import KEYS
from tests.server.support import (
    WAIT,
    BackgroundStream,
    Controls,
    ServerThread,
    client,
    make_agents,
    parse_sse,
    wait_for_status,
)

pytestmark = pytest.mark.timeout(90)

DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def _postgres_pair() -> Iterator[tuple[Store, Store]]:
    psycopg = pytest.importorskip("psycopg")
    from plait.stores import PostgresStore

    try:
        psycopg.connect(DSN, connect_timeout=5).close()
    except psycopg.Error as exc:
        pytest.skip(f"no PostgreSQL server at {DSN}: {exc}")
    prefix = f"plait_srv_{uuid.uuid4().hex[:12]}_"
    yield PostgresStore(DSN, table_prefix=prefix), PostgresStore(DSN, table_prefix=prefix)
    with psycopg.connect(DSN, autocommit=True) as connection:
        for table in ("checkpoints", "sessions", "schema_version"):
            connection.execute(f"DROP TABLE IF EXISTS {prefix}{table}")


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    """Return two stores on the same data (two processes' worth)."""
    if request.param == "sqlite":
        from plait.stores import SqliteStore

        yield SqliteStore(tmp_path / "shared.db"), SqliteStore(tmp_path / "shared.db")
    else:
        yield from _postgres_pair()


@pytest.fixture
def servers(stores: tuple[Store, Store]) -> Iterator[tuple[httpx.Client, httpx.Client, Controls]]:
    """Start servers A and B on the two stores; return alice's client of each."""
    controls = Controls()
    store_a, store_b = stores
    app_a = create_app(make_agents(controls), store=store_a, api_keys=KEYS)
    app_b = create_app(make_agents(controls), store=store_b, api_keys=KEYS)
    with (
        ServerThread(app_a) as a,
        ServerThread(app_b) as b,
        client(a.url, "key-alice") as on_a,
        client(b.url, "key-alice") as on_b,
    ):
        yield on_a, on_b, controls
        controls.release.set()


Servers = tuple[httpx.Client, httpx.Client, Controls]


def test_a_run_paused_on_one_server_resumes_on_the_other(servers: Servers) -> None:
    on_a, on_b, _ = servers
    session_id = f"s-{uuid.uuid4().hex}"
    body = {"input": "approve ship", "session_id": session_id, "stream": False}
    paused = on_a.post("/v1/agents/helper/runs", json=body).json()
    checkpoint_id = paused["checkpoint_id"]
    assert on_b.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "paused"
    resumed = on_b.post(f"/v1/runs/{checkpoint_id}/resume", json={"value": "go", "stream": False})
    assert resumed.status_code == 200
    assert resumed.json()["final_output"] == "done: ship=go"
    assert on_a.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "completed"
    assert on_a.post(f"/v1/runs/{checkpoint_id}/resume", json={"value": 1}).status_code == 409
    assert session_id in [s["session_id"] for s in on_a.get("/v1/sessions").json()]
    assert len(on_a.get(f"/v1/sessions/{session_id}").json()["messages"]) == 4


def test_a_cancel_sent_to_one_server_stops_a_run_on_the_other(servers: Servers) -> None:
    on_a, on_b, controls = servers
    run = BackgroundStream(on_a, "/v1/agents/helper/runs", {"input": "slow"})
    assert run.started.wait(WAIT) and controls.slow_started.wait(WAIT)
    cancel = on_b.post(f"/v1/runs/{run.checkpoint_id}/cancel")
    assert cancel.status_code == 202 and cancel.json()["status"] == "running"
    end = run.join()[-1][1]
    assert end["status"] == "cancelled" and end["error"]["type"] == "RunCancelled"
    assert on_b.get(f"/v1/runs/{run.checkpoint_id}").json() == end
    resumed = on_b.post(f"/v1/runs/{end['checkpoint_id']}/resume", json={"stream": False})
    assert resumed.json()["final_output"] == "done: slow work done"


def _resume_with_y(http: httpx.Client, path: str) -> httpx.Response:
    return http.post(path, json={"value": "y", "stream": False})


def test_concurrent_resumes_on_two_servers_one_wins(servers: Servers) -> None:
    on_a, on_b, _ = servers
    for _ in range(3):
        paused = on_a.post("/v1/agents/helper/runs", json={"input": "approve x", "stream": False})
        path = f"/v1/runs/{paused.json()['checkpoint_id']}/resume"
        with ThreadPoolExecutor(2) as pool:
            responses = list(pool.map(_resume_with_y, [on_a, on_b], [path] * 2))
        assert sorted(r.status_code for r in responses) == [200, 409], [r.text for r in responses]


def test_a_run_left_by_its_client_on_one_server_is_read_on_the_other(servers: Servers) -> None:
    on_a, on_b, controls = servers
    with on_a.stream("POST", "/v1/agents/helper/runs", json={"input": "block"}) as response:
        checkpoint_id = response.headers["x-plait-checkpoint-id"]
        next(parse_sse(response.iter_lines()))
        assert controls.blocked.wait(WAIT)
    assert on_b.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "running"
    controls.release.set()
    summary = wait_for_status(on_b, checkpoint_id, "completed", "failed")
    assert summary["status"] == "completed" and summary["final_output"] == "done: unblocked"


def test_runs_started_at_once_on_both_servers_are_all_listed_once(servers: Servers) -> None:
    on_a, on_b, _ = servers

    def start(i: int) -> str:
        http = on_a if i % 2 else on_b
        text = "approve job" if i % 5 == 0 else f"hello {i}"
        response = http.post("/v1/agents/helper/runs", json={"input": text, "stream": False})
        assert response.status_code == 200, response.text
        return response.headers["x-plait-checkpoint-id"]

    with ThreadPoolExecutor(max_workers=8) as pool:
        started = set(pool.map(start, range(30)))
    for http in (on_a, on_b):
        seen: list[str] = []
        cursor = None
        while True:
            params: dict[str, object] = {"limit": 7}
            if cursor is not None:
                params["cursor"] = cursor
            page = http.get("/v1/runs", params=params).json()
            seen += [run["run_id"] for run in page["runs"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == len(set(seen)) == 30
        assert set(seen) == started
        paused = http.get("/v1/runs", params={"status": "paused"}).json()["runs"]
        assert len(paused) == 6
