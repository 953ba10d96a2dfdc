"""Two real `plait serve` workers on one store, and the official `langgraph_sdk` client of
each user on each worker.

`serve_workers(kind, tmp_path)` starts workers A and B (`python -m plait serve` of the
agents of `served_agents.py`, each on a port of its own, with the keys of users ann and
bob) on a store of the test's own: tables with a fresh prefix on the local PostgreSQL
(`PLAIT_TEST_POSTGRES_DSN`; the test skips when no server answers; the tables are dropped
at the end) or one SQLite file the two share. The workers' tools write what they do to
`calls.log` in the test's scratch directory (`Workers.calls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.cli.support import WAIT, ServeProcess, sqlite_url
from tests.protocols.agent_protocol.support import KEYS

PG_DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("PLAIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
SERVED = Path(__file__).resolve().parent / "served_agents.py"
#: The agents each worker serves (`served_agents.py`).
AGENTS = ("echo", "worker", "stepper")
#: The longest a test waits for something another process does (a failsafe, not a pace).
FAILSAFE = 90.0


@dataclass
class Worker:
    """One `plait serve` process and the clients of its two users."""

    process: ServeProcess
    ann: LangGraphClient
    bob: LangGraphClient

    @property
    def url(self) -> str:
        """Return the worker's base URL."""
        return self.process.url

    def stop(self, sig: signal.Signals) -> int | None:
        """Send `sig` to the process; return its exit code once it has ended."""
        process = self.process.process
        assert process is not None
        process.send_signal(sig)
        return process.wait(WAIT)


@dataclass
class Workers:
    """Workers A and B on one store, and the scratch directory their tools write to."""

    a: Worker
    b: Worker
    scratch: Path
    store_url: str

    def calls(self, tool: str | None = None) -> list[str]:
        """Return the lines of the calls log (`<tool> <pid>`), those of `tool` only if given."""
        log = self.scratch / "calls.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [line for line in lines if tool is None or line.split()[0] == tool]

    def release(self) -> None:
        """Let every `block` call, running or to come, return."""
        (self.scratch / "release").touch()


async def until(check: Callable[[], Awaitable[Any]], what: str) -> Any:
    """Wait until `check()` gives something true (looking again at once, as another
    process may do it at any time); return it. `FAILSAFE` seconds bound a hung test."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FAILSAFE
    while not (found := await check()):
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not happen within {FAILSAFE} s")
        await asyncio.sleep(0.05)
    return found


@contextlib.contextmanager
def _postgres_url() -> Iterator[str]:
    """Return the URL of a PostgreSQL store on tables of its own (dropped at the end)."""
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(PG_DSN, connect_timeout=5).close()
    except psycopg.Error as exc:  # only on a machine without a server
        pytest.skip(f"no PostgreSQL server at {PG_DSN}: {exc}")
    prefix = f"plait_ap_{uuid.uuid4().hex[:10]}_"
    try:
        yield f"{PG_DSN}?table_prefix={prefix}"
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as connection:
            for table in ("checkpoints", "sessions", "schema_version"):
                connection.execute(f"DROP TABLE IF EXISTS {prefix}{table}")


@contextlib.contextmanager
def _redis_url() -> Iterator[str]:
    """Return the URL of a Redis store on keys of its own (deleted at the end)."""
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:  # only on a machine without a server
        pytest.skip(f"no Redis server at {REDIS_URL}: {exc}")
    prefix = f"plait_ap_{uuid.uuid4().hex[:10]}:"
    try:
        yield f"{REDIS_URL}?prefix={prefix}"
    finally:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
        client.close()


@contextlib.contextmanager
def _store_url(kind: str, tmp_path: Path) -> Iterator[str]:
    if kind == "postgres":
        with _postgres_url() as url:
            yield url
    elif kind == "redis":
        with _redis_url() as url:
            yield url
    else:
        yield sqlite_url(tmp_path / "workers.db")


@contextlib.asynccontextmanager
async def _clients(process: ServeProcess) -> AsyncIterator[Worker]:
    async with (
        get_client(url=process.url, api_key="key-ann") as ann,
        get_client(url=process.url, api_key="key-bob") as bob,
    ):
        yield Worker(process, ann, bob)


@contextlib.asynccontextmanager
async def serve_workers(
    kind: str, tmp_path: Path, *, run_lease: float | None = None
) -> AsyncIterator[Workers]:
    """Serve the agents of `served_agents.py` from two `plait serve` workers on a store
    of `kind` ("postgres", "redis" or "sqlite") of this test's own (`run_lease`: their
    `--run-lease`)."""
    pytest.importorskip("uvicorn")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"{key} {user}\n" for key, user in KEYS.items()))
    with _store_url(kind, tmp_path) as url:
        args = [f"{SERVED}:{name}" for name in AGENTS]
        args += ["--store", url, "--api-keys", str(keys)]
        if run_lease is not None:
            args += ["--run-lease", str(run_lease)]
        env = {"PLAIT_AP_SCRATCH": str(scratch)}
        processes = [ServeProcess(args, tmp_path / "logs", env=env) for _ in "ab"]
        async with _started(processes) as (a, b), _clients(a) as on_a, _clients(b) as on_b:
            yield Workers(on_a, on_b, scratch, url)


@contextlib.asynccontextmanager
async def _started(processes: list[ServeProcess]) -> AsyncIterator[list[ServeProcess]]:
    """Start `processes` side by side; stop them (side by side too) at the end."""
    try:
        starts = [asyncio.to_thread(process.__enter__) for process in processes]
        for outcome in await asyncio.gather(*starts, return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome
        yield processes
    finally:
        await asyncio.gather(*(asyncio.to_thread(process.stop) for process in processes))
