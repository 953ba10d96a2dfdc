"""How a PostgresStore statement waits for the server: cancelled with its caller, and on a
connection the server may end while it is idle.

The server is `PLAIT_TEST_POSTGRES_DSN` (default `postgresql://postgres@127.0.0.1:5432/test`);
the tests skip when none answers.
"""

from __future__ import annotations

import asyncio

import pytest

from plait.stores import PostgresStore
from tests.stores.test_postgres import _scalar, postgres_dsn, table_prefix

__all__ = ["postgres_dsn", "table_prefix"]  # the fixtures this module uses


async def _waiting_on_a_lock(dsn: str, table_prefix: str) -> int:
    """Return how many statements on the test's checkpoints wait for a lock."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as connection:
        cursor = await connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE %s AND pid <> pg_backend_pid()",
            (f"%{table_prefix}checkpoints%",),
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def _until_a_statement_waits_on_a_lock(dsn: str, table_prefix: str) -> None:
    for _ in range(6000):
        if await _waiting_on_a_lock(dsn, table_prefix):
            return
        await asyncio.sleep(0.01)
    pytest.fail("the write never waited for the row's lock")


async def test_a_write_whose_caller_is_cancelled_is_cancelled_on_the_server(
    postgres_dsn: str, table_prefix: str
) -> None:
    import psycopg

    async with PostgresStore(postgres_dsn, table_prefix=table_prefix, timeout=120) as store:
        await store.put_checkpoint("run", b"first")  # the pool is open, its connection idle
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as holder:
            await holder.execute(
                f"SELECT id FROM {table_prefix}checkpoints WHERE id = 'run' FOR UPDATE"
            )
            write = asyncio.ensure_future(store.put_checkpoint("run", b"second"))
            await _until_a_statement_waits_on_a_lock(postgres_dsn, table_prefix)
            write.cancel()
            with pytest.raises(asyncio.CancelledError):
                await write
            # the lock is still held: a statement left running would still wait for it
            assert await _waiting_on_a_lock(postgres_dsn, table_prefix) == 0
            await holder.rollback()
        record = await store.get_checkpoint("run")
        assert record is not None and record.data == b"first"
        assert await store.put_checkpoint("run", b"third") == record.version + 1


async def test_a_connection_the_server_ends_while_idle_is_replaced(
    postgres_dsn: str, table_prefix: str
) -> None:
    import psycopg

    async with PostgresStore(postgres_dsn, table_prefix=table_prefix) as store:
        await store.put_checkpoint("run", b"first")
        pid = await _scalar(store, "SELECT pg_backend_pid()")
        async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as admin:
            # waits (up to 60 s) until the backend has ended
            await admin.execute("SELECT pg_terminate_backend(%s, 60000)", (pid,))
        record = await store.get_checkpoint("run")
        assert record is not None and record.data == b"first"
        assert await store.put_checkpoint("run", b"second") == record.version + 1
        assert await _scalar(store, "SELECT pg_backend_pid()") != pid
