"""PostgresStore and RedisStore under network faults, through `tests.stores.faults.FaultProxy`.

Through the proxy in "pass" mode the stores pass the conformance suite. When the server does
not answer ("blackhole") or every connection is reset ("drop"), every operation ends within
the store's timeout with a `StoreError` naming the operation and the proxy's address, never
the password; a pending checkpoint outlives the fault and is claimed exactly once after it;
a claim whose answer was lost is reported as a `StoreError`, never as "someone else won".
The servers are the ones tests/stores/test_postgres.py and test_redis.py use; the tests
skip when one does not answer.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from plait import ChatModelAgent, Runner, interrupt, tool
from plait.errors import CheckpointAlreadyResumed, StoreError, UsageError
from plait.stores import Store
from plait.stores.conformance import (
    CHECKS,
    Check,
    operations_fail_with_store_errors,
    pending_checkpoints_outlive_a_fault,
)
from plait.testing import ScriptedModel, call, reply
from tests.stores.faults import FaultProxy, Mode

PG_DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("PLAIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PASSWORD = "s3cret-not-shown"

#: The stores' timeout in these tests, and the bound every failing operation must keep.
TIMEOUT = 1.0
BOUND = TIMEOUT + 4.0
#: The stores' timeout where no fault is made: wide, so a busy machine never trips it.
ROOMY_TIMEOUT = 60.0


@dataclass
class Server:
    """A real server and how to make a store that reaches it through a proxy."""

    name: str
    host: str
    port: int
    make: Callable[[FaultProxy, float | None], Store]


def _postgres(prefix: str) -> Server:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from plait.stores import PostgresStore

    try:
        psycopg.connect(PG_DSN, connect_timeout=5).close()
    except psycopg.Error as exc:
        pytest.skip(f"no PostgreSQL server at {PG_DSN}: {exc}")
    params = conninfo_to_dict(PG_DSN)

    def make(proxy: FaultProxy, timeout: float | None) -> Store:
        user, db = params.get("user", "postgres"), params.get("dbname", "test")
        dsn = f"postgresql://{user}:{PASSWORD}@{proxy.host}:{proxy.port}/{db}"
        if timeout is None:
            return PostgresStore(dsn, table_prefix=prefix)
        return PostgresStore(dsn, table_prefix=prefix, timeout=timeout)

    host = str(params.get("host", "127.0.0.1"))
    return Server("postgres", host, int(params.get("port", 5432)), make)


def _redis(prefix: str) -> Server:
    import redis
    from redis.asyncio.connection import parse_url

    from plait.stores import RedisStore

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        pytest.skip(f"no Redis server at {REDIS_URL}: {exc}")
    finally:
        client.close()
    params = parse_url(REDIS_URL)

    def make(proxy: FaultProxy, timeout: float | None) -> Store:
        url = f"redis://{proxy.host}:{proxy.port}/{params.get('db', 0)}"
        if timeout is None:
            return RedisStore(url, prefix=prefix)
        return RedisStore(url, prefix=prefix, timeout=timeout)

    return Server("redis", str(params.get("host", "127.0.0.1")), params.get("port", 6379), make)


def _cleanup(server: str, prefix: str) -> None:
    """Drop the tables or keys a test made."""
    if server == "postgres":
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as connection:
            for table in ("checkpoints", "sessions", "schema_version"):
                connection.execute(f"DROP TABLE IF EXISTS {prefix}{table}")
        return
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture(params=["postgres", "redis"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """Return each real server in turn, with a table or key prefix of this test's own."""
    prefix = f"plait_fault_{uuid.uuid4().hex[:10]}_"
    yield _postgres(prefix) if request.param == "postgres" else _redis(prefix)
    _cleanup(request.param, prefix)


@pytest.fixture
async def proxy(server: Server) -> AsyncIterator[FaultProxy]:
    """Return a proxy to the server, in "pass" mode."""
    async with FaultProxy(server.host, server.port) as running:
        yield running


@pytest.fixture
async def store(server: Server, proxy: FaultProxy) -> AsyncIterator[Store]:
    """Return a store that reaches its server through the proxy, with a 1 s timeout."""
    opened = server.make(proxy, TIMEOUT)
    yield opened
    await opened.close()


def _switch(proxy: FaultProxy, mode: Mode) -> Callable[[bool], asyncio.Future[None]]:
    """Return a `FaultSwitch` that puts the proxy in `mode`, and back in "pass"."""

    def switch(on: bool) -> asyncio.Future[None]:
        proxy.set_mode(mode if on else "pass")
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    return switch


def _check_message(error: StoreError, proxy: FaultProxy) -> None:
    assert proxy.address in str(error), error
    assert PASSWORD not in str(error), error
    assert error.operation in str(error)


@pytest.fixture
async def roomy_store(server: Server, proxy: FaultProxy) -> AsyncIterator[Store]:
    """Return a store that reaches its server through the proxy, with a wide timeout."""
    opened = server.make(proxy, ROOMY_TIMEOUT)
    yield opened
    await opened.close()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_the_store_conforms_through_the_proxy(check: Check, roomy_store: Store) -> None:
    await check(roomy_store)


@pytest.mark.parametrize("warm", [False, True], ids=["never-connected", "connected"])
@pytest.mark.parametrize("mode", ["blackhole", "drop"])
async def test_every_operation_fails_in_bounded_time(
    store: Store, proxy: FaultProxy, mode: Mode, warm: bool
) -> None:
    if warm:
        await store.put_session("warm", b"up")
    proxy.set_mode(mode)
    errors = await operations_fail_with_store_errors(store, within=BOUND)
    for error in errors:
        _check_message(error, proxy)


@pytest.mark.parametrize("mode", ["blackhole", "drop"])
async def test_a_pending_checkpoint_outlives_the_fault(
    store: Store, proxy: FaultProxy, mode: Mode
) -> None:
    async with asyncio.timeout(60):
        await pending_checkpoints_outlive_a_fault(store, _switch(proxy, mode))


async def test_a_claim_whose_answer_is_lost_is_an_error_not_a_lost_race(
    store: Store, proxy: FaultProxy
) -> None:
    version = await store.put_checkpoint("cp", b"paused")
    proxy.set_mode("lose_replies")
    with pytest.raises(StoreError, match="may or may not have been applied") as caught:
        await asyncio.wait_for(store.claim_checkpoint("cp", version), BOUND)
    _check_message(caught.value, proxy)
    proxy.set_mode("pass")
    record = await store.get_checkpoint("cp")  # the server did claim it: it is not resumed twice
    assert record is not None and (record.status, record.version) == ("claimed", version + 1)
    assert not await store.claim_checkpoint("cp", version)


async def test_a_slow_server_gives_store_errors_then_serves_again(
    store: Store, proxy: FaultProxy
) -> None:
    await store.put_session("s", b"before")
    proxy.delay = TIMEOUT * 3
    proxy.set_mode("delay")
    started = time.monotonic()
    with pytest.raises(StoreError, match="timed out") as caught:
        await asyncio.wait_for(store.get_session("s"), BOUND)
    assert time.monotonic() - started < BOUND
    _check_message(caught.value, proxy)
    proxy.set_mode("pass")
    assert await store.get_session("s") == b"before"


async def test_a_caller_cancelled_while_the_server_is_silent_ends_within_the_timeout(
    store: Store, proxy: FaultProxy
) -> None:
    await store.put_session("s", b"before")  # a connection is kept: the next statement runs at once
    proxy.set_mode("blackhole")
    started = time.monotonic()
    caller = asyncio.ensure_future(store.get_session("s"))
    await asyncio.wait_for(proxy.swallowed.wait(), BOUND)  # the statement is on its way
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(caller, BOUND)
    assert time.monotonic() - started < TIMEOUT + 3  # not psycopg's own 5 s for a cancel
    proxy.set_mode("pass")
    assert await store.get_session("s") == b"before"


@tool
def approve(item: str) -> str:
    """Ask a person.

    Args:
        item: What to approve.
    """
    return f"{item}: {interrupt({'approve': item})}"


def _runner(store: Store, runs: int = 1) -> Runner:
    model = ScriptedModel([call("approve", {"item": "x"}, id="c1"), reply("done")] * runs)
    return Runner(ChatModelAgent("Clerk", model, tools=[approve]), store=store)


async def test_a_run_against_a_server_that_never_answers_ends_with_a_store_error(
    store: Store, proxy: FaultProxy
) -> None:
    proxy.set_mode("blackhole")
    result = await asyncio.wait_for(_runner(store).query("approve x").collect(), BOUND * 2)
    assert isinstance(result.error, StoreError), result.error
    assert result.error.operation == "writing a checkpoint"
    _check_message(result.error, proxy)


@pytest.mark.timeout(120)
async def test_by_default_an_operation_gives_up_after_ten_seconds(
    server: Server, proxy: FaultProxy
) -> None:
    store = server.make(proxy, None)
    proxy.set_mode("blackhole")
    started = time.monotonic()
    result = await asyncio.wait_for(_runner(store).query("approve x").collect(), 40)
    assert 9 < time.monotonic() - started < 20
    assert isinstance(result.error, StoreError), result.error
    assert "no answer within 10 s" in str(result.error)
    await store.close()


async def test_a_resume_refused_by_a_fault_can_be_made_once_it_clears(
    store: Store, proxy: FaultProxy
) -> None:
    runner = _runner(store, runs=2)
    paused = await runner.query("approve x").collect()
    assert paused.checkpoint_id is not None, paused.error
    proxy.set_mode("drop")
    with pytest.raises(StoreError):
        await asyncio.wait_for(runner.resume(paused.checkpoint_id, value="yes").collect(), BOUND)
    proxy.set_mode("pass")
    resumed = await runner.resume(paused.checkpoint_id, value="yes").collect()
    assert resumed.final_output == "done", resumed.error
    with pytest.raises(CheckpointAlreadyResumed):
        await runner.resume(paused.checkpoint_id, value="again").collect()


async def test_a_server_that_is_down_fails_every_operation_at_once(server: Server) -> None:
    async with FaultProxy(server.host, server.port) as gone:
        store = server.make(gone, TIMEOUT)
    # the proxy has stopped: nothing listens on its port any more
    started = time.monotonic()
    errors = await operations_fail_with_store_errors(store, within=BOUND)
    assert time.monotonic() - started < BOUND
    for error in errors:
        _check_message(error, gone)
    await store.close()


def _offline(kind: str, **options: Any) -> Store:
    """Return a store of `kind` with a password in its address (nothing is opened)."""
    if kind == "postgres":
        from plait.stores import PostgresStore

        return PostgresStore(f"postgresql://clerk:{PASSWORD}@db.example:6543/app", **options)
    from plait.stores import RedisStore

    return RedisStore(f"redis://clerk:{PASSWORD}@cache.example:6380/0", **options)


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan"), "10", True])
@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_timeout_must_be_a_positive_number_of_seconds(kind: str, timeout: object) -> None:
    with pytest.raises(UsageError, match="timeout must be a"):
        _offline(kind, timeout=timeout)


@pytest.mark.parametrize(
    ("kind", "address"), [("postgres", "db.example:6543"), ("redis", "cache.example:6380")]
)
def test_a_store_shows_its_address_and_timeout_never_its_password(kind: str, address: str) -> None:
    store = _offline(kind)
    assert address in repr(store)
    assert PASSWORD not in repr(store)
    assert _offline(kind).timeout == 10.0  # type: ignore[attr-defined]
    assert _offline(kind, timeout=2.5).timeout == 2.5  # type: ignore[attr-defined]
