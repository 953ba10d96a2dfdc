"""SqliteMemoryService passes the memory conformance suite and shares a file with a store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from plait.errors import StoreError
from plait.memory import SqliteMemoryService
from plait.memory.conformance import CHECKS, Check
from plait.memory.sqlite import MIGRATIONS
from plait.stores import SqliteStore


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_sqlite_memory_service_conforms(check: Check, tmp_path: Path) -> None:
    async with SqliteMemoryService(tmp_path / "memory.db") as service:
        await check(service)


def test_constructor_does_no_io(tmp_path: Path) -> None:
    SqliteMemoryService(tmp_path / "memory.db")
    assert not (tmp_path / "memory.db").exists()


async def test_memories_persist_across_instances(tmp_path: Path) -> None:
    async with SqliteMemoryService(tmp_path / "memory.db") as first:
        memory = await first.add("u", "remember the milk")
    async with SqliteMemoryService(str(tmp_path / "memory.db")) as second:
        assert [item.id for item in await second.search("u", "milk")] == [memory]


async def test_a_store_and_a_memory_service_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "plait.db"
    async with SqliteStore(path) as store, SqliteMemoryService(path) as service:
        await store.put_session("s", b"history")
        memory = await service.add("u", "shared file")
        assert await store.get_session("s") == b"history"
        assert [item.id for item in await service.search("u", "file")] == [memory]
    with sqlite3.connect(path) as connection:
        versions = connection.execute(
            "SELECT COUNT(*) FROM plait_memory_schema_version"
        ).fetchone()[0]
    assert versions == len(MIGRATIONS)


def test_one_service_serves_two_asyncio_runs(tmp_path: Path) -> None:
    import asyncio

    service = SqliteMemoryService(tmp_path / "memory.db")

    async def add() -> str:
        return await service.add("u", "across loops")

    async def search_and_close() -> list[str]:
        try:
            return [item.id for item in await service.search("u", "loops")]
        finally:
            await service.close()

    memory = asyncio.run(add())
    assert asyncio.run(search_and_close()) == [memory]


async def test_an_unusable_file_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "not-a-db").write_bytes(b"this is not a SQLite database at all" * 100)
    async with SqliteMemoryService(tmp_path / "not-a-db") as service:
        with pytest.raises(StoreError, match="adding a memory failed") as caught:
            await service.add("u", "anything")
    assert caught.value.operation == "adding a memory"
