"""PostgresStore passes the conformance suite and is safe to share between stores and loops.

The server is `PLAIT_TEST_POSTGRES_DSN` (default `postgresql://postgres@127.0.0.1:5432/test`);
the tests skip when none answers. Each test uses its own table prefix and drops its tables.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from plait.errors import SessionConflict, UsageError
from plait.stores import PostgresStore, SessionRecord
from plait.stores.base import CheckpointWrite
from plait.stores.conformance import CHECKS, Check, two_clients_save_one_of_two_turns
from plait.stores.postgres import MIGRATIONS

DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")

StoreFactory = Callable[[], PostgresStore]


@pytest.fixture(scope="module")
def postgres_dsn() -> str:
    """Return the test server's DSN, or skip when no server answers there."""
    import psycopg

    try:
        psycopg.connect(DSN, connect_timeout=5).close()
    except psycopg.Error as exc:
        pytest.skip(f"no PostgreSQL server at {DSN}: {exc}")
    return DSN


@pytest.fixture
def table_prefix(postgres_dsn: str) -> Iterator[str]:
    """Return a table prefix of this test's own, and drop its tables afterwards."""
    import psycopg

    prefix = f"plait_test_{uuid.uuid4().hex[:12]}_"
    yield prefix
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        for table in ("checkpoints", "sessions", "schema_version"):
            connection.execute(f"DROP TABLE IF EXISTS {prefix}{table}")


@pytest.fixture
def make_store(postgres_dsn: str, table_prefix: str) -> StoreFactory:
    """Return a factory of stores on this test's tables."""
    return lambda: PostgresStore(postgres_dsn, table_prefix=table_prefix)


async def _scalar(store: PostgresStore, sql: str) -> object:
    """Return the single value `sql` reads through `store`'s pool."""
    pool = await store._connect()
    async with pool.connection() as connection:
        row = await (await connection.execute(sql)).fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_postgres_store_conforms(check: Check, make_store: StoreFactory) -> None:
    async with make_store() as store:
        await check(store)


async def test_records_persist_across_store_instances(make_store: StoreFactory) -> None:
    async with make_store() as first:
        version = await first.put_checkpoint("cp", b"paused")
        await first.put_session("s", b"history")
    async with make_store() as second:
        record = await second.get_checkpoint("cp")
        assert record is not None and (record.data, record.version) == (b"paused", version)
        assert await second.get_session("s") == b"history"


async def test_two_stores_have_one_winner(make_store: StoreFactory) -> None:
    async with make_store() as a, make_store() as b:
        version = await a.put_checkpoint("cp", b"x")
        claims = [store.claim_checkpoint("cp", version) for store in (a, b) for _ in range(10)]
        assert sum(await asyncio.gather(*claims)) == 1
        writes = [store.put_checkpoint("cp", b"y") for store in (a, b) for _ in range(10)]
        versions = await asyncio.gather(*writes)
        assert sorted(versions) == list(range(version + 2, version + 22))


async def test_migrations_run_once_when_stores_start_together(
    make_store: StoreFactory, table_prefix: str
) -> None:
    stores = [make_store() for _ in range(4)]
    try:
        assert await asyncio.gather(*(s.get_session("s") for s in stores)) == [None] * 4
        count = await _scalar(stores[0], f"SELECT COUNT(*) FROM {table_prefix}schema_version")
        assert count == len(MIGRATIONS)
    finally:
        for store in stores:
            await store.close()


async def test_writes_delete_expired_rows(make_store: StoreFactory, table_prefix: str) -> None:
    async with make_store() as store:
        store.sweep_interval = 0.0
        await store.put_checkpoint("old", b"x", ttl=0.05)
        await store.put_session("old", b"x", ttl=0.05)
        await asyncio.sleep(0.2)
        await store.put_session("new", b"y")
        assert await _scalar(store, f"SELECT COUNT(*) FROM {table_prefix}checkpoints") == 0
        assert await _scalar(store, f"SELECT COUNT(*) FROM {table_prefix}sessions") == 1


def test_one_store_serves_two_asyncio_runs(make_store: StoreFactory) -> None:
    store = make_store()

    async def write() -> int:
        return await store.put_checkpoint("cp", b"x")

    async def claim_and_close(version: int) -> bool:
        try:
            return await store.claim_checkpoint("cp", version)
        finally:
            await store.close()

    version = asyncio.run(write())
    assert asyncio.run(claim_and_close(version))


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(UsageError, match=r'pip install "plait\[postgres\]"'):
        PostgresStore(DSN)


@pytest.mark.parametrize("prefix", ["", "1abc_", "plait; DROP TABLE x; --", "a" * 41])
def test_invalid_table_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(UsageError, match="table_prefix"):
        PostgresStore(DSN, table_prefix=prefix)


def _write_first_schema_session(dsn: str, prefix: str, session_id: str, data: bytes) -> None:
    """Create the tables of schema version 1 holding a session without a version."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        for statement in MIGRATIONS[0].format(prefix=prefix).split(";"):
            if statement.strip():
                connection.execute(statement)
        connection.execute(
            f"CREATE TABLE {prefix}schema_version (version INTEGER PRIMARY KEY,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        connection.execute(f"INSERT INTO {prefix}schema_version (version) VALUES (1)")
        connection.execute(
            f"INSERT INTO {prefix}sessions (id, data, expires_at) VALUES (%s, %s, NULL)",
            (session_id, data),
        )


async def test_sessions_written_before_versions_read_as_version_one(
    make_store: StoreFactory, postgres_dsn: str, table_prefix: str
) -> None:
    _write_first_schema_session(postgres_dsn, table_prefix, "s", b"history")
    async with make_store() as store:
        assert await store.get_session_record("s") == SessionRecord(
            session_id="s", data=b"history", version=1
        )
        with pytest.raises(SessionConflict):
            await store.put_session("s", b"as if new", expected_version=0)
        assert await store.put_session("s", b"next turn", expected_version=1) == 2
        assert await store.get_session("s") == b"next turn"
        count = await _scalar(store, f"SELECT COUNT(*) FROM {table_prefix}schema_version")
        assert count == len(MIGRATIONS)


async def test_two_stores_save_one_of_two_turns(make_store: StoreFactory) -> None:
    async with make_store() as a, make_store() as b:
        await two_clients_save_one_of_two_turns(a, b)


async def test_bytes_under_two_ids_in_one_batch_are_sent_once(
    make_store: StoreFactory, table_prefix: str
) -> None:
    step = b'{"messages": ["' + b"x" * 20_000 + b'"]}'
    async with make_store() as store:
        assert await store.put_checkpoints([("run", b"first", "pending")]) == [1]
        writes: list[CheckpointWrite] = [
            ("run", step, "pending"),
            ("run.step-1", step, "done"),
            ("run.history", b"[1]", "done"),
        ]
        sent: list[dict[str, object]] = []
        query = store._query

        async def counted(operation: str, sql: str, params: Any, **kw: Any) -> Any:
            sent.append(params)
            return await query(operation, sql, params, **kw)

        store._query = counted  # type: ignore[method-assign]
        assert await store.put_checkpoints(writes, ttl=60) == [2, 1, 1]
        (params,) = sent
        assert sum(value is step for value in params.values()) == 1  # one parameter
        for checkpoint_id, data, status in writes:
            record = await store.get_checkpoint(checkpoint_id)
            assert record is not None
            assert (record.data, record.status) == (data, status)
        ttl = await _scalar(
            store,
            f"SELECT COUNT(*) FROM {table_prefix}checkpoints"
            " WHERE expires_at > now() + interval '50 seconds'",
        )
        assert ttl == 3


async def test_documents_are_compressed_with_lz4_where_the_server_has_it(
    make_store: StoreFactory, table_prefix: str
) -> None:
    import psycopg

    async with make_store() as store:
        await store.put_checkpoint("run", b"{}")
        try:
            # a server without lz4 (or before version 14) refuses it as the default
            await _scalar(store, "SELECT set_config('default_toast_compression', 'lz4', true)")
            lz4 = True
        except psycopg.Error:
            lz4 = False
        methods = await _scalar(
            store,
            "SELECT string_agg(attcompression::text, ',' ORDER BY attrelid::regclass::text)"
            f" FROM pg_attribute WHERE attname = 'data' AND attrelid IN"
            f" ('{table_prefix}checkpoints'::regclass, '{table_prefix}sessions'::regclass)",
        )
        assert methods == ("l,l" if lz4 else ",")


def test_a_migration_keeps_a_dollar_quoted_body_whole() -> None:
    from plait.stores.postgres import _statements

    script = "CREATE TABLE a (x int); DO $$ BEGIN PERFORM 1; PERFORM 2; END $$; SELECT 1;"
    assert _statements(script) == (
        "CREATE TABLE a (x int)",
        "DO $$ BEGIN PERFORM 1; PERFORM 2; END $$",
        "SELECT 1",
    )


async def test_a_statement_whose_task_is_cancelled_cancels_its_caller(
    make_store: StoreFactory,
) -> None:
    async with make_store() as store:  # its first statement opens the pool in its own task
        started = asyncio.Event()
        run = store._run

        async def held(*args: Any) -> Any:
            started.set()
            await asyncio.sleep(3600)
            return await run(*args)

        store._run = held  # type: ignore[method-assign,assignment]
        caller = asyncio.ensure_future(store.get_checkpoint("run"))
        await started.wait()
        (statement,) = [
            task
            for task in asyncio.all_tasks()
            if task is not caller and task.get_coro().__qualname__.endswith("_answer")  # type: ignore[union-attr]
        ]
        statement.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
