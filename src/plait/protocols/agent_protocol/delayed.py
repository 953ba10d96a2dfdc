"""Delayed runs (`after_seconds`): runs kept in the store until their start time.

A run created with `after_seconds` has its record written at once, `pending`, and its
start kept in a server-wide document of the store (`documents.SharedDocument`) with the
moment it is due by the app's clock. Each worker's cron scheduler (`crons.Scheduler`)
claims the due ones, removing them in one compare-and-set (so one worker starts each), and
starts them; a run cancelled before it is due is removed here and never starts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from plait.protocols.agent_protocol.documents import SharedDocument
from plait.server.caller import Server
from plait.stores.base import Store

__all__ = ["aware", "claim_delayed", "clock_now", "delay_run", "drop_delayed"]

_DOC = "delayed"


def aware(moment: datetime) -> datetime:
    """Return `moment` with a time zone (a naive one is taken as UTC)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def clock_now(server: Server) -> datetime:
    """Return this moment by the app's clock (`create_app(clock=...)`), in UTC."""
    return aware(server.clock()).astimezone(UTC)


async def delay_run(
    store: Store, run_id: str, user: str, thread_id: str, body: dict[str, Any], at: datetime
) -> None:
    """Keep run `run_id` of `user`'s thread (its `runs.create` body) until `at`."""
    start = {"user": user, "thread_id": thread_id, "body": body, "at": at.isoformat()}

    def add(stored: dict[str, Any]) -> None:
        stored[run_id] = start

    await SharedDocument(store, _DOC).change(add)


async def claim_delayed(store: Store, moment: datetime) -> list[tuple[str, dict[str, Any]]]:
    """Remove and return the delayed runs due at `moment` (run id, its start)."""

    def claim(stored: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        due = [(k, v) for k, v in stored.items() if datetime.fromisoformat(v["at"]) <= moment]
        for run_id, _ in due:
            del stored[run_id]
        return due

    return await SharedDocument(store, _DOC).change(claim)


async def drop_delayed(store: Store, run_id: str, user: str) -> bool:
    """Remove `user`'s delayed run `run_id`; return whether it was still waiting."""

    def drop(stored: dict[str, Any]) -> bool:
        found = stored.get(run_id)
        if found is None or found["user"] != user:
            return False
        del stored[run_id]
        return True

    return await SharedDocument(store, _DOC).change(drop)
