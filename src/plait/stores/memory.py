"""`MemoryStore`: checkpoints and sessions in this process's memory."""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

from plait.errors import SessionConflict
from plait.stores.base import (
    CheckpointRecord,
    CheckpointStatus,
    CheckpointWrite,
    ClosingStore,
    SessionRecord,
    _note_checking,
    check_expected_version,
    check_id,
    check_ttl,
    check_writes,
)

__all__ = ["MemoryStore"]

_Kind = Literal["checkpoint", "session"]


class MemoryStore(ClosingStore):
    """A store in memory: for tests and single-process use (nothing survives the process).

    Expired records read as absent, and every `put_checkpoint` and `put_session` first drops
    all the records that have expired (a heap of expiry times keeps that cheap: a write
    before the first expiry only compares it with the clock), so the memory held is bounded
    by the live records plus those that expired since the last write. `len(store)` is the
    number of records held. `clock` is where the store reads the time (seconds, only ever
    compared; default `time.monotonic`): a test passes its own to let ttls pass without
    waiting.

    Its `put_checkpoints`, `put_session`, `get_session_record` and `get_session` do their
    work themselves, rather than through `_put_checkpoint`, `_put_session` and
    `_get_session_record`, except in a subclass that changes one of those (or
    `get_session_record`): there they call it, as `ClosingStore`'s do.
    """

    #: Whether the class's public methods do their work themselves (see above).
    _by_itself: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._by_itself = all(getattr(cls, name) is getattr(MemoryStore, name) for name in _THROUGH)

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._checkpoints: dict[str, tuple[bytes, int, CheckpointStatus, float | None]] = {}
        self._sessions: dict[str, tuple[bytes, int, float | None]] = {}
        # (expiry, kind, id) of each write with a ttl; a later write of the id leaves the
        # entry stale: skipped when it comes up, gone when the heap is rebuilt
        self._expiries: list[tuple[float, _Kind, str]] = []
        self._due = math.inf  # the heap's first expiry (none: never)

    def __len__(self) -> int:
        """Return the number of records held: checkpoints plus sessions, counting expired
        ones that no write has dropped yet."""
        return len(self._checkpoints) + len(self._sessions)

    def __bool__(self) -> bool:
        """Return True: a store is a store even when it holds nothing."""
        return True

    def _expiry(self, kind: _Kind, record_id: str, ttl: float) -> float:
        """Return when a record written now with `ttl` expires, and note it for dropping."""
        held = len(self._checkpoints) + len(self._sessions)
        if len(self._expiries) > 2 * held + 64:  # mostly entries that writes made stale
            self._rebuild_expiries()
        expires = self._clock() + ttl
        heapq.heappush(self._expiries, (expires, kind, record_id))
        if expires < self._due:
            self._due = expires
        return expires

    def _alive(self, expires: float | None) -> bool:
        return expires is None or self._clock() < expires

    def _drop_expired(self) -> None:
        """Drop every record that has expired (a write calls this once the clock reaches
        `_due`: until then, none has)."""
        now, heap = self._clock(), self._expiries
        while heap and heap[0][0] <= now:
            expires, kind, record_id = heapq.heappop(heap)
            if kind == "checkpoint":
                checkpoint = self._checkpoints.get(record_id)
                if checkpoint is not None and checkpoint[3] == expires:
                    del self._checkpoints[record_id]
            else:
                session = self._sessions.get(record_id)
                if session is not None and session[2] == expires:
                    del self._sessions[record_id]
        if len(heap) > 2 * len(self) + 64:
            self._rebuild_expiries()
        self._due = self._expiries[0][0] if self._expiries else math.inf

    def _rebuild_expiries(self) -> None:
        """Rebuild the heap from the records held, leaving out stale entries."""
        heap: list[tuple[float, _Kind, str]] = []
        for key, (_, _, _, expires) in self._checkpoints.items():
            if expires is not None:
                heap.append((expires, "checkpoint", key))
        for key, (_, _, session_expires) in self._sessions.items():
            if session_expires is not None:
                heap.append((session_expires, "session", key))
        heapq.heapify(heap)
        self._expiries = heap
        self._due = heap[0][0] if heap else math.inf

    async def _get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        """Return the checkpoint, or None."""
        found = self._checkpoints.get(checkpoint_id)
        if found is None or (found[3] is not None and not self._clock() < found[3]):
            return None
        data, version, status, _ = found
        return CheckpointRecord(
            checkpoint_id=checkpoint_id, data=data, version=version, status=status
        )

    async def _put_checkpoint(
        self, checkpoint_id: str, data: bytes, status: CheckpointStatus, ttl: float | None
    ) -> int:
        """Write the checkpoint; return its new version."""
        return self._write_checkpoint(checkpoint_id, data, status, ttl)

    async def put_checkpoints(
        self, writes: Sequence[CheckpointWrite], *, ttl: float | None = None, flush: bool = True
    ) -> list[int]:
        """Write several checkpoints in one atomic write; return their versions."""
        if not self._by_itself:
            return await ClosingStore.put_checkpoints(self, writes, ttl=ttl, flush=flush)
        check_writes(writes)  # the checks of `ClosingStore.put_checkpoints`
        if ttl is not None:
            check_ttl(ttl)
        batch = [(checkpoint_id, bytes(data), status) for checkpoint_id, data, status in writes]
        checkpoints, versions = self._checkpoints, []
        for checkpoint_id, data, status in batch:  # each as `_write_checkpoint` writes it
            if self._due <= self._clock():
                self._drop_expired()
            previous = checkpoints.get(checkpoint_id)
            version = previous[1] + 1 if previous is not None else 1
            expires = None if ttl is None else self._expiry("checkpoint", checkpoint_id, ttl)
            checkpoints[checkpoint_id] = (data, version, status, expires)
            versions.append(version)
        return versions

    def _write_checkpoint(
        self, checkpoint_id: str, data: bytes, status: CheckpointStatus, ttl: float | None
    ) -> int:
        if self._due <= self._clock():
            self._drop_expired()
        previous = self._checkpoints.get(checkpoint_id)
        version = previous[1] + 1 if previous is not None else 1
        expires = None if ttl is None else self._expiry("checkpoint", checkpoint_id, ttl)
        self._checkpoints[checkpoint_id] = (data, version, status, expires)
        return version

    async def _claim_checkpoint(self, checkpoint_id: str, version: int) -> bool:
        """Move pending@version to claimed; False if another resume won."""
        found = self._checkpoints.get(checkpoint_id)
        if found is None or not self._alive(found[3]):
            return False
        data, current, status, expires = found
        if current != version or status != "pending":
            return False
        self._checkpoints[checkpoint_id] = (data, current + 1, "claimed", expires)
        return True

    async def _delete_checkpoint(self, checkpoint_id: str) -> None:
        """Delete the checkpoint."""
        self._checkpoints.pop(checkpoint_id, None)

    async def get_session_record(self, session_id: str) -> SessionRecord | None:
        """Return the session with its version, or None."""
        if not self._by_itself:
            return await ClosingStore.get_session_record(self, session_id)
        check_id(session_id, "session_id")
        found = self._sessions.get(session_id)
        if found is None or (found[2] is not None and not self._clock() < found[2]):
            return None
        return SessionRecord(session_id=session_id, data=found[0], version=found[1])

    async def get_session(self, session_id: str) -> bytes | None:
        """Return the session's bytes, or None."""
        if not self._by_itself:
            return await ClosingStore.get_session(self, session_id)
        check_id(session_id, "session_id")
        found = self._sessions.get(session_id)
        if found is None or (found[2] is not None and not self._clock() < found[2]):
            return None
        return found[0]

    async def put_session(
        self,
        session_id: str,
        data: bytes,
        *,
        ttl: float | None = None,
        expected_version: int | None = None,
    ) -> int:
        """Write the session, if at `expected_version` when given; return its new version."""
        if not self._by_itself:
            return await ClosingStore.put_session(
                self, session_id, data, ttl=ttl, expected_version=expected_version
            )
        # the checks of `ClosingStore.put_session`
        check_id(session_id, "session_id")
        if ttl is not None:
            check_ttl(ttl)
        if expected_version is not None and (
            type(expected_version) is not int or expected_version < 0
        ):
            check_expected_version(expected_version)
        return self._write_session(session_id, bytes(data), ttl, expected_version)

    def _write_session(
        self, session_id: str, data: bytes, ttl: float | None, expected_version: int | None
    ) -> int:
        if self._due <= self._clock():
            self._drop_expired()
        # no await from the read to the write: nothing else runs in between
        found = self._sessions.get(session_id)
        if found is None:
            current = 0
        else:
            current = found[1] if found[2] is None or self._clock() < found[2] else 0
        if expected_version is not None and expected_version != current:
            raise SessionConflict(
                session_id=session_id, version=current, expected_version=expected_version
            )
        expires = None if ttl is None else self._expiry("session", session_id, ttl)
        self._sessions[session_id] = (data, current + 1, expires)
        return current + 1

    async def _get_session_record(self, session_id: str) -> SessionRecord | None:
        """Return the session with its version, or None."""
        found = self._sessions.get(session_id)
        if found is None or (found[2] is not None and not self._clock() < found[2]):
            return None
        return SessionRecord(session_id=session_id, data=found[0], version=found[1])

    async def _put_session(
        self, session_id: str, data: bytes, ttl: float | None, expected_version: int | None
    ) -> int:
        """Write the session, if at `expected_version` when given; return its new version."""
        return self._write_session(session_id, data, ttl, expected_version)

    async def _delete_session(self, session_id: str) -> None:
        """Delete the session."""
        self._sessions.pop(session_id, None)

    async def close(self) -> None:
        """Nothing to release."""


_note_checking(MemoryStore.put_checkpoints)

#: The methods that `MemoryStore`'s public ones would otherwise call.
_THROUGH = (
    "_put_checkpoint",
    "_put_checkpoints",
    "_get_session_record",
    "get_session_record",
    "_put_session",
)
