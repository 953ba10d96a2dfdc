"""Worker leases (`plait.server.leases`): a worker renews its lease while its runs run, so
another worker sharing the store never takes over a live run, however long it runs; a run
lease must be positive. (A killed worker's runs being taken over is tested with real
processes: tests/protocols/agent_protocol/test_worker_loss.py.)"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest

from plait.errors import UsageError
from plait.server import create_app
from plait.stores import SqliteStore
from tests.server.support import WAIT, Controls, ServerThread, make_agents

LEASE = 2.0


def test_the_run_lease_must_be_positive() -> None:
    with pytest.raises(UsageError, match="run_lease"):
        create_app(make_agents(Controls()), run_lease=0)


async def _lease_until(store: SqliteStore, worker: str) -> float:
    data = await store.get_session(f"#lease/{worker}")
    return 0.0 if data is None else float(json.loads(data)["until"])


async def test_a_run_that_outlives_its_first_lease_is_not_taken_over(tmp_path: Path) -> None:
    controls = Controls()
    path = tmp_path / "plait.db"
    one = create_app(make_agents(controls), store=SqliteStore(path), run_lease=LEASE)
    two = create_app(make_agents(controls), store=SqliteStore(path), run_lease=LEASE)
    worker = one.state.plait.runs.leases.worker
    reader = SqliteStore(path)
    with ServerThread(one) as first, ServerThread(two) as second:
        async with (
            httpx.AsyncClient(base_url=first.url, timeout=WAIT) as on_one,
            httpx.AsyncClient(base_url=second.url, timeout=WAIT) as on_two,
        ):
            async with on_one.stream(
                "POST", "/v1/agents/helper/runs", json={"input": "block"}
            ) as run:
                checkpoint = run.headers["x-plait-checkpoint-id"]
                assert await asyncio.to_thread(controls.blocked.wait, WAIT)
                first_until = await _lease_until(reader, worker)
                assert first_until > time.time() - LEASE
                deadline = time.monotonic() + WAIT
                while await _lease_until(reader, worker) <= first_until + LEASE:  # renewed
                    assert time.monotonic() < deadline, "the lease was not renewed"
                    await asyncio.sleep(0.02)
                # past the end of its first lease, the run is still its worker's on the other
                assert (await on_two.get(f"/v1/runs/{checkpoint}")).json()["status"] == "running"
                controls.release.set()
                [*_, last] = [line async for line in run.aiter_lines() if line.startswith("data:")]
            summary = (await on_two.get(f"/v1/runs/{checkpoint}")).json()
    await reader.close()
    assert summary["status"] == "completed"
    assert summary["final_output"] == "done: unblocked"
    assert json.loads(last[5:])["status"] == "completed"
