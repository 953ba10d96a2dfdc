"""A `plait serve` worker stopped (SIGTERM) or killed (SIGKILL) in the middle of a run,
with another worker on the same store (PostgreSQL, and one SQLite file): the other worker
reports the run `interrupted`, does not leave its thread busy, starts the runs queued on
it, and the thread goes on from the run's last step without running a finished tool call
again; through `/v1` the killed run resumes from that step on the other worker. The
workers' leases are short here (`--run-lease`), so a killed worker's runs are taken over
within seconds; the tests wait for that, as long as it takes, with a failsafe bound."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.protocols.agent_protocol.test_double_texting import _ask, _texts
from tests.protocols.agent_protocol.workers_support import Workers, serve_workers, until

pytestmark = pytest.mark.timeout(240)

#: The workers' lease (seconds): short, so a killed worker's runs are taken over soon, and
#: long enough that a live worker on a busy machine renews it in time.
LEASE = 6.0
#: The stepper's thread once it went on after the stop: its first step once, then the
#: blocking call made again (the stopped one got no result and is left out), then its answer.
_WENT_ON = [
    ("human", "go"),
    ("ai", ""),
    ("tool", "stepped"),
    ("ai", ""),
    ("tool", "released"),
    ("ai", "done"),
]


@pytest.fixture(params=["postgres", "sqlite"])
async def workers(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Workers]:
    """Workers A and B with short leases, on a store of this test's own."""
    async with serve_workers(request.param, tmp_path, run_lease=LEASE) as found:
        yield found


async def _blocked(workers: Workers) -> None:
    """Wait until the stepper's run is in its blocking call (after its first step)."""

    async def blocking() -> bool:
        return len(workers.calls("block")) == 1

    await until(blocking, "the blocking call")
    assert len(workers.calls("step")) == 1


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_the_other_worker_goes_on_with_a_stopped_workers_thread_and_queue(
    workers: Workers, sig: signal.Signals
) -> None:
    a, b = workers.a, workers.b
    key = (await a.ann.threads.create())["thread_id"]
    run = await a.ann.runs.create(key, "stepper", input=_ask("go"))
    await _blocked(workers)
    queued = await a.ann.runs.create(
        key, "stepper", input={"messages": []}, multitask_strategy="enqueue"
    )
    assert queued["status"] == "pending"
    # SIGTERM: A stops its run at a safe point and leaves its queue; SIGKILL: A is gone
    assert a.stop(sig) == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    workers.release()

    async def went_on() -> bool:  # B starts the queued run by itself
        return (await b.ann.runs.get(key, queued["run_id"]))["status"] == "success"

    await until(went_on, "the queued run on B")
    assert (await b.ann.runs.get(key, run["run_id"]))["status"] == "interrupted"
    assert (await b.ann.threads.get(key))["status"] == "idle"
    values = (await b.ann.threads.get_state(key))["values"]
    assert _texts(values) == _WENT_ON
    assert len(workers.calls("step")) == 1  # the finished tool call did not run again
    [on_a, on_b] = [line.split()[1] for line in workers.calls("block")]
    assert on_a != on_b


async def test_a_killed_workers_thread_takes_a_new_run_once_its_lease_ran_out(
    workers: Workers,
) -> None:
    a, b = workers.a, workers.b
    key = (await a.ann.threads.create())["thread_id"]
    run = await a.ann.runs.create(key, "stepper", input=_ask("go"))
    await _blocked(workers)
    a.stop(signal.SIGKILL)

    async def released() -> bool:  # once A's lease ran out, B reads the run as stopped
        return (await b.ann.runs.get(key, run["run_id"]))["status"] == "interrupted"

    await until(released, "the killed run's end")
    assert (await b.ann.threads.get(key))["status"] == "idle"
    workers.release()
    values = await b.ann.runs.wait(key, "stepper", input={"messages": []})
    assert _texts(values) == _WENT_ON
    assert len(workers.calls("step")) == 1


async def test_a_killed_workers_run_resumes_on_the_other_from_its_last_step(
    workers: Workers,
) -> None:
    headers = {"authorization": "Bearer key-ann"}
    async with (
        httpx.AsyncClient(base_url=workers.a.url, headers=headers, timeout=60) as on_a,
        httpx.AsyncClient(base_url=workers.b.url, headers=headers, timeout=60) as on_b,
    ):
        body = {"input": "go", "stream": True}
        async with on_a.stream("POST", "/v1/agents/stepper/runs", json=body) as response:
            checkpoint = response.headers["x-plait-checkpoint-id"]
            await _blocked(workers)
            workers.a.stop(signal.SIGKILL)
        assert (await on_b.get(f"/v1/runs/{checkpoint}")).json()["status"] in (
            "running",
            "cancelled",
        )

        async def taken_over() -> dict | None:
            summary = (await on_b.get(f"/v1/runs/{checkpoint}")).json()
            return summary if summary["status"] == "cancelled" else None

        summary = await until(taken_over, "the killed run's end")
        assert summary["checkpoint_id"] == checkpoint
        assert summary["error"]["type"] == "RunCancelled"
        workers.release()
        resumed = await on_b.post(f"/v1/runs/{checkpoint}/resume", json={"stream": False})
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["status"] == "completed"
        assert resumed.json()["final_output"] == "done"
        again = await on_b.post(f"/v1/runs/{checkpoint}/resume", json={"stream": False})
        assert again.status_code == 409
    assert len(workers.calls("step")) == 1
    assert len(workers.calls("block")) == 2
