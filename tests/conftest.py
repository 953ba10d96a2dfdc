"""Shared helpers for plait's tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import plait._util.json
import plait.core.checkpoint
from plait import AgentEvent, Message
from plait.stores import CheckpointRecord, MemoryStore, SessionRecord, SqliteStore, Store

# Every checkpoint the tests write is validated as it is written (see VALIDATE_WRITES).
plait.core.checkpoint.VALIDATE_WRITES = True
# Every JSON encoding orjson makes is compared with pydantic's (see CHECK_FAST).
plait._util.json.CHECK_FAST = True


async def messages_of(events: Sequence[AgentEvent]) -> list[Message]:
    """Return the whole message of every message event, in order."""
    out = []
    for event in events:
        if event.message is not None:
            out.append(await event.message.get_message())
    return out


def kinds(events: Sequence[AgentEvent]) -> list[str]:
    """Summarise events as 'assistant', 'tool:<name>' or 'error:<Type>'."""
    out = []
    for event in events:
        if event.error is not None:
            out.append(f"error:{type(event.error).__name__}")
        elif event.message is not None:
            variant = event.message
            out.append("assistant" if variant.role == "assistant" else f"tool:{variant.tool_name}")
        else:
            out.append("other")
    return out


class YieldingStore(MemoryStore):
    """A `MemoryStore` that lets other tasks run after each read, as a store over a network
    does between a read and the write that depends on it.

    `MemoryStore` itself never yields, so two runs racing for one checkpoint or one session
    could never interleave on it, and a test of that race would pass with or without the
    compare-and-set that settles it.
    """

    async def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        """Read the checkpoint, then let others run."""
        record = await super().get_checkpoint(checkpoint_id)
        await asyncio.sleep(0)
        return record

    async def get_session(self, session_id: str) -> bytes | None:
        """Read the session, then let others run."""
        data = await super().get_session(session_id)
        await asyncio.sleep(0)
        return data

    async def get_session_record(self, session_id: str) -> SessionRecord | None:
        """Read the session with its version, then let others run."""
        record = await super().get_session_record(session_id)
        await asyncio.sleep(0)
        return record


RACE_STORES = ["memory", "yielding", "sqlite"]  # stores to run a race between runs on


def race_store(kind: str, tmp_path: Path) -> Store:
    """Return a store of `kind` (one of `RACE_STORES`), its files under `tmp_path`."""
    if kind == "memory":
        return MemoryStore()
    if kind == "yielding":
        return YieldingStore()
    return SqliteStore(tmp_path / "plait.db")
