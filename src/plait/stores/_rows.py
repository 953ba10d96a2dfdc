"""Records read back from the rows of a SQL store (`SqliteStore`, `PostgresStore`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from plait.stores.base import CheckpointRecord, CheckpointStatus, SessionRecord

__all__ = ["checkpoint_from_rows", "session_from_rows"]


def checkpoint_from_rows(
    checkpoint_id: str, rows: Sequence[Sequence[Any]]
) -> CheckpointRecord | None:
    """Return the checkpoint the first row holds (data, version, status), or None if no row."""
    if not rows:
        return None
    data, version, status = rows[0]
    return CheckpointRecord(
        checkpoint_id=checkpoint_id,
        data=bytes(data),
        version=int(version),
        status=cast("CheckpointStatus", status),
    )


def session_from_rows(session_id: str, rows: Sequence[Sequence[Any]]) -> SessionRecord | None:
    """Return the session the first row holds (data, version), or None if no row."""
    if not rows:
        return None
    data, version = rows[0]
    return SessionRecord(session_id=session_id, data=bytes(data), version=int(version))
