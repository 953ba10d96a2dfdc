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
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Literal, NoReturn, Protocol, TypeVar, runtime_checkable

from plait._util.closing import Closing
from plait._util.record import record
from plait.errors import PlaitError, SessionConflict, StoreError
from plait.stores._checks import (
    MAX_BATCH,
    MAX_ID_LENGTH,
    MAX_RUN_ID_LENGTH,
    MAX_TTL,
    check_expected_version,
    check_id,
    check_ttl,
    check_writes,
)

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
        if ttl is not None:
            check_ttl(ttl)
        return await self._put_checkpoint(checkpoint_id, bytes(data), status, ttl)

    async def put_checkpoints(
        self, writes: Sequence[CheckpointWrite], *, ttl: float | None = None, flush: bool = True
    ) -> list[int]:
        """Write several checkpoints in one atomic write; return their versions."""
        check_writes(writes)
        if ttl is not None:
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
        if ttl is not None:
            check_ttl(ttl)
        if expected_version is not None and (
            type(expected_version) is not int or expected_version < 0
        ):
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


#: How a store's class takes a batch of checkpoint writes (`_batch_writer`).
_BATCH_WRITERS: dict[type, int] = {}
_ONE_BY_ONE, _AT_ONCE, _CHECKED = 1, 2, 3


def _batch_writer(store: object) -> int:
    """Return how `store` takes a batch of checkpoint writes (known per class): one by one,
    at once, or at once refusing a bad batch (`check_writes`) before writing any of it."""
    if not isinstance(store, CheckpointBatchStore):
        how = _ONE_BY_ONE
    else:
        how = _CHECKED if getattr(type(store), "put_checkpoints", None) in _CHECKING else _AT_ONCE
    _BATCH_WRITERS[type(store)] = how
    return how


def _store_error(store: object, operation: str, exc: Exception) -> StoreError:
    """Return the `StoreError` of a GuardedStore for the failure `exc` of `operation`."""
    return StoreError(
        f"{operation} failed in {store!r}: {type(exc).__name__}: {exc}", operation=operation
    )


@dataclasses.dataclass(eq=False, repr=False)
class StoreView:
    """A store seen through another: each id goes through `_checkpoint_key` or
    `_session_key` on its way to `store`, and each operation through `_call`; records and
    conflicts come back under the ids they were asked for."""

    store: Store
    # whether the class keeps the ids as they are (its `_checkpoint_key` and `_session_key`
    # are these), and runs each operation itself rather than through a `_call` of its own
    # (a GuardedStore does, its failures made `StoreError`s: `_guards`)
    _keeps_ids: ClassVar[bool] = True
    _direct: ClassVar[bool] = True
    _guards: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._keeps_ids = (
            cls._checkpoint_key is StoreView._checkpoint_key
            and cls._session_key is StoreView._session_key
        )
        if "_call" in vars(cls):
            cls._direct = cls._guards = False

    def _checkpoint_key(self, checkpoint_id: str) -> str:
        return checkpoint_id

    def _session_key(self, session_id: str) -> str:
        return session_id

    async def _call(self, operation: str, coro: Awaitable[_T]) -> _T:
        """Run one operation of the store."""
        del operation
        return await coro

    def _failed(self, operation: str, exc: Exception) -> NoReturn:
        """Raise the failure `exc` of an operation run directly: a GuardedStore's as a
        `StoreError` naming the operation (a `PlaitError` as it is), another view's as it is."""
        if self._guards and not isinstance(exc, PlaitError):
            raise _store_error(self.store, operation, exc) from exc
        raise exc

    async def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        """Read a checkpoint."""
        key = checkpoint_id if self._keeps_ids else self._checkpoint_key(checkpoint_id)
        get = self.store.get_checkpoint(key)
        try:
            found = await (get if self._direct else self._call(Operation.READ_CHECKPOINT, get))
        except Exception as exc:
            self._failed(Operation.READ_CHECKPOINT, exc)
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
        store: Any = self.store  # a CheckpointBatchStore unless `how` is one by one
        how = _BATCH_WRITERS.get(type(store)) or _batch_writer(store)
        if not self._keeps_ids:
            check_writes(writes)
            writes = self._keyed(writes)
        elif how != _CHECKED:  # else plait's store refuses the same ids before any write
            check_writes(writes)
        if how == _ONE_BY_ONE:
            return await self._one_by_one(writes, ttl)
        batch: Awaitable[list[int]] = store.put_checkpoints(writes, ttl=ttl, flush=flush)
        try:
            return await (batch if self._direct else self._call(Operation.WRITE_CHECKPOINT, batch))
        except Exception as exc:
            self._failed(Operation.WRITE_CHECKPOINT, exc)

    def _keyed(self, writes: Sequence[CheckpointWrite]) -> list[CheckpointWrite]:
        key = self._checkpoint_key
        return [(key(i), data, status) for i, data, status in writes]

    async def _one_by_one(self, writes: Sequence[CheckpointWrite], ttl: float | None) -> list[int]:
        store, write = self.store, Operation.WRITE_CHECKPOINT
        return [
            await self._call(write, store.put_checkpoint(i, data, status=status, ttl=ttl))
            for i, data, status in writes
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
        key = session_id if self._keeps_ids else self._session_key(session_id)
        get = self.store.get_session(key)
        try:
            return await (get if self._direct else self._call(Operation.READ_SESSION, get))
        except Exception as exc:
            self._failed(Operation.READ_SESSION, exc)

    async def get_session_record(self, session_id: str) -> SessionRecord | None:
        """Read a session with its version."""
        key = session_id if self._keeps_ids else self._session_key(session_id)
        get = self.store.get_session_record(key)
        try:
            found = await (get if self._direct else self._call(Operation.READ_SESSION, get))
        except Exception as exc:
            self._failed(Operation.READ_SESSION, exc)
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
        key = session_id if self._keeps_ids else self._session_key(session_id)
        put = self.store.put_session(key, data, ttl=ttl, expected_version=expected_version)
        try:
            return await (put if self._direct else self._call(Operation.WRITE_SESSION, put))
        except SessionConflict as conflict:
            if key == session_id:
                raise
            raise SessionConflict(
                session_id=session_id,
                version=conflict.version,
                expected_version=conflict.expected_version,
            ) from None
        except Exception as exc:
            self._failed(Operation.WRITE_SESSION, exc)

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
            raise _store_error(self.store, operation, exc) from exc


# a GuardedStore runs its operations itself (so does a subclass, unless it has a `_call`)
GuardedStore._direct = GuardedStore._guards = True

#: The batch writes that refuse a bad batch (`check_writes`) before writing any of it.
_CHECKING = {StoreView.put_checkpoints, ClosingStore.put_checkpoints}


def _note_checking(put_checkpoints: Callable[..., Any]) -> None:
    """Note that a store's `put_checkpoints` refuses a bad batch (`check_writes`) before
    writing any of it, as `ClosingStore`'s does: a view over the store leaves it that."""
    _CHECKING.add(put_checkpoints)
