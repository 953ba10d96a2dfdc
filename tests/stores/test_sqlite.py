"""SqliteStore passes the conformance suite and keeps its records in a shared WAL-mode file."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from plait.errors import SessionConflict
from plait.stores import SessionRecord, SqliteStore
from plait.stores.conformance import CHECKS, Check, two_clients_save_one_of_two_turns
from plait.stores.sqlite import MIGRATIONS


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Return the path of a database file that does not exist yet."""
    return tmp_path / "plait.db"


def _scalar(path: Path, sql: str) -> object:
    """Return the single value `sql` reads from the file at `path`."""
    with sqlite3.connect(path) as connection:
        return connection.execute(sql).fetchone()[0]


def _write_first_schema_session(path: Path, session_id: str, data: bytes) -> None:
    """Leave at `path` a file of schema version 1 holding a session without a version."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.executescript(MIGRATIONS[0])
        connection.execute(
            "CREATE TABLE plait_schema_version"
            " (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        connection.execute("INSERT INTO plait_schema_version VALUES (1, 0)")
        connection.execute(
            "INSERT INTO plait_sessions (id, data, expires_at) VALUES (?, ?, NULL)",
            (session_id, data),
        )
        connection.commit()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_sqlite_store_conforms(check: Check, db_path: Path) -> None:
    async with SqliteStore(db_path) as store:
        await check(store)


def test_constructor_does_no_io(db_path: Path) -> None:
    SqliteStore(db_path)
    assert not db_path.exists()


async def test_records_persist_across_store_instances(db_path: Path) -> None:
    async with SqliteStore(db_path) as first:
        version = await first.put_checkpoint("cp", b"paused")
        await first.put_session("s", b"history")
    async with SqliteStore(str(db_path)) as second:
        record = await second.get_checkpoint("cp")
        assert record is not None and (record.data, record.version) == (b"paused", version)
        assert await second.get_session("s") == b"history"
        assert await second.put_checkpoint("cp", b"again") == version + 1


async def test_file_is_in_wal_mode(db_path: Path) -> None:
    async with SqliteStore(db_path) as store:
        await store.put_session("s", b"x")
    assert _scalar(db_path, "PRAGMA journal_mode") == "wal"


async def test_two_stores_on_one_file_have_one_winner(db_path: Path) -> None:
    async with SqliteStore(db_path) as a, SqliteStore(db_path) as b:
        version = await a.put_checkpoint("cp", b"x")
        claims = [store.claim_checkpoint("cp", version) for store in (a, b) for _ in range(10)]
        assert sum(await asyncio.gather(*claims)) == 1
        writes = [store.put_checkpoint("cp", b"y") for store in (a, b) for _ in range(10)]
        versions = await asyncio.gather(*writes)
        assert sorted(versions) == list(range(version + 2, version + 22))


async def test_migrations_run_once_when_stores_start_together(db_path: Path) -> None:
    stores = [SqliteStore(db_path) for _ in range(4)]
    try:
        assert await asyncio.gather(*(s.get_session("s") for s in stores)) == [None] * 4
    finally:
        for store in stores:
            await store.close()
    count = _scalar(db_path, "SELECT COUNT(*) FROM plait_schema_version")
    assert count == len(MIGRATIONS)


async def test_writes_delete_expired_rows(db_path: Path) -> None:
    async with SqliteStore(db_path) as store:
        store.sweep_interval = 0.0
        await store.put_checkpoint("old", b"x", ttl=0.05)
        await store.put_session("old", b"x", ttl=0.05)
        await asyncio.sleep(0.1)
        await store.put_session("new", b"y")
    assert _scalar(db_path, "SELECT COUNT(*) FROM plait_checkpoints") == 0
    assert _scalar(db_path, "SELECT COUNT(*) FROM plait_sessions") == 1


def test_one_store_serves_two_asyncio_runs(db_path: Path) -> None:
    store = SqliteStore(db_path)

    async def write() -> int:
        return await store.put_checkpoint("cp", b"x")

    async def claim_and_close(version: int) -> bool:
        try:
            return await store.claim_checkpoint("cp", version)
        finally:
            await store.close()

    version = asyncio.run(write())
    assert asyncio.run(claim_and_close(version))


def test_unclosed_store_does_not_keep_the_process_alive(db_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio
        from plait.stores import SqliteStore

        store = SqliteStore({str(db_path)!r})
        asyncio.run(store.put_session("s", b"written"))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], timeout=30, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    assert _scalar(db_path, "SELECT data FROM plait_sessions WHERE id = 's'") == b"written"


async def test_sessions_written_before_versions_read_as_version_one(db_path: Path) -> None:
    _write_first_schema_session(db_path, "s", b"history")
    async with SqliteStore(db_path) as store:
        assert await store.get_session_record("s") == SessionRecord(
            session_id="s", data=b"history", version=1
        )
        with pytest.raises(SessionConflict):
            await store.put_session("s", b"as if new", expected_version=0)
        assert await store.put_session("s", b"next turn", expected_version=1) == 2
        assert await store.get_session("s") == b"next turn"
    assert _scalar(db_path, "SELECT COUNT(*) FROM plait_schema_version") == len(MIGRATIONS)


async def test_two_stores_on_one_file_save_one_of_two_turns(db_path: Path) -> None:
    async with SqliteStore(db_path) as a, SqliteStore(db_path) as b:
        await two_clients_save_one_of_two_turns(a, b)


def test_an_unopenable_file_leaves_no_thread_reporting_to_a_closed_loop(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio
        import sqlite3
        from plait.errors import StoreError
        from plait.stores import SqliteStore

        for _ in range(40):
            store = SqliteStore({str(tmp_path / "no" / "such" / "dir" / "x.db")!r})
            try:
                asyncio.run(store.get_session("s"))
            except (StoreError, sqlite3.OperationalError):
                pass
            else:
                raise SystemExit("the store opened a file it cannot open")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr.decode() == ""
