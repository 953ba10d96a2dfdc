"""PostgresMemoryService passes the memory conformance suite.

The server is `PLAIT_TEST_POSTGRES_DSN` (default `postgresql://postgres@127.0.0.1:5432/test`);
the tests skip, saying so, only when no server answers there. Each test uses its own table
prefix and drops its tables.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from plait.errors import StoreError, UsageError
from plait.memory import PostgresMemoryService
from plait.memory.conformance import CHECKS, Check

DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")

ServiceFactory = Callable[[], PostgresMemoryService]


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
        for table in ("memories", "memory_schema_version"):
            connection.execute(f"DROP TABLE IF EXISTS {prefix}{table}")


@pytest.fixture
def make_service(postgres_dsn: str, table_prefix: str) -> ServiceFactory:
    """Return a factory of services on this test's tables."""
    return lambda: PostgresMemoryService(postgres_dsn, table_prefix=table_prefix)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_postgres_memory_service_conforms(check: Check, make_service: ServiceFactory) -> None:
    async with make_service() as service:
        await check(service)


async def test_memories_persist_across_instances(make_service: ServiceFactory) -> None:
    async with make_service() as first:
        memory = await first.add("u", "remember the milk")
    async with make_service() as second:
        assert [item.id for item in await second.search("u", "milk")] == [memory]


async def test_services_starting_together_migrate_once(make_service: ServiceFactory) -> None:
    services = [make_service() for _ in range(4)]
    try:
        found = await asyncio.gather(*(s.search("u", "anything") for s in services))
        assert found == [[]] * 4
    finally:
        for service in services:
            await service.close()


def test_bad_settings_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="table_prefix"):
        PostgresMemoryService(DSN, table_prefix="bad-prefix")
    with pytest.raises(UsageError, match="max_size"):
        PostgresMemoryService(DSN, max_size=0)
    with pytest.raises(UsageError, match="timeout"):
        PostgresMemoryService(DSN, timeout=0)


async def test_a_server_out_of_reach_is_a_store_error() -> None:
    # port 1 on localhost refuses at once; no password is shown
    dsn = "postgresql://user:secret@127.0.0.1:1/db"
    async with PostgresMemoryService(dsn, timeout=5) as service:
        with pytest.raises(StoreError, match=r"searching memories failed at 127\.0\.0\.1:1") as err:
            await service.search("u", "anything")
    assert "secret" not in str(err.value)
    assert err.value.operation == "searching memories"
