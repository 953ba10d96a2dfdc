"""`plait.stores.from_url`: the store URLs of the server and the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.errors import UsageError
from plait.stores import MemoryStore, PostgresStore, RedisStore, SqliteStore, from_url


def test_sqlite_urls_name_a_relative_or_an_absolute_file(tmp_path: Path) -> None:
    relative = from_url("sqlite:///data/plait.db")
    assert isinstance(relative, SqliteStore) and relative.path == "data/plait.db"
    absolute = from_url(f"sqlite:///{tmp_path}/x.db")
    assert isinstance(absolute, SqliteStore) and absolute.path == f"{tmp_path}/x.db"
    assert from_url("sqlite:////abs/x.db").path == "/abs/x.db"  # type: ignore[attr-defined]


async def test_a_sqlite_url_store_works(tmp_path: Path) -> None:
    store = from_url(f"sqlite:///{tmp_path}/works.db")
    async with store:
        await store.put_session("s", b"{}")
        assert await store.get_session("s") == b"{}"
    assert (tmp_path / "works.db").exists()


def test_memory_postgres_and_redis_urls() -> None:
    assert isinstance(from_url("memory://"), MemoryStore)
    for url in ("postgresql://u@h:5432/db", "postgres://u@h/db"):
        store = from_url(url)
        assert isinstance(store, PostgresStore) and store.dsn == url
        assert store.table_prefix == "plait_"
    prefixed = from_url("postgresql://u@h/db?table_prefix=app_&connect_timeout=3")
    assert isinstance(prefixed, PostgresStore)
    assert prefixed.table_prefix == "app_"
    assert prefixed.dsn == "postgresql://u@h/db?connect_timeout=3"
    for url in ("redis://h:6379/0", "rediss://h:6380/1"):
        store = from_url(url)
        assert isinstance(store, RedisStore) and store.url == url
    keyed = from_url("redis://h:6379/0?prefix=app:")
    assert isinstance(keyed, RedisStore) and keyed.prefix == "app:"
    assert keyed.url == "redis://h:6379/0"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://u:secret@h/db", "unknown store URL scheme 'mysql'"),
        ("plait.db", "starts with its scheme"),
        ("sqlite://", "names a file"),
        ("sqlite:///", "names a file"),
        ("sqlite://relative.db", "names a file"),
    ],
)
def test_other_urls_are_usage_errors_naming_the_accepted_ones(url: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as caught:
        from_url(url)
    assert "secret" not in str(caught.value)
    if "scheme" in says:
        for scheme in ("sqlite:///", "postgresql://", "redis://", "rediss://", "memory://"):
            assert scheme in str(caught.value)
