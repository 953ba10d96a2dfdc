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
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from plait._json import dump_plain, load_plain, to_json
from plait._typed import restore_types, value_types
from plait.errors import CheckpointCorrupt, SessionConflict
from plait.events import AgentEvent, HandoffLog
from plait.history import USER, dropped
from plait.messages import Message
from plait.stores.base import SessionStore

__all__ = ["SessionDocument", "SessionTurn", "decode_session"]

FORMAT = "plait.session"
VERSION = 1
_ATTEMPTS = 20  # writes tried when other turns keep saving the same session first


class SessionDocument:
    """A decoded session: its messages with their authors, values, team state, each agent's
    own state, handoffs, and when it was last written (None: by a plait that did not say)."""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        data = data or {}
        self.messages: list[tuple[str, Message]] = [
            (a, load_plain(Message, m)) for a, m in data.get("messages", [])
        ]
        self.values: dict[str, Any] = restore_types(
            dict(data.get("values") or {}), data.get("value_types") or {}
        )
        self.state: dict[str, Any] = dict(data.get("state") or {})
        self.local: dict[str, Any] = dict(data.get("local") or {})
        self.handoffs: list[HandoffLog] = load_plain(list[HandoffLog], data.get("handoffs", []))
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

    @classmethod
    async def load(
        cls, store: SessionStore, session_id: str, new_messages: Sequence[Message]
    ) -> SessionTurn:
        """Read the session (empty if there is none) and start a turn with `new_messages`."""
        saved = decode_session(session_id, await store.get_session(session_id))
        turn = [(USER, m) for m in new_messages]
        return cls(
            session_id,
            saved.messages,
            saved.values,
            saved.handoffs,
            turn,
            saved.state,
            saved.local,
        )

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

        The write is a compare-and-set on the version read: when another turn wrote the
        session in between, the session is read again and the turn appended to that, so
        turns that end at the same time are all kept, in the order they were saved.
        """
        await self.settle()
        for _ in range(_ATTEMPTS):
            record = await store.get_session_record(self.session_id)
            saved = decode_session(self.session_id, record.data if record is not None else None)
            text = self._encode(saved, values, handoffs, state, local, stamp)
            try:
                await store.put_session(
                    self.session_id,
                    text,
                    ttl=ttl,
                    expected_version=record.version if record is not None else 0,
                )
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
        messages = [[a, dump_plain(m, Message)] for a, m in [*saved.messages, *self.turn]]
        merged = {**saved.values, **values}
        to_json(merged, Any, root="session_values")  # names a value that is not JSON
        document = {
            "format": FORMAT,
            "version": VERSION,
            "messages": messages,
            "values": merged,
            "value_types": value_types(merged),
            "state": {**saved.state, **(state or {})},
            "local": {**saved.local, **(local or {})},
            "handoffs": [dump_plain(h, HandoffLog) for h in [*saved.handoffs, *handoffs]],
            "updated_at": stamp.isoformat(),
        }
        return to_json(document, Any, root="session").encode()
