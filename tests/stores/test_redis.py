"""RedisStore passes the conformance suite against a real server, and keeps its promises.

The server is `PLAIT_TEST_REDIS_URL` (default `redis://127.0.0.1:6379/0`); the tests skip
when none answers. Every test uses its own key prefix and deletes its keys afterwards.
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from plait.errors import SessionConflict, UsageError
from plait.stores import SessionRecord
from plait.stores.conformance import CHECKS, Check, two_clients_save_one_of_two_turns
from plait.stores.redis import RedisStore, _import_redis

DEFAULT_URL = "redis://127.0.0.1:6379/0"

UNCLOSED_WRITER = """
import asyncio, sys
from plait.stores.redis import RedisStore

store = RedisStore(sys.argv[1], prefix=sys.argv[2])


async def main() -> None:
    await store.put_session("s", b"written")
    await store.put_checkpoint("c", b"written", ttl=60)


if sys.argv[3] == "run":
    asyncio.run(main())
else:
    asyncio.new_event_loop().run_until_complete(main())
print("written")
"""


@pytest.fixture(scope="session")
def redis_url() -> str:
    """Return the test server's URL, or skip when no server answers there."""
    redis = pytest.importorskip("redis")
    url = os.environ.get("PLAIT_TEST_REDIS_URL", DEFAULT_URL)
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        pytest.skip(f"no Redis server at {url}: {exc}")
    finally:
        client.close()
    return str(url)


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """Return a fresh key prefix; delete every key under it afterwards."""
    import redis

    prefix = f"plait-test-{uuid.uuid4().hex}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
async def store(redis_url: str, prefix: str) -> AsyncIterator[RedisStore]:
    """Return a RedisStore on the test server, closed afterwards."""
    async with RedisStore(redis_url, prefix=prefix) as opened:
        yield opened


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[Any]:
    """Return a plain `redis.asyncio` client on the test server."""
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_redis_store_conforms(check: Check, store: RedisStore) -> None:
    await check(store)


async def test_records_use_the_documented_keys(store: RedisStore, raw: Any, prefix: str) -> None:
    odd = "a b/'c\" ; *"
    version = await store.put_checkpoint(odd, b"\x00data", status="done")
    await store.put_session(odd, b"session")
    assert await raw.hgetall(f"{prefix}cp:{odd}") == {
        b"data": b"\x00data",
        b"version": str(version).encode(),
        b"status": b"done",
    }
    assert await raw.hgetall(f"{prefix}session:{odd}") == {b"data": b"session", b"version": b"1"}


async def test_concurrent_claims_from_two_clients_have_one_winner(
    redis_url: str, prefix: str
) -> None:
    async with (
        RedisStore(redis_url, prefix=prefix) as first,
        RedisStore(redis_url, prefix=prefix) as second,
    ):
        version = await first.put_checkpoint("cp", b"x")
        claims = [s.claim_checkpoint("cp", version) for s in (first, second) for _ in range(8)]
        results = await asyncio.gather(*claims)
        assert sum(results) == 1
        record = await second.get_checkpoint("cp")
        assert record is not None
        assert (record.status, record.version) == ("claimed", version + 1)


async def test_concurrent_turns_from_two_clients_save_one(redis_url: str, prefix: str) -> None:
    async with (
        RedisStore(redis_url, prefix=prefix) as first,
        RedisStore(redis_url, prefix=prefix) as second,
    ):
        await two_clients_save_one_of_two_turns(first, second)


async def test_sessions_kept_as_strings_read_as_version_one(
    store: RedisStore, raw: Any, prefix: str
) -> None:
    key = f"{prefix}session:s"
    await raw.set(key, b"history")
    assert await store.get_session("s") == b"history"
    assert await store.get_session_record("s") == SessionRecord(
        session_id="s", data=b"history", version=1
    )
    with pytest.raises(SessionConflict):
        await store.put_session("s", b"as if new", expected_version=0)
    assert await raw.get(key) == b"history"
    assert await store.put_session("s", b"next turn", expected_version=1, ttl=30) == 2
    assert await raw.hgetall(key) == {b"data": b"next turn", b"version": b"2"}
    assert 0 < await raw.pttl(key) <= 30_000


def test_one_store_serves_successive_event_loops(redis_url: str, prefix: str) -> None:
    store = RedisStore(redis_url, prefix=prefix)

    async def write() -> int:
        return await store.put_checkpoint("cp", b"first loop")

    async def claim(version: int) -> bool:
        return await store.claim_checkpoint("cp", version)

    version = asyncio.run(write())
    assert asyncio.run(claim(version))
    record = asyncio.run(store.get_checkpoint("cp"))
    assert record is not None and record.status == "claimed"
    asyncio.run(store.close())
    gc.collect()


async def test_ttl_sets_and_clears_the_redis_expiry(
    store: RedisStore, raw: Any, prefix: str
) -> None:
    cp_key, session_key = f"{prefix}cp:cp", f"{prefix}session:s"
    await store.put_checkpoint("cp", b"x", ttl=30)
    await store.put_session("s", b"y", ttl=30)
    assert 0 < await raw.pttl(cp_key) <= 30_000
    assert 0 < await raw.pttl(session_key) <= 30_000
    await store.put_checkpoint("cp", b"x")
    await store.put_session("s", b"y")
    assert await raw.pttl(cp_key) == -1
    assert await raw.pttl(session_key) == -1


async def test_claiming_keeps_the_expiry(store: RedisStore, raw: Any, prefix: str) -> None:
    version = await store.put_checkpoint("cp", b"x", ttl=30)
    assert await store.claim_checkpoint("cp", version)
    assert 0 < await raw.pttl(f"{prefix}cp:cp") <= 30_000


@pytest.mark.parametrize("runner", ["run", "open-loop"])
async def test_an_unclosed_store_does_not_keep_the_process_alive(
    redis_url: str, prefix: str, raw: Any, runner: str
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        UNCLOSED_WRITER,
        redis_url,
        prefix,
        runner,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    except TimeoutError:
        process.kill()
        await process.wait()
        pytest.fail("the process did not exit within 30 seconds")
    assert process.returncode == 0, err.decode()
    assert out.strip() == b"written"
    assert await raw.hget(f"{prefix}session:s", "data") == b"written"


def test_missing_redis_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    expected = re.escape('pip install "plait[redis]"')
    with pytest.raises(UsageError, match=expected):
        _import_redis()
    with pytest.raises(UsageError, match=expected):
        RedisStore()
