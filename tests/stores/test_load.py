"""Every store keeps 2,000 runs that pause at once, and resumes them all at once.

2,000 runs of a `ChatModelAgent` whose tool calls `plait.interrupt` go through one `Runner`
concurrently (`asyncio.gather`), then 2,000 resumes do: every pause must be saved, every
resume must finish, with no error, with the stores' default pool sizes. The PostgreSQL and
Redis stores get a wide timeout: their default (10 s) bounds each operation's wait for a free
connection too, and 2,000 operations queued on 50 connections, on a machine whose cores are
busy with other work, can wait longer than that without anything being wrong. The servers
are the ones tests/stores/test_postgres.py and test_redis.py use; those cases skip when a
server does not answer.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plait import ChatModelAgent, Runner, interrupt, tool
from plait.stores import MemoryStore, SqliteStore, Store
from plait.testing import ScriptedModel, call, reply

RUNS = 2000
#: Seconds each PostgreSQL or Redis operation may take here, its wait for a connection included.
TIMEOUT = 120.0
PG_DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("PLAIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@tool
def approve(item: str) -> str:
    """Ask a person.

    Args:
        item: What to approve.
    """
    return f"{item}: {interrupt({'approve': item})}"


async def _postgres() -> AsyncIterator[Store]:
    import psycopg

    from plait.stores import PostgresStore

    try:
        psycopg.connect(PG_DSN, connect_timeout=5).close()
    except psycopg.Error as exc:
        pytest.skip(f"no PostgreSQL server at {PG_DSN}: {exc}")
    prefix = f"plait_load_{uuid.uuid4().hex[:10]}_"
    async with PostgresStore(PG_DSN, table_prefix=prefix, timeout=TIMEOUT) as store:
        yield store
    with psycopg.connect(PG_DSN, autocommit=True) as connection:
        for table in ("checkpoints", "sessions", "schema_version"):
            connection.execute(f"DROP TABLE IF EXISTS {prefix}{table}")


async def _redis() -> AsyncIterator[Store]:
    import redis

    from plait.stores import RedisStore

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        client.close()
        pytest.skip(f"no Redis server at {REDIS_URL}: {exc}")
    prefix = f"plait-load-{uuid.uuid4().hex}:"
    try:
        async with RedisStore(REDIS_URL, prefix=prefix, timeout=TIMEOUT) as store:
            yield store
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Return each store in turn, with its default pool sizes."""
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        async with SqliteStore(tmp_path / "load.db") as opened:
            yield opened
    else:
        async for opened in _postgres() if request.param == "postgres" else _redis():
            yield opened


@pytest.mark.timeout(900)
async def test_two_thousand_runs_pause_and_resume_at_once(store: Store) -> None:
    model = ScriptedModel([call("approve", {"item": "x"}, id="c1")] * RUNS + [reply("done")] * RUNS)
    runner = Runner(ChatModelAgent("Clerk", model, tools=[approve]), store=store)
    paused = await asyncio.gather(*(runner.query("approve x").collect() for _ in range(RUNS)))
    errors = [result.error for result in paused if result.error is not None]
    assert errors == [], f"{len(errors)} of {RUNS} pauses failed, first: {errors[0]!r}"
    ids = {result.checkpoint_id for result in paused}
    assert len(ids) == RUNS and None not in ids
    resumes = [runner.resume(str(cp), value="yes").collect() for cp in ids]
    resumed = await asyncio.gather(*resumes, return_exceptions=True)
    failed = [r for r in resumed if isinstance(r, BaseException) or r.final_output != "done"]
    assert failed == [], f"{len(failed)} of {RUNS} resumes failed, first: {failed[0]!r}"
    assert model.remaining == 0
    record = await store.get_checkpoint(str(next(iter(ids))))
    assert record is not None and record.status == "done"
