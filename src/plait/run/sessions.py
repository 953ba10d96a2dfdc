"""Sessions: a conversation's history and values, kept in a store between turns.

A session is JSON: the messages of every finished turn with their authors ("user" for the
caller's messages), the session values, team state, each agent's own state, the handoffs
and when it was last written. A new turn starts from it: the caller's and the root agent's
own messages verbatim, other agents' messages rewritten "For context" (as after a
transfer). A turn that fails is kept too: the caller's messages and what the root lane said
before the failure (the error itself is the run's; tool calls that got no result are left
out, since a model refuses a history with an unanswered call). A turn that pauses is added
when its resumed run finishes (or fails). A turn is appended to the session as it is when
the turn ends, so turns that run at the same time are all kept.

Sessions from Python: `runner.sessions` reads, lists and deletes a runner's conversations.

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
import functools
import json
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

from typing_extensions import TypedDict  # (pydantic reads it on Python < 3.12)

from plait._util.clock import iso
from plait._util.json import dump_plain, encoded, load_plain, to_json
from plait._util.record import record
from plait._util.sync import run_in_new_loop
from plait._util.typed import restore_types, value_types
from plait.core.history import USER, dropped
from plait.errors import CheckpointCorrupt, SessionConflict, UsageError
from plait.events import AgentEvent, HandoffLog
from plait.messages import Message
from plait.stores.base import GuardedStore, SessionStore, Store
from plait.stores.session_index import SessionIndex, decode_agents, decode_index

__all__ = [
    "INDEX_ID",
    "KeepsSessionIndex",
    "SessionCatalog",
    "SessionDocument",
    "SessionSummary",
    "SessionTurn",
    "SessionView",
    "Sessions",
    "catalog_for",
    "decode_session",
]

FORMAT = "plait.session"
VERSION = 1
_ATTEMPTS = 20  # writes tried when other turns keep saving the same session first


class SessionDocument:
    """A decoded session: its messages with their authors, values, team state, each agent's
    own state, handoffs, and when it was last written (None: by a plait that did not say)."""

    messages: list[tuple[str, Message]]
    values: dict[str, Any]
    state: dict[str, Any]
    local: dict[str, Any]
    handoffs: list[HandoffLog]
    updated_at: datetime | None

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        if not data:  # a new session
            self.messages = []
            self.values = {}
            self.state = {}
            self.local = {}
            self.handoffs = []
            self.updated_at = None
            return
        self.messages = [(a, load_plain(Message, m)) for a, m in data.get("messages", [])]
        self.values = restore_types(dict(data.get("values") or {}), data.get("value_types") or {})
        self.state = dict(data.get("state") or {})
        self.local = dict(data.get("local") or {})
        self.handoffs = load_plain(list[HandoffLog], data.get("handoffs", []))
        stamp = data.get("updated_at")
        self.updated_at = None if stamp is None else datetime.fromisoformat(stamp)


def decode_session(session_id: str, raw: bytes | None) -> SessionDocument:
    """Decode a stored session (None: an empty one).

    Raises:
        CheckpointCorrupt: The bytes are not a plait session.
    """
    if raw is None:
        return SessionDocument()
    try:
        data = json.loads(raw)
        assert data["format"] == FORMAT and data["version"] == VERSION
        return SessionDocument(data)
    except Exception as exc:
        raise CheckpointCorrupt(
            f"session '{session_id}' is not a plait session: {type(exc).__name__}: {exc}"
        ) from None


class SessionTurn:
    """One turn of a session: what it started from and what it has added so far."""

    def __init__(
        self,
        session_id: str,
        prior: list[tuple[str, Message]],
        values: dict[str, Any],
        handoffs: list[HandoffLog],
        turn: list[tuple[str, Message]],
        state: dict[str, Any] | None = None,
        local: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.state = state or {}
        self.local = local or {}
        self.session_id = session_id
        self.prior = prior
        self.values = values
        self.handoffs = handoffs
        self.turn = turn
        self._pending: list[AgentEvent] = []
        self._read: tuple[int, SessionDocument] | None = None  # the session as loaded

    @classmethod
    async def load(
        cls, store: SessionStore, session_id: str, new_messages: Sequence[Message]
    ) -> SessionTurn:
        """Read the session (empty if there is none) and start a turn with `new_messages`."""
        record = await store.get_session_record(session_id)
        saved = decode_session(session_id, None if record is None else record.data)
        turn = [(USER, m) for m in new_messages]
        made = cls(
            session_id,
            saved.messages,
            saved.values,
            saved.handoffs,
            turn,
            saved.state,
            saved.local,
        )
        made._read = (0 if record is None else record.version, saved)
        return made

    def root_input(self) -> tuple[list[str], list[Message]]:
        """Return the turn's root input as written, and the author of each message (each
        agent then sees the others' messages "For context" and its own verbatim)."""
        records = [*self.prior, *self.turn]
        return [a for a, _ in records], [m for _, m in records]

    def note(self, event: AgentEvent) -> None:
        """Remember a message event of the root lane for the session."""
        if event.depth == 0 and event.message is not None:
            self._pending.append(event)

    async def settle(self) -> None:
        """Turn the remembered events into messages (streams are complete by now)."""
        for event in self._pending:
            assert event.message is not None
            if not dropped(event.message):
                self.turn.append((event.agent_name, await event.message.get_message()))
        self._pending.clear()

    async def settle_failed(self) -> None:
        """Settle the turn of a failed run: a message whose stream broke is left out, and so
        are tool calls that got no result (an assistant message left with neither text nor
        calls goes too)."""
        for event in self._pending:
            assert event.message is not None
            try:
                message = await event.message.get_message()
            except Exception:  # the run's error says what broke
                continue
            self.turn.append((event.agent_name, message))
        self._pending.clear()
        answered = {m.tool_call_id for _, m in self.turn if m.role == "tool"}
        kept: list[tuple[str, Message]] = []
        for author, message in self.turn:
            if any(call.id not in answered for call in message.tool_calls):
                calls = tuple(call for call in message.tool_calls if call.id in answered)
                if not calls and not message.content:
                    continue
                message = dataclasses.replace(message, tool_calls=calls)
            kept.append((author, message))
        self.turn = kept

    async def save(
        self,
        store: SessionStore,
        values: dict[str, Any],
        handoffs: Sequence[HandoffLog],
        ttl: float | None,
        state: dict[str, Any] | None = None,
        local: dict[str, Any] | None = None,
        *,
        stamp: datetime,
    ) -> None:
        """Append the turn to the session as it is now, and write it (committed before
        returning), saying it was written at `stamp`.

        The write is a compare-and-set on the version read (first the one the turn was
        loaded from, with no second read): when another turn wrote the session in between,
        the session is read again and the turn appended to that, so turns that end at the
        same time are all kept, in the order they were saved.
        """
        await self.settle()
        read, self._read = self._read, None
        for _ in range(_ATTEMPTS + (read is not None)):  # (that first try is not counted)
            if read is None:
                record = await store.get_session_record(self.session_id)
                data = record.data if record is not None else None
                read = (
                    0 if record is None else record.version,
                    decode_session(self.session_id, data),
                )
            version, saved = read
            read = None
            text = self._encode(saved, values, handoffs, state, local, stamp)
            try:
                await store.put_session(self.session_id, text, ttl=ttl, expected_version=version)
                return
            except SessionConflict as conflict:
                last = conflict
        raise last

    def _encode(
        self,
        saved: SessionDocument,
        values: dict[str, Any],
        handoffs: Sequence[HandoffLog],
        state: dict[str, Any] | None,
        local: dict[str, Any] | None,
        stamp: datetime,
    ) -> bytes:
        """Return the stored bytes of `saved` with this turn appended, in one pass of the
        document's schema (`_encode_checked` when some value is not JSON)."""
        merged = {**saved.values, **values}
        document: _Stored = {
            "format": FORMAT,
            "version": VERSION,
            "messages": [*saved.messages, *self.turn],
            "values": merged,
            "value_types": value_types(merged) if merged else {},
            "state": {**saved.state, **state} if state else saved.state,
            "local": {**saved.local, **local} if local else saved.local,
            "handoffs": [*saved.handoffs, *handoffs],
            "updated_at": iso(stamp),
        }
        dump, unencodable = _encoder()
        try:
            return encoded(document, functools.partial(dump, document))
        except unencodable:  # the checked encoding names what is not JSON
            return self._encode_checked(document)

    @staticmethod
    def _encode_checked(document: _Stored) -> bytes:
        """Return what `_encode` does, part by part: a value that is not JSON is a
        `SerializationError` naming it (`session_values[...]` for a session value)."""
        to_json(document["values"], Any, root="session_values")  # names a value not JSON
        plain = {  # the same keys, in the same order
            **document,
            "messages": [[a, dump_plain(m, Message)] for a, m in document["messages"]],
            "value_types": value_types(document["values"]),
            "handoffs": [dump_plain(h, HandoffLog) for h in document["handoffs"]],
        }
        return to_json(plain, Any, root="session").encode()


class _Stored(TypedDict):
    """A session as stored, its keys in their stored order (`values`, `state` and `local`
    are encoded as `to_json(..., Any)` encodes them)."""

    format: str
    version: int
    messages: list[tuple[str, Message]]
    values: Any
    value_types: dict[str, str]
    state: Any
    local: Any
    handoffs: list[HandoffLog]
    updated_at: str


@functools.cache
def _encoder() -> tuple[Callable[[_Stored], bytes], type[Exception]]:
    """Return what encodes a whole session in one pass, and the error it raises for a
    value that is not JSON (made on first use)."""
    from pydantic import TypeAdapter
    from pydantic_core import PydanticSerializationError

    encode: Callable[[_Stored], bytes] = TypeAdapter(_Stored).serializer.to_json  # as dump_json
    return encode, PydanticSerializationError


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


@dataclasses.dataclass(frozen=True)
class SessionCatalog:
    """Where an index of sessions lives: the session record `key` of `store`, written
    through `index` (share one among the writers of the same index in a process). `agent`,
    when given, is the name each session is listed under, whichever agent wrote it (the
    server lists its agents' sessions by their public names)."""

    store: SessionStore
    key: str
    index: SessionIndex = dataclasses.field(default_factory=SessionIndex)
    _: dataclasses.KW_ONLY
    agent: str | None = None

    async def touch(self, session_id: str, stamp: datetime, agent: str | None = None) -> None:
        """List `session_id` as written at `stamp` by `agent` (it moves to the end of the
        write order)."""
        entry = (iso(stamp), self.agent if self.agent is not None else agent)
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
