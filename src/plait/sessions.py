"""Sessions from Python: `runner.sessions` reads, lists and deletes a runner's conversations.

```python
view = await runner.sessions.get("chat-1")      # a SessionView, or None
for summary in await runner.sessions.list(limit=20):
    print(summary.session_id, summary.updated_at)
await runner.sessions.delete("chat-1")
```

A store keeps sessions by id but cannot list them, so the runner keeps an index of them (a
`SessionCatalog`) and updates it whenever it writes a session turn. A plain store holds the
index as one more session record, under the id `INDEX_ID` (a session cannot take that id); a
store that keeps its own (`KeepsSessionIndex`, as the server's per-user view does) says
where. The HTTP server's session routes use this service too.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Coroutine
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

from plait._record import record
from plait._sync import run_in_new_loop
from plait.errors import UsageError
from plait.events import HandoffLog
from plait.history import USER
from plait.messages import Message
from plait.session import SessionDocument, decode_session
from plait.session_index import SessionIndex, decode_agents, decode_index
from plait.stores.base import GuardedStore, SessionStore, Store

__all__ = [
    "INDEX_ID",
    "KeepsSessionIndex",
    "SessionCatalog",
    "SessionSummary",
    "SessionView",
    "Sessions",
    "catalog_for",
]

#: The id under which a plain store holds the runner's index of sessions.
INDEX_ID = ".plait/session-index"

_T = TypeVar("_T")


@record
class SessionView:
    """A session as it stands: its messages (each with its author in `name`: "user" for
    the caller's, else the agent that wrote it), values, handoffs, the agent that answered
    last (None before any answer) and when it was last written."""

    session_id: str
    messages: tuple[Message, ...]
    values: dict[str, Any]
    handoffs: tuple[HandoffLog, ...]
    active_agent: str | None
    updated_at: datetime | None


@record
class SessionSummary:
    """A listed session: its id, when it was last written, and the agent that wrote it
    last (None for a session listed by a plait that did not say)."""

    session_id: str
    updated_at: datetime
    agent: str | None = None


class SessionCatalog:
    """Where an index of sessions lives: a session record of a store, written through a
    `SessionIndex` (share one among the writers of the same index in a process). `agent`,
    when given, is the name each session is listed under, whichever agent wrote it (the
    server lists its agents' sessions by their public names)."""

    def __init__(
        self,
        store: SessionStore,
        key: str,
        index: SessionIndex | None = None,
        *,
        agent: str | None = None,
    ) -> None:
        self.store = store
        self.key = key
        self.index = SessionIndex() if index is None else index
        self.agent = agent

    async def touch(self, session_id: str, stamp: datetime, agent: str | None = None) -> None:
        """List `session_id` as written at `stamp` by `agent` (it moves to the end of the
        write order)."""
        entry = (stamp.isoformat(), self.agent if self.agent is not None else agent)
        await self.index.update(self.store, self.key, session_id, entry)

    async def remove(self, session_id: str) -> None:
        """Take `session_id` out of the index."""
        await self.index.update(self.store, self.key, session_id, None)

    async def entries(self) -> builtins.list[SessionSummary]:
        """Return the listed sessions, when each was last written and by which agent:
        newest first, and of sessions written at the same time the one written last first."""
        found = await self.store.get_session_record(self.key)
        listed, agents = decode_index(found), decode_agents(found)
        latest_first = [
            SessionSummary(
                session_id=sid, updated_at=datetime.fromisoformat(at), agent=agents.get(sid)
            )
            for sid, at in reversed(listed.items())
        ]
        return sorted(latest_first, key=lambda item: item.updated_at, reverse=True)  # stable


@runtime_checkable
class KeepsSessionIndex(Protocol):
    """A store that says where the index of its sessions lives."""

    def session_catalog(self) -> SessionCatalog:
        """Return the catalog of this store's sessions."""
        ...


def catalog_for(store: Store) -> SessionCatalog:
    """Return where the index of `store`'s sessions lives: the store's own catalog, or a
    new one under `INDEX_ID` in the store itself."""
    own = getattr(store, "session_catalog", None)  # `KeepsSessionIndex`, read directly
    if callable(own):
        found: SessionCatalog = own()
        return found
    guarded = store if isinstance(store, GuardedStore) else GuardedStore(store)
    return SessionCatalog(guarded, INDEX_ID)


class Sessions:
    """The sessions of a store: read one, list them newest first, delete one.

    The methods are coroutines; `get_sync`, `list_sync` and `delete_sync` run them in an
    event loop of their own.
    """

    def __init__(self, store: SessionStore, catalog: SessionCatalog) -> None:
        self._store = store
        self._catalog = catalog

    def _reserved(self, session_id: str) -> bool:
        return session_id == INDEX_ID and self._catalog.key == INDEX_ID

    async def read(self, session_id: str) -> SessionDocument | None:
        """Return the decoded session (messages with their authors), or None.

        Raises:
            CheckpointCorrupt: The stored bytes are not a plait session.
        """
        if self._reserved(session_id):
            return None
        raw = await self._store.get_session(session_id)
        return None if raw is None else decode_session(session_id, raw)

    async def get(self, session_id: str) -> SessionView | None:
        """Return the session `session_id`, or None when there is none (or it expired)."""
        document = await self.read(session_id)
        if document is None:
            return None
        authors = [author for author, _ in document.messages]
        answered = [author for author in authors if author != USER]
        return SessionView(
            session_id=session_id,
            messages=tuple(dataclasses.replace(m, name=a) for a, m in document.messages),
            values=document.values,
            handoffs=tuple(document.handoffs),
            active_agent=answered[-1] if answered else None,
            updated_at=document.updated_at,
        )

    async def list(
        self, *, limit: int | None = 100, agent: str | None = None
    ) -> builtins.list[SessionSummary]:
        """Return up to `limit` sessions (None: all), newest first; of sessions written at
        the same time, the one written last comes first. With `agent`, only the sessions
        that agent wrote last."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise UsageError(f"limit must be an int or None, not {limit!r}")
        entries = await self._catalog.entries()
        if agent is not None:
            entries = [entry for entry in entries if entry.agent == agent]
        if limit is not None:
            entries = entries[: max(limit, 0)]
        return entries

    async def delete(self, session_id: str) -> bool:
        """Delete the session and unlist it; return whether there was one."""
        if self._reserved(session_id):
            return False
        found = await self._store.get_session_record(session_id)
        if found is not None:
            await self._store.delete_session(session_id)
        await self._catalog.remove(session_id)
        return found is not None

    def get_sync(self, session_id: str) -> SessionView | None:
        """`get` in an event loop of its own."""
        return _run(self.get(session_id))

    def list_sync(
        self, *, limit: int | None = 100, agent: str | None = None
    ) -> builtins.list[SessionSummary]:
        """`list` in an event loop of its own."""
        return _run(self.list(limit=limit, agent=agent))

    def delete_sync(self, session_id: str) -> bool:
        """`delete` in an event loop of its own."""
        return _run(self.delete(session_id))


def _run(coro: Coroutine[Any, Any, _T]) -> _T:
    try:
        return run_in_new_loop(lambda: coro)
    except BaseException:
        coro.close()  # never awaited: an event loop is running here
        raise
