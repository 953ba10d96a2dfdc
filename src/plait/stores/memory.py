"""`MemoryStore`: checkpoints and sessions in this process's memory."""

from __future__ import annotations

import time

from plait.errors import SessionConflict
from plait.stores.base import (
    CheckpointRecord,
    CheckpointStatus,
    ClosingStore,
    SessionRecord,
    check_expected_version,
)

__all__ = ["MemoryStore"]


class MemoryStore(ClosingStore):
    """A store in memory: for tests and single-process use (nothing survives the process)."""

    def __init__(self) -> None:
        self._checkpoints: dict[str, tuple[bytes, int, CheckpointStatus, float | None]] = {}
        self._sessions: dict[str, tuple[bytes, int, float | None]] = {}

    @staticmethod
    def _expiry(ttl: float | None) -> float | None:
        return None if ttl is None else time.monotonic() + ttl

    @staticmethod
    def _alive(expires: float | None) -> bool:
        return expires is None or time.monotonic() < expires

    async def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        """Return the checkpoint, or None."""
        found = self._checkpoints.get(checkpoint_id)
        if found is None or not self._alive(found[3]):
            return None
        data, version, status, _ = found
        return CheckpointRecord(
            checkpoint_id=checkpoint_id, data=data, version=version, status=status
        )

    async def put_checkpoint(
        self,
        checkpoint_id: str,
        data: bytes,
        *,
        status: CheckpointStatus = "pending",
        ttl: float | None = None,
    ) -> int:
        """Write the checkpoint; return its new version."""
        previous = self._checkpoints.get(checkpoint_id)
        version = previous[1] + 1 if previous is not None else 1
        self._checkpoints[checkpoint_id] = (bytes(data), version, status, self._expiry(ttl))
        return version

    async def claim_checkpoint(self, checkpoint_id: str, version: int) -> bool:
        """Move pending@version to claimed; False if another resume won."""
        found = self._checkpoints.get(checkpoint_id)
        if found is None or not self._alive(found[3]):
            return False
        data, current, status, expires = found
        if current != version or status != "pending":
            return False
        self._checkpoints[checkpoint_id] = (data, current + 1, "claimed", expires)
        return True

    async def delete_checkpoint(self, checkpoint_id: str) -> None:
        """Delete the checkpoint."""
        self._checkpoints.pop(checkpoint_id, None)

    async def get_session_record(self, session_id: str) -> SessionRecord | None:
        """Return the session with its version, or None."""
        found = self._sessions.get(session_id)
        if found is None or not self._alive(found[2]):
            return None
        return SessionRecord(session_id=session_id, data=found[0], version=found[1])

    async def put_session(
        self,
        session_id: str,
        data: bytes,
        *,
        ttl: float | None = None,
        expected_version: int | None = None,
    ) -> int:
        """Write the session, if at `expected_version` when given; return its new version."""
        check_expected_version(expected_version)
        # no await from the read to the write: nothing else runs in between
        found = self._sessions.get(session_id)
        current = found[1] if found is not None and self._alive(found[2]) else 0
        if expected_version is not None and expected_version != current:
            raise SessionConflict(
                session_id=session_id, version=current, expected_version=expected_version
            )
        self._sessions[session_id] = (bytes(data), current + 1, self._expiry(ttl))
        return current + 1

    async def delete_session(self, session_id: str) -> None:
        """Delete the session."""
        self._sessions.pop(session_id, None)

    async def close(self) -> None:
        """Nothing to release."""
