"""Two `plait serve` processes on one PostgreSQL store serve each other's runs.

A run paused on worker A is resumed on worker B; two concurrent resumes of one checkpoint
(one on each worker) give exactly one 200 and one 409; a cancel sent to B stops a run that
streams from A. The PostgreSQL server is `PLAIT_TEST_POSTGRES_DSN` (default
`postgresql://postgres@127.0.0.1:5432/test`); these tests skip when none answers. The
workers use tables of their own, dropped at the end.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.cli.support import ServeProcess, sse_items, target

pytest.importorskip("uvicorn")
psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.timeout(180)

DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="module")
def store_url() -> Iterator[str]:
    """Return the URL of a PostgreSQL store on tables of this module's own."""
    try:
        psycopg.connect(DSN, connect_timeout=5).close()
    except psycopg.Error as exc:
        pytest.skip(f"no PostgreSQL server at {DSN}: {exc}")
    prefix = f"plait_cli_{uuid.uuid4().hex[:10]}_"
    yield f"{DSN}?table_prefix={prefix}"
    with psycopg.connect(DSN, autocommit=True) as connection:
        for table in ("checkpoints", "sessions", "schema_version"):
            connection.execute(f"DROP TABLE IF EXISTS {prefix}{table}")


@pytest.fixture(scope="module")
def worker_logs(
    store_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[ServeProcess]]:
    """Start workers A and B on the store (stopped at the end of the module)."""
    logs = tmp_path_factory.mktemp("workers")
    args = [target("helper"), "--store", store_url]
    with ServeProcess(args, logs) as a, ServeProcess(args, logs) as b:
        assert a.url != b.url
        yield [a, b]


@pytest.fixture(scope="module")
def workers(worker_logs: list[ServeProcess]) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Return a client of worker A and one of worker B."""
    a, b = worker_logs
    with (
        httpx.Client(base_url=a.url, timeout=30) as on_a,
        httpx.Client(base_url=b.url, timeout=30) as on_b,
    ):
        yield on_a, on_b


def _post(path: str, body: dict[str, object], http: httpx.Client) -> httpx.Response:
    return http.post(path, json=body)


def _paused(http: httpx.Client, text: str) -> str:
    """Start a run that pauses; return its checkpoint id."""
    summary = http.post("/v1/agents/helper/runs", json={"input": text, "stream": False}).json()
    assert summary["status"] == "paused", summary
    return str(summary["checkpoint_id"])


def test_a_run_paused_on_one_worker_is_resumed_on_the_other(
    workers: tuple[httpx.Client, httpx.Client],
) -> None:
    on_a, on_b = workers
    checkpoint = _paused(on_a, "approve the invoice")
    assert on_b.get(f"/v1/runs/{checkpoint}").json()["status"] == "paused"
    body = {"value": "granted"}
    with on_b.stream("POST", f"/v1/runs/{checkpoint}/resume", json=body) as response:
        assert response.status_code == 200
        items = list(sse_items(response.iter_lines()))
    name, summary = items[-1]
    assert name == "run_end"
    assert summary["status"] == "completed"
    assert summary["final_output"] == "done: the invoice=granted"
    assert on_a.get(f"/v1/runs/{checkpoint}").json()["status"] == "completed"


def test_two_concurrent_resumes_of_one_checkpoint_give_one_200_and_one_409(
    workers: tuple[httpx.Client, httpx.Client],
) -> None:
    on_a, on_b = workers
    for attempt in range(3):  # the two requests race on every attempt
        checkpoint = _paused(on_a, f"approve round {attempt}")
        body = {"value": attempt, "stream": False}
        resume = functools.partial(_post, f"/v1/runs/{checkpoint}/resume", body)
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(resume, (on_a, on_b)))
        statuses = sorted(r.status_code for r in answers)
        assert statuses == [200, 409], [r.text for r in answers]
        winner = next(r for r in answers if r.status_code == 200).json()
        loser = next(r for r in answers if r.status_code == 409).json()
        assert winner["final_output"] == f"done: round {attempt}={attempt}"
        assert loser["error"]["type"] == "CheckpointAlreadyResumed"


def test_a_cancel_sent_to_one_worker_stops_a_run_streaming_from_the_other(
    workers: tuple[httpx.Client, httpx.Client],
) -> None:
    on_a, on_b = workers
    with on_a.stream("POST", "/v1/agents/helper/runs", json={"input": "slow"}) as response:
        checkpoint = response.headers["x-plait-checkpoint-id"]
        items = sse_items(response.iter_lines())
        _, event = next(items)  # the model called the slow tool: it is working now
        assert event["output"]["message"]["message"]["tool_calls"][0]["name"] == "slow"
        cancel = on_b.post(f"/v1/runs/{checkpoint}/cancel")
        assert cancel.status_code == 202
        assert cancel.json() == {"checkpoint_id": checkpoint, "status": "running"}
        rest = list(items)
    name, summary = rest[-1]
    assert name == "run_end"
    assert summary["status"] == "cancelled"
    assert summary["error"]["type"] == "RunCancelled"
    # the stop cancelled the tool in flight: no result, and resuming runs the call again
    assert not [e for n, e in rest if n == "agent_event" and e["output"]]
    assert on_b.get(f"/v1/runs/{checkpoint}").json()["status"] == "cancelled"
    resumed = on_b.post(f"/v1/runs/{summary['checkpoint_id']}/resume", json={"stream": False})
    assert resumed.json()["final_output"] == "done: ran again after a stop"


def test_the_workers_logged_no_errors(
    workers: tuple[httpx.Client, httpx.Client], worker_logs: list[ServeProcess]
) -> None:
    for http in workers:
        assert http.get("/healthz").json() == {"status": "ok"}
    for worker in worker_logs:
        assert "Traceback" not in worker.stderr and "ERROR" not in worker.stderr, worker.stderr
