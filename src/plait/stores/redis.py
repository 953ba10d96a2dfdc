"""`RedisStore`: checkpoints and sessions in Redis, shared by every process using the server.

A checkpoint is one hash `<prefix>cp:<id>` with the fields `data`, `version` and `status`;
a session is one hash `<prefix>session:<id>` with the fields `data` and `version` (a session
kept as a plain string, as earlier versions of plait wrote it, reads as version 1 and becomes
a hash when next written). Writes and claims of checkpoints and reads and writes of sessions
are Lua scripts, so each is atomic on the server. Expiry uses Redis's own key expiry.

Needs `pip install "plait[redis]"`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncGenerator, Awaitable, Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from plait._util.quote import quote
from plait.errors import SessionConflict, UsageError
from plait.stores._network import (
    DEFAULT_TIMEOUT,
    check_timeout,
    failed,
    timed_out,
    url_address,
)
from plait.stores.base import (
    CheckpointRecord,
    CheckpointStatus,
    ClosingStore,
    Operation,
    SessionRecord,
)

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

__all__ = ["RedisStore"]

_T = TypeVar("_T")

#: The longest key prefix, in characters.
MAX_PREFIX = 128


# KEYS[1] = checkpoint key; ARGV = data, status, ttl in ms ("" for none).
_PUT = """
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[1], 'data', ARGV[1], 'status', ARGV[2])
if ARGV[3] == '' then
  redis.call('PERSIST', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return version
"""

# KEYS[1] = checkpoint key; ARGV[1] = the version to claim.
_CLAIM = """
if redis.call('HGET', KEYS[1], 'status') == 'pending'
    and redis.call('HGET', KEYS[1], 'version') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'status', 'claimed')
  redis.call('HINCRBY', KEYS[1], 'version', 1)
  return 1
end
return 0
"""


# KEYS[1] = session key. Returns {data, version}, or nil when there is no session.
_GET_SESSION = """
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' then
  return {redis.call('GET', KEYS[1]), '1'}
elseif kind == 'hash' then
  return redis.call('HMGET', KEYS[1], 'data', 'version')
end
return false
"""

# KEYS[1] = session key; ARGV = data, ttl in ms ("" for none), expected version ("" for any).
# Returns {1, new version} when written, {0, stored version} when not.
_PUT_SESSION = """
local kind = redis.call('TYPE', KEYS[1])['ok']
local current = 0
if kind == 'hash' then
  current = tonumber(redis.call('HGET', KEYS[1], 'version')) or 0
elseif kind == 'string' then
  current = 1
end
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= current then
  return {0, current}
end
if kind ~= 'hash' then
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'data', ARGV[1], 'version', current + 1)
if ARGV[2] == '' then
  redis.call('PERSIST', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {1, current + 1}
"""


def _import_redis() -> ModuleType:
    """Import `redis.asyncio`, or explain how to install it.

    Raises:
        UsageError: The `redis` package is not installed.
    """
    try:
        import redis.asyncio
    except ImportError as exc:
        raise UsageError('RedisStore needs the redis package: pip install "plait[redis]"') from exc
    return redis.asyncio


def _milliseconds(ttl: float) -> int:
    """Convert a ttl in seconds to whole milliseconds, at least 1."""
    return max(1, math.ceil(ttl * 1000))


async def _close_when_done(client: Redis) -> AsyncGenerator[None, None]:
    """Keep `client` open until this generator is closed, then close the client.

    Once started, the event loop tracks the generator and closes it when it shuts down
    (`asyncio.run` does), so a client is never left open on a closed loop.
    """
    try:
        yield
    finally:
        await client.aclose()


class _Connection:
    """A client bound to the event loop it was made in, with its registered scripts."""

    def __init__(self, client: Redis, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop
        self.put: AsyncScript = client.register_script(_PUT)
        self.claim: AsyncScript = client.register_script(_CLAIM)
        self.get_session: AsyncScript = client.register_script(_GET_SESSION)
        self.put_session: AsyncScript = client.register_script(_PUT_SESSION)
        self.closer = _close_when_done(client)


def _new_client(module: ModuleType, url: str, max_connections: int, timeout: float) -> Redis:
    """Make a client whose pool makes callers wait for a free connection (up to `timeout`)
    rather than fail, and which never sends a command twice.

    redis-py would otherwise retry a command after a connection error; a claim whose answer
    was lost would then be sent again and answered "not pending", a lie that loses the run.
    """
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    pool = module.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=timeout,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )
    return cast("Redis", module.Redis.from_pool(pool))


class RedisStore(ClosingStore):
    """A store in Redis: shared by processes and machines, with native expiry.

    The client is made on first use in each event loop, so one store can serve several
    `asyncio.run` calls in turn; each client is closed when its loop shuts down, and
    `await store.close()` (or `async with`) closes the current one.

    Every operation ends within `timeout` seconds, waiting for a free connection included:
    with its result, or with a `StoreError` that names the operation and the server's
    `host:port`. At most `max_connections` commands are in flight at once; more operations
    wait their turn rather than fail. A command is never sent twice, so a write that fails
    with a `StoreError` may or may not have been applied (the request may have reached the
    server before the answer was lost), but is never applied twice.

    Args:
        url: The server, e.g. `redis://host:6379/0` or `rediss://...` for TLS.
        prefix: Put before every key, to share a database with other data.
        timeout: Seconds each operation may take (default 10).
        max_connections: Connections open to the server at most (default 50).

    Raises:
        UsageError: The `redis` package is not installed, or the timeout or
            `max_connections` are invalid.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "plait:",
        timeout: float = DEFAULT_TIMEOUT,
        max_connections: int = 50,
    ) -> None:
        self._module = _import_redis()
        if isinstance(max_connections, bool) or not isinstance(max_connections, int):
            raise UsageError(f"max_connections must be an int, got {max_connections!r}")
        if max_connections < 1:
            raise UsageError(f"max_connections must be 1 or more, got {max_connections}")
        if not isinstance(prefix, str) or len(prefix) > MAX_PREFIX:
            raise UsageError(
                f"prefix must be a str of at most {MAX_PREFIX} characters, got {quote(prefix)}"
            )
        self.url = url
        self.prefix = prefix
        self.timeout = check_timeout("RedisStore", timeout)
        self.max_connections = max_connections
        self.address = url_address(url, 6379)
        self._connection: _Connection | None = None

    def __repr__(self) -> str:
        return f"RedisStore({quote(self.address)}, prefix={quote(self.prefix)})"

    async def _connect(self) -> _Connection:
        """Return the connection of the running loop, making it if needed."""
        loop = asyncio.get_running_loop()
        found = self._connection
        if found is None or found.loop is not loop:
            client = _new_client(self._module, self.url, self.max_connections, self.timeout)
            found = self._connection = _Connection(client, loop)
            await anext(found.closer)
        return found

    async def _call(
        self, operation: str, call: Callable[[_Connection], Awaitable[_T]], *, write: bool
    ) -> _T:
        """Run one call within `timeout`.

        Raises:
            StoreError: The time ran out, or the server or the connection failed.
        """
        try:
            async with asyncio.timeout(self.timeout):
                return await call(await self._connect())
        except (TimeoutError, self._module.TimeoutError):  # ours, or the socket's (a bit later)
            raise timed_out(operation, "Redis", self.address, self.timeout, write=write) from None
        except (self._module.RedisError, OSError) as exc:
            raise failed(operation, "Redis", self.address, exc, write=write) from exc

    def _checkpoint_key(self, checkpoint_id: str) -> str:
        return f"{self.prefix}cp:{checkpoint_id}"

    def _session_key(self, session_id: str) -> str:
        return f"{self.prefix}session:{session_id}"

    async def _get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        """Return the checkpoint, or None."""
        key = self._checkpoint_key(checkpoint_id)
        found = await self._call(
            Operation.READ_CHECKPOINT, lambda c: c.client.hgetall(key), write=False
        )
        fields = cast("dict[bytes, bytes]", found)
        if b"data" not in fields or b"version" not in fields or b"status" not in fields:
            return None
        status = cast("CheckpointStatus", fields[b"status"].decode())
        return CheckpointRecord(
            checkpoint_id=checkpoint_id,
            data=fields[b"data"],
            version=int(fields[b"version"]),
            status=status,
        )

    async def _put_checkpoint(
        self, checkpoint_id: str, data: bytes, status: CheckpointStatus, ttl: float | None
    ) -> int:
        """Write the checkpoint; return its new version."""
        expiry = "" if ttl is None else str(_milliseconds(ttl))
        keys = [self._checkpoint_key(checkpoint_id)]
        args: list[bytes | str] = [data, status, expiry]
        version: Any = await self._call(
            Operation.WRITE_CHECKPOINT, lambda c: c.put(keys=keys, args=args), write=True
        )
        return int(version)

    async def _claim_checkpoint(self, checkpoint_id: str, version: int) -> bool:
        """Move pending@version to claimed; False if another resume won."""
        keys, args = [self._checkpoint_key(checkpoint_id)], [str(version)]
        won: Any = await self._call(
            Operation.CLAIM_CHECKPOINT, lambda c: c.claim(keys=keys, args=args), write=True
        )
        return int(won) == 1

    async def _delete_checkpoint(self, checkpoint_id: str) -> None:
        """Delete the checkpoint."""
        key = self._checkpoint_key(checkpoint_id)
        await self._call(Operation.DELETE_CHECKPOINT, lambda c: c.client.delete(key), write=True)

    async def _get_session_record(self, session_id: str) -> SessionRecord | None:
        """Return the session with its version, or None."""
        keys = [self._session_key(session_id)]
        found: Any = await self._call(
            Operation.READ_SESSION, lambda c: c.get_session(keys=keys), write=False
        )
        if found is None or found[0] is None or found[1] is None:
            return None
        data, version = found
        return SessionRecord(session_id=session_id, data=bytes(data), version=int(version))

    async def _put_session(
        self, session_id: str, data: bytes, ttl: float | None, expected_version: int | None
    ) -> int:
        """Write the session, if at `expected_version` when given; return its new version."""
        expiry = "" if ttl is None else str(_milliseconds(ttl))
        expected = "" if expected_version is None else str(expected_version)
        keys = [self._session_key(session_id)]
        args: list[bytes | str] = [data, expiry, expected]
        result: Any = await self._call(
            Operation.WRITE_SESSION, lambda c: c.put_session(keys=keys, args=args), write=True
        )
        written, version = int(result[0]), int(result[1])
        if written or expected_version is None:
            return version
        raise SessionConflict(
            session_id=session_id, version=version, expected_version=expected_version
        )

    async def _delete_session(self, session_id: str) -> None:
        """Delete the session."""
        key = self._session_key(session_id)
        await self._call(Operation.DELETE_SESSION, lambda c: c.client.delete(key), write=True)

    async def close(self) -> None:
        """Close the client; the next use opens a new one.

        A client made in another loop is only dropped: that loop closes it when it shuts down.
        """
        found, self._connection = self._connection, None
        if found is not None and found.loop is asyncio.get_running_loop():
            await found.closer.aclose()
