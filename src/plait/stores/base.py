"""The store protocols: checkpoints and sessions, as opaque JSON bytes with versions.

A store keeps two kinds of record, each under a string id:

- a **checkpoint**: the bytes of a paused (or, with `durability="step"`, running) run, a
  `version` that grows with every write, and a `status`: "pending" (can be resumed),
  "claimed" (a resume has taken it) or "done". `claim_checkpoint` is an atomic
  compare-and-set from pending at a given version to claimed: of several concurrent resumes,
  exactly one wins.
- a **session**: the bytes of a conversation (history, values, handoffs) and a `version` that
  grows with every write, starting at 1. `put_session` with `expected_version` is an atomic
  compare-and-set: it writes only if the stored version is still the one the turn read (0:
  no session yet), else raises `SessionConflict`, so of two concurrent turns one is saved
  and the other is told, never silently lost.

Records may expire and can be deleted. Every backend passes the conformance suite in
`plait.stores.conformance`.

Every store holds the same ids and the same expiries, and refuses the rest with a
`UsageError` before it reaches its backend:

- an **id** (`check_id`) is a `str` of 1 to `MAX_ID_LENGTH` (512) characters, counted as
  code points, with no control characters (U+0000-U+001F, U+007F-U+009F: NUL, tab, newline
  ...), no line or paragraph separators (U+2028, U+2029) and no lone surrogates
  (U+D800-U+DFFF), so it encodes as UTF-8 for every backend. Anything else is allowed:
  spaces, punctuation, any script, emoji. The `Runner` takes ids of at most
  `MAX_RUN_ID_LENGTH` (256) for new runs and sessions, leaving room for the ids it derives
  from them (`"<id>.step-<n>"`).
- a **ttl** (`check_ttl`) is None (the record never expires) or a number of seconds, an
  `int` or `float` with 0 < ttl <= `MAX_TTL` (100 years, within what every backend can
  represent: Redis `PEXPIRE` milliseconds, PostgreSQL `timestamptz`). Zero, negative
  numbers, NaN, infinity, `bool` and strings are refused.

Error messages quote at most 200 characters of a bad value, with its size.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Sequence, Sized
from typing import Any, Literal, Protocol, TypeGuard, TypeVar, runtime_checkable

from plait._util.closing import Closing
from plait._util.record import record
from plait.errors import PlaitError, SessionConflict, StoreError, UsageError

_T = TypeVar("_T")

__all__ = [
    "CheckpointBatchStore",
    "CheckpointRecord",
    "CheckpointWrite",
    "ClosingStore",
    "CheckpointStatus",
    "CheckpointStore",
    "GuardedStore",
    "MAX_BATCH",
    "MAX_ID_LENGTH",
    "MAX_RUN_ID_LENGTH",
    "MAX_TTL",
    "Operation",
    "SessionRecord",
    "SessionStore",
    "StoreView",
    "Store",
    "check_expected_version",
    "check_writes",
    "check_id",
    "check_ttl",
]

CheckpointStatus = Literal["pending", "claimed", "done"]
#: One checkpoint of a batch write: its id, bytes and status.
CheckpointWrite = tuple[str, bytes, CheckpointStatus]


class Operation:
    """What each store operation is called in errors: the `operation` of a `StoreError`."""

    READ_CHECKPOINT = "reading a checkpoint"
    WRITE_CHECKPOINT = "writing a checkpoint"
    CLAIM_CHECKPOINT = "claiming a checkpoint"
    DELETE_CHECKPOINT = "deleting a checkpoint"
    READ_SESSION = "reading a session"
    WRITE_SESSION = "writing a session"
    DELETE_SESSION = "deleting a session"


@record
class CheckpointRecord:
    """A stored checkpoint: its bytes, version and status."""

    checkpoint_id: str
    data: bytes
    version: int
    status: CheckpointStatus


@record
class SessionRecord:
    """A stored session: its bytes and version."""

    session_id: str
    data: bytes
    version: int


#: The longest id a store holds, in characters (code points).
MAX_ID_LENGTH = 512
#: The longest id the `Runner` takes for a new run or session: room is left for the ids it
#: derives from it (`"<id>.step-<n>"` snapshots).
MAX_RUN_ID_LENGTH = 256
#: The most checkpoints one `put_checkpoints` writes.
MAX_BATCH = 100
#: The longest ttl, in seconds (100 years); None means no expiry.
MAX_TTL = 100 * 365 * 24 * 3600

_SHOWN = 200
_ID_RULE = (
    "ids are str of 1 to {limit} characters with no control characters (such as NUL, tab or"
    " newline), line or paragraph separators (U+2028, U+2029) or lone surrogates"
)
_BAD_ID_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _shown(value: object) -> str:
    """Return `value`'s repr, cut to 200 characters and followed by its size when longer."""
    try:
        text = repr(value)
    except ValueError:  # an int too large to turn into digits
        return f"<a {type(value).__name__} too large to show>"
    if len(text) <= _SHOWN:
        return text
    if isinstance(value, str):
        size = f"{len(value)} characters"
    elif isinstance(value, Sized):
        size = f"length {len(value)}"
    else:
        size = f"a repr of {len(text)} characters"
    return f"{text[:_SHOWN]}... ({size})"


def check_id(value: object, what: str = "id", *, max_length: int = MAX_ID_LENGTH) -> str:
    """Return `value` if it is an id every store can hold (see the module's docstring).

    `what` names the value in the error, e.g. "checkpoint_id".

    Raises:
        UsageError: It is not a str, is empty or longer than `max_length`, or holds a
            control character, a line or paragraph separator or a lone surrogate.
    """
    if isinstance(value, str) and value and len(value) <= max_length:
        bad = _BAD_ID_CHARACTER.search(value)
        if bad is None:
            return value
    rule = _ID_RULE.format(limit=max_length)
    if not isinstance(value, str):
        raise UsageError(
            f"{what} must be a str, got {type(value).__name__} {_shown(value)}; {rule}"
        )
    if not value:
        raise UsageError(f"{what} is empty; {rule}")
    if len(value) > max_length:
        raise UsageError(f"{what} {_shown(value)} is longer than {max_length} characters; {rule}")
    assert bad is not None
    raise UsageError(
        f"{what} {_shown(value)} has U+{ord(bad.group()):04X} at index {bad.start()}; {rule}"
    )


def check_ttl(ttl: object, what: str = "ttl") -> None:
    """Refuse a `ttl` that is not None or a number of seconds with 0 < ttl <= `MAX_TTL`.

    Raises:
        UsageError: It is zero, negative, NaN, infinite, above `MAX_TTL`, a bool or not a
            number.
    """
    if ttl is None:
        return
    rule = f"a number of seconds with 0 < {what} <= {MAX_TTL} (100 years), or None for no expiry"
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        raise UsageError(f"{what} must be {rule}; got {type(ttl).__name__} {_shown(ttl)}")
    if not 0 < ttl <= MAX_TTL:  # NaN fails every comparison
        raise UsageError(f"{what} must be {rule}; got {_shown(ttl)}")


def check_expected_version(expected_version: int | None) -> None:
    """Refuse an `expected_version` that is not None or a version >= 0.

    Raises:
        UsageError: It is negative or not an integer.
    """
    if expected_version is None:
        return
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        raise UsageError(f"expected_version must be an int or None, got {expected_version!r}")
    if expected_version < 0:
        raise UsageError(
            f"expected_version must be >= 0 (0: no session yet), got {expected_version}"
        )


def check_writes(writes: Sequence[CheckpointWrite]) -> None:
    """Refuse a batch of checkpoint writes with a bad id, an id twice, or more than
    `MAX_BATCH` writes."""
    ids = [checkpoint_id for checkpoint_id, _, _ in writes]
    try:  # all of them at once; one by one only to name a bad one, as `check_id` does
        good = _BAD_ID_CHARACTER.search("".join(ids)) is None
    except TypeError:  # not all of them are str
        good = False
    if not good or not all(0 < len(checkpoint_id) <= MAX_ID_LENGTH for checkpoint_id in ids):
        ids = [check_id(checkpoint_id, "checkpoint_id") for checkpoint_id in ids]
    if len(set(ids)) != len(writes) or len(writes) > MAX_BATCH:
        raise UsageError(f"put_checkpoints writes at most {MAX_BATCH} distinct checkpoint ids")


@runtime_checkable
class CheckpointStore(Protocol):
    """Where paused runs are kept until they are resumed."""

    async def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        """Return the checkpoint, or None if there is none (or it expired)."""
        ...

    async def put_checkpoint(
        self,
        checkpoint_id: str,
        data: bytes,
        *,
        status: CheckpointStatus = "pending",
        ttl: float | None = None,
    ) -> int:
        """Write the checkpoint (replacing any), committed before returning; return its version."""
        ...

    async def claim_checkpoint(self, checkpoint_id: str, version: int) -> bool:
        """Atomically move the checkpoint from pending at `version` to claimed.

        Return False when it is not pending at that version (another resume won).
        """
        ...

    async def delete_checkpoint(self, checkpoint_id: str) -> None:
        """Delete the checkpoint if it exists."""
        ...


@runtime_checkable
class CheckpointBatchStore(Protocol):
    """A store that writes several checkpoints at once (plait's own stores do); a run's
    step save is one such write. Stores without it get the writes one by one, in order."""

    async def put_checkpoints(
        self, writes: Sequence[CheckpointWrite], *, ttl: float | None = None, flush: bool = True
    ) -> list[int]:
        """Write every checkpoint of `writes` (distinct ids) in one atomic write, committed
        before returning; return their versions, in order.

        `flush=False` allows a backend to commit without waiting for its disk (PostgreSQL's
        asynchronous commit): the write is seen by every client and survives their crash,
        and a crash of the server itself may lose it.
        """
        ...


@runtime_checkable
class SessionStore(Protocol):
    """Where conversations are kept between turns."""

    async def get_session(self, session_id: str) -> bytes | None:
        """Return the session's bytes, or None if there is none (or it expired)."""
        ...

    async def get_session_record(self, session_id: str) -> SessionRecord | None:
        """Return the session with its version, or None if there is none (or it expired)."""
        ...

    async def put_session(
        self,
        session_id: str,
        data: bytes,
        *,
        ttl: float | None = None,
        expected_version: int | None = None,
    ) -> int:
        """Write the session, committed before returning; return its new version.

        With `expected_version` None the write replaces any session. Otherwise it is an
        atomic compare-and-set: it happens only if the stored version is `expected_version`
        (0: only if there is no session, or it expired).

        Raises:
            SessionConflict: The stored version is not `expected_version`.
            UsageError: `expected_version` is negative.
        """
        ...

    async def delete_session(self, session_id: str) -> None:
        """Delete the session if it exists."""
        ...


class ClosingStore(Closing):
    """The common part of plait's stores: every id, ttl and `expected_version` checked (and
    the data copied to `bytes`) before the backend's own `_get_checkpoint`, `_put_checkpoint`,
    `_claim_checkpoint`, `_delete_checkpoint`, `_get_session_record`, `_put_session` and
    `_delete_session` see them, `get_session` read through `get_session_record`, and
    `async with` support (the block's end closes the store)."""

    async def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        """Return the checkpoint, or None."""
        check_id(checkpoint_id, "checkpoint_id")
        return await self._get_checkpoint(checkpoint_id)

    async def put_checkpoint(
        self,
        checkpoint_id: str,
        data: bytes,
        *,
        status: CheckpointStatus = "pending",
        ttl: float | None = None,
    ) -> int:
        """Write the checkpoint; return its new version."""
        check_id(checkpoint_id, "checkpoint_id")
        check_ttl(ttl)
        return await self._put_checkpoint(checkpoint_id, bytes(data), status, ttl)

    async def put_checkpoints(
        self, writes: Sequence[CheckpointWrite], *, ttl: float | None = None, flush: bool = True
    ) -> list[int]:
        """Write several checkpoints in one atomic write; return their versions."""
        check_writes(writes)
        check_ttl(ttl)
        batch = [(checkpoint_id, bytes(data), status) for checkpoint_id, data, status in writes]
        return await self._put_checkpoints(batch, ttl, flush) if batch else []

    async def claim_checkpoint(self, checkpoint_id: str, version: int) -> bool:
        """Move pending@version to claimed; False if another resume won."""
        check_id(checkpoint_id, "checkpoint_id")
        return await self._claim_checkpoint(checkpoint_id, version)

    async def delete_checkpoint(self, checkpoint_id: str) -> None:
        """Delete the checkpoint."""
        check_id(checkpoint_id, "checkpoint_id")
        await self._delete_checkpoint(checkpoint_id)

    async def get_session_record(self, session_id: str) -> SessionRecord | None:
        """Return the session with its version, or None."""
        check_id(session_id, "session_id")
        return await self._get_session_record(session_id)

    async def get_session(self, session_id: str) -> bytes | None:
        """Return the session's bytes, or None."""
        found = await self.get_session_record(session_id)
        return None if found is None else found.data

    async def put_session(
        self,
        session_id: str,
        data: bytes,
        *,
        ttl: float | None = None,
        expected_version: int | None = None,
    ) -> int:
        """Write the session, if at `expected_version` when given; return its new version."""
        check_id(session_id, "session_id")
        check_ttl(ttl)
        check_expected_version(expected_version)
        return await self._put_session(session_id, bytes(data), ttl, expected_version)

    async def delete_session(self, session_id: str) -> None:
        """Delete the session."""
        check_id(session_id, "session_id")
        await self._delete_session(session_id)

    async def _get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        """Read the checkpoint (each store defines this)."""
        raise NotImplementedError

    async def _put_checkpoint(
        self, checkpoint_id: str, data: bytes, status: CheckpointStatus, ttl: float | None
    ) -> int:
        """Write the checkpoint and return its version (each store defines this)."""
        raise NotImplementedError

    async def _put_checkpoints(
        self, writes: list[CheckpointWrite], ttl: float | None, flush: bool
    ) -> list[int]:
        """Write the checkpoints; return their versions (one by one unless a store can do
        better)."""
        del flush
        return [await self._put_checkpoint(i, data, status, ttl) for i, data, status in writes]

    async def _claim_checkpoint(self, checkpoint_id: str, version: int) -> bool:
        """Claim the checkpoint (each store defines this)."""
        raise NotImplementedError

    async def _delete_checkpoint(self, checkpoint_id: str) -> None:
        """Delete the checkpoint (each store defines this)."""
        raise NotImplementedError

    async def _get_session_record(self, session_id: str) -> SessionRecord | None:
        """Read the session with its version (each store defines this)."""
        raise NotImplementedError

    async def _put_session(
        self, session_id: str, data: bytes, ttl: float | None, expected_version: int | None
    ) -> int:
        """Write the session and return its version (each store defines this)."""
        raise NotImplementedError

    async def _delete_session(self, session_id: str) -> None:
        """Delete the session (each store defines this)."""
        raise NotImplementedError

    async def _conflict(self, session_id: str, expected_version: int) -> SessionConflict:
        """Return the error for a compare-and-set that did not hold, naming what is stored."""
        found = await self.get_session_record(session_id)
        return SessionConflict(
            session_id=session_id,
            version=0 if found is None else found.version,
            expected_version=expected_version,
        )

    async def _written(
        self, session_id: str, expected_version: int | None, rows: Sequence[Sequence[Any]]
    ) -> int:
        """Return the version in the first row a session write returned; with no row (the
        compare-and-set did not hold), raise the conflict.

        Raises:
            SessionConflict: No row, so the stored version was not `expected_version`.
        """
        if rows or expected_version is None:
            return int(rows[0][0])
        raise await self._conflict(session_id, expected_version)


@runtime_checkable
class Store(CheckpointStore, SessionStore, Protocol):
    """A store of both checkpoints and sessions, closed with `await store.close()`."""

    async def close(self) -> None:
        """Release connections; the store can be opened again by the next use."""
        ...


_BATCH_WRITERS: dict[type, bool] = {}  # whether a store's class is a CheckpointBatchStore


def _writes_batches(store: object) -> TypeGuard[CheckpointBatchStore]:
    """Return whether `store` writes several checkpoints at once (known per class)."""
    kind = type(store)
    found = _BATCH_WRITERS.get(kind)
    if found is None:
        found = _BATCH_WRITERS[kind] = isinstance(store, CheckpointBatchStore)
    return found


@dataclasses.dataclass(eq=False, repr=False)
class StoreView:
    """A store seen through another: each id goes through `_checkpoint_key` or
    `_session_key` on its way to `store`, and each operation through `_call`; records and
    conflicts come back under the ids they were asked for."""

    store: Store

    def _checkpoint_key(self, checkpoint_id: str) -> str:
        return checkpoint_id

    def _session_key(self, session_id: str) -> str:
        return session_id

    async def _call(self, operation: str, coro: Awaitable[_T]) -> _T:
        """Run one operation of the store."""
        del operation
        return await coro

    async def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        """Read a checkpoint."""
        get = self.store.get_checkpoint(self._checkpoint_key(checkpoint_id))
        found = await self._call(Operation.READ_CHECKPOINT, get)
        if found is None or found.checkpoint_id == checkpoint_id:
            return found
        return CheckpointRecord(
            checkpoint_id=checkpoint_id, data=found.data, version=found.version, status=found.status
        )

    async def put_checkpoint(
        self,
        checkpoint_id: str,
        data: bytes,
        *,
        status: CheckpointStatus = "pending",
        ttl: float | None = None,
    ) -> int:
        """Write a checkpoint."""
        key = self._checkpoint_key(checkpoint_id)
        return await self._call(
            Operation.WRITE_CHECKPOINT, self.store.put_checkpoint(key, data, status=status, ttl=ttl)
        )

    async def put_checkpoints(
        self, writes: Sequence[CheckpointWrite], *, ttl: float | None = None, flush: bool = True
    ) -> list[int]:
        """Write several checkpoints: at once when the store can, else one by one, in order."""
        store, key = self.store, self._checkpoint_key
        same = type(self)._checkpoint_key is StoreView._checkpoint_key
        if not same or getattr(type(store), "put_checkpoints", None) not in _CHECKING:
            check_writes(writes)  # else plait's store refuses the same ids before any write
        keyed = writes if same else [(key(i), data, status) for i, data, status in writes]
        if _writes_batches(store):
            batch = store.put_checkpoints(keyed, ttl=ttl, flush=flush)
            return await self._call(Operation.WRITE_CHECKPOINT, batch)
        write = Operation.WRITE_CHECKPOINT
        return [
            await self._call(write, store.put_checkpoint(*w[:2], status=w[2], ttl=ttl))
            for w in keyed
        ]

    async def claim_checkpoint(self, checkpoint_id: str, version: int) -> bool:
        """Claim a checkpoint (compare-and-set from pending at `version`)."""
        claim = self.store.claim_checkpoint(self._checkpoint_key(checkpoint_id), version)
        return await self._call(Operation.CLAIM_CHECKPOINT, claim)

    async def delete_checkpoint(self, checkpoint_id: str) -> None:
        """Delete a checkpoint."""
        delete = self.store.delete_checkpoint(self._checkpoint_key(checkpoint_id))
        await self._call(Operation.DELETE_CHECKPOINT, delete)

    async def get_session(self, session_id: str) -> bytes | None:
        """Read a session."""
        get = self.store.get_session(self._session_key(session_id))
        return await self._call(Operation.READ_SESSION, get)

    async def get_session_record(self, session_id: str) -> SessionRecord | None:
        """Read a session with its version."""
        get = self.store.get_session_record(self._session_key(session_id))
        found = await self._call(Operation.READ_SESSION, get)
        if found is None or found.session_id == session_id:
            return found
        return SessionRecord(session_id=session_id, data=found.data, version=found.version)

    async def put_session(
        self,
        session_id: str,
        data: bytes,
        *,
        ttl: float | None = None,
        expected_version: int | None = None,
    ) -> int:
        """Write a session (compare-and-set with `expected_version`); a `SessionConflict`
        passes through, under `session_id`."""
        key = self._session_key(session_id)
        put = self.store.put_session(key, data, ttl=ttl, expected_version=expected_version)
        try:
            return await self._call(Operation.WRITE_SESSION, put)
        except SessionConflict as conflict:
            if key == session_id:
                raise
            raise SessionConflict(
                session_id=session_id,
                version=conflict.version,
                expected_version=conflict.expected_version,
            ) from None

    async def delete_session(self, session_id: str) -> None:
        """Delete a session."""
        delete = self.store.delete_session(self._session_key(session_id))
        await self._call(Operation.DELETE_SESSION, delete)

    async def close(self) -> None:
        """Close the store seen through."""
        await self._call("closing the store", self.store.close())


class GuardedStore(StoreView):
    """Wrap a store so that its failures are `StoreError`s naming the operation."""

    def __repr__(self) -> str:
        return repr(self.store)

    async def _call(self, operation: str, coro: Awaitable[_T]) -> _T:
        try:
            return await coro
        except PlaitError:
            raise
        except Exception as exc:
            err = StoreError(
                f"{operation} failed in {self.store!r}: {type(exc).__name__}: {exc}",
                operation=operation,
            )
            raise err from exc


#: The batch writes that refuse a bad batch (`check_writes`) before writing any of it.
_CHECKING = (StoreView.put_checkpoints, ClosingStore.put_checkpoints)
