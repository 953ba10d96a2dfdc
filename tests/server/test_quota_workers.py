"""Quotas held across workers: two apps on one store (a SQLite file, PostgreSQL or Redis)
count one user's running runs and model calls together. The PostgreSQL and Redis servers are
`PLAIT_TEST_POSTGRES_DSN` and `PLAIT_TEST_REDIS_URL`; those tests skip when none answers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from plait.server import Quota, create_app
from plait.stores import Store
from tests.server.quota_support import Clock, Gate, make_quota_agents, run
from tests.server.support import WAIT, ServerThread, client
from tests.server.test_shared_store import _postgres_pair

pytestmark = pytest.mark.timeout(90)

KEYS = {"key-alice": "alice", "key-bob": "bob"}


def _redis_pair() -> Iterator[tuple[Store, Store]]:
    redis = pytest.importorskip("redis")
    from plait.stores.redis import RedisStore

    url = os.environ.get("PLAIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        client.close()
        pytest.skip(f"no Redis server at {url}: {exc}")
    prefix = f"plait-quota-{uuid.uuid4().hex}:"
    yield RedisStore(url, prefix=prefix), RedisStore(url, prefix=prefix)
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    """Return two stores on the same data (two processes' worth)."""
    if request.param == "sqlite":
        from plait.stores import SqliteStore

        yield SqliteStore(tmp_path / "shared.db"), SqliteStore(tmp_path / "shared.db")
    elif request.param == "postgres":
        yield from _postgres_pair()
    else:
        yield from _redis_pair()


def _apps(stores: tuple[Store, Store], quota: Quota, gate: Gate) -> list[object]:
    clock = Clock()
    return [
        create_app(
            make_quota_agents([], gate), store=store, api_keys=KEYS, quotas={"alice": quota},
            clock=clock,
        )
        for store in stores
    ]  # fmt: skip


def test_a_run_on_one_worker_takes_the_place_another_worker_would_give(
    stores: tuple[Store, Store],
) -> None:
    gate = Gate()
    app_a, app_b = _apps(stores, Quota(max_concurrent_runs=1, model_calls_per_day=3), gate)
    with (
        ServerThread(app_a) as a,  # type: ignore[arg-type]
        ServerThread(app_b) as b,  # type: ignore[arg-type]
        client(a.url, "key-alice") as on_a,
        client(b.url, "key-alice") as on_b,
        client(b.url, "key-bob") as bob_on_b,
        ThreadPoolExecutor(1) as pool,
    ):
        blocked = pool.submit(run, on_a, "blocker")
        assert gate.entered.wait(WAIT)
        refused = run(on_b, "echo")
        assert refused.status_code == 429
        assert refused.json()["error"]["quota"] == "max_concurrent_runs"
        assert refused.headers["retry-after"] == "1"
        assert run(bob_on_b, "echo").json()["status"] == "completed"  # bob has no quota
        gate.opened.set()
        assert blocked.result(WAIT).json()["status"] == "completed"  # 2 model calls
        assert run(on_b, "echo").json()["status"] == "completed"  # the third: its place free
        spent = run(on_a, "echo")
        assert spent.status_code == 429
        assert spent.json()["error"]["quota"] == "model_calls_per_day"


def test_runs_at_once_on_two_workers_make_no_more_calls_than_the_budget(
    stores: tuple[Store, Store],
) -> None:
    app_a, app_b = _apps(stores, Quota(model_calls_per_day=4), Gate())
    with (
        ServerThread(app_a) as a,  # type: ignore[arg-type]
        ServerThread(app_b) as b,  # type: ignore[arg-type]
        client(a.url, "key-alice") as on_a,
        client(b.url, "key-alice") as on_b,
        ThreadPoolExecutor(12) as pool,
    ):
        answers: list[httpx.Response] = list(
            pool.map(lambda i: run(on_a if i % 2 else on_b, "echo"), range(12))
        )
        completed = [
            r for r in answers if r.status_code == 200 and r.json()["status"] == "completed"
        ]
        assert len(completed) == 4
        for other in answers:
            if other not in completed:  # refused at the door, or stopped before its call
                body = other.json()
                kind = body["error"]["type"]
                assert kind in ("quota_exceeded", "QuotaExceeded"), body
        rows = on_a.get("/v1/usage").json()["rows"]
        assert len(rows) == 4
