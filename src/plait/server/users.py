"""Who is calling, and each caller's own view of the server's store.

A `UserStore` is a `Store` that puts the user id before every id it is given, so a user's
runs and sessions are out of every other user's reach: someone else's id is simply not
found. Besides the runner's checkpoints (`<user>/c/<id>`) and sessions (`<user>/s/<id>`),
the server keeps its own records there, all as session records: run summaries
(`<user>/r/<checkpoint id>`), cancel requests (`<user>/x/<checkpoint id>`), the latest
pause of each AG-UI thread (`<user>/t/<thread id>`, see `plait.protocols.agui`) and the
latest response of each OpenAI Responses conversation (`<user>/o/<session id>`, see
`plait.protocols.openai_api`). The index of
the user's sessions, which the runner updates with every turn, is `<user>/i` (the store's
`session_catalog`; see `plait.session_index`), and the index of the user's runs is
`<user>/runs` (see `plait.server.run_index`).
"""

from __future__ import annotations

import dataclasses
import hmac
import re
from collections.abc import Mapping
from typing import Literal

from plait.errors import UsageError
from plait.run.sessions import SessionCatalog
from plait.stores.base import GuardedStore, SessionRecord, StoreView, check_id
from plait.stores.session_index import SessionIndex

__all__ = [
    "LOCAL_USER",
    "MAX_API_ID",
    "UserStore",
    "check_api_keys",
    "find_user",
    "id_problem",
    "is_safe_id",
]

#: The user of every request when the server has no API keys.
LOCAL_USER = "local"

_USER = re.compile(r"[A-Za-z0-9_.@+=:~-]{1,64}")
#: The longest session or run id the API takes, in characters.
MAX_API_ID = 128

#: A run summary, a cancel request, a thread's pause, a conversation's latest response.
RecordKind = Literal["r", "x", "t", "o"]


def id_problem(value: str) -> str | None:
    """Return why `value` cannot be a session or run id of the API, or None if it can.

    The API takes the ids every store holds (`plait.stores.base.check_id`: no control
    characters, line or paragraph separators or lone surrogates), of at most 128
    characters, that a URL path segment can carry back: no "/", and not "." or "..".
    """
    if len(value) > MAX_API_ID:
        return f"an id is at most {MAX_API_ID} characters, got {len(value)}"
    if "/" in value or value in (".", ".."):
        return "an id cannot hold '/' or be '.' or '..' (it could not be named in a URL)"
    try:
        check_id(value, "the id")
    except UsageError as exc:
        return exc.message
    return None


def is_safe_id(value: str) -> bool:
    """Whether `value` is usable as a session or run id of the API (see `id_problem`)."""
    return id_problem(value) is None


def check_api_keys(api_keys: Mapping[str, str] | None) -> dict[str, str] | None:
    """Return the bearer-key -> user-id mapping after checking it.

    Raises:
        UsageError: A key is empty or not a string, or a user id is not 1 to 64 letters,
            digits or `_.@+=:~-` (a "/" would reach into another user's records).
    """
    if api_keys is None:
        return None
    if not isinstance(api_keys, Mapping) or not api_keys:
        raise UsageError("api_keys maps bearer keys to user ids; pass None to serve without keys")
    checked: dict[str, str] = {}
    for key, user in api_keys.items():
        if not isinstance(key, str) or not key or not key.isprintable() or " " in key:
            raise UsageError("every API key must be a non-empty string without spaces")
        if not isinstance(user, str) or _USER.fullmatch(user) is None:
            raise UsageError(
                f"user id {user!r} must be 1 to 64 letters, digits or _.@+=:~- (no '/')"
            )
        checked[key] = user
    return checked


def find_user(api_keys: Mapping[str, str], given: str) -> str | None:
    """Return the user whose key is `given` (compared in constant time), or None."""
    found: str | None = None
    presented = given.encode()
    for key, user in api_keys.items():
        if hmac.compare_digest(key.encode(), presented):
            found = user
    return found


@dataclasses.dataclass(eq=False, repr=False)
class UserStore(StoreView):
    """User `user`'s view of the server's store (a `Store`; closing it leaves the store
    open). The sessions it writes are listed in `index`, under the public name `agent` when
    it is set."""

    user: str
    index: SessionIndex = dataclasses.field(default_factory=SessionIndex)
    _: dataclasses.KW_ONLY
    agent: str | None = None

    def for_agent(self, agent: str) -> UserStore:
        """Return this view for the runs of agent `agent` (its public name): the sessions
        they write are listed as that agent's."""
        return UserStore(self.store, self.user, self.index, agent=agent)

    @property
    def runs_key(self) -> str:
        """Return the id of the user's index of runs in the server's store."""
        return f"{self.user}/runs"

    def __repr__(self) -> str:
        return "the server's store"

    def _checkpoint_key(self, checkpoint_id: str) -> str:
        return f"{self.user}/c/{checkpoint_id}"

    def _session_key(self, session_id: str) -> str:
        return f"{self.user}/s/{session_id}"

    def session_catalog(self) -> SessionCatalog:
        """Return the index of the user's sessions: `<user>/i` in the server's store."""
        return SessionCatalog(
            GuardedStore(self.store), f"{self.user}/i", self.index, agent=self.agent
        )

    async def close(self) -> None:
        """Leave the server's store open for other requests."""

    # --- the server's own records ----------------------------------------------------------

    async def get_record(self, kind: RecordKind, checkpoint_id: str) -> bytes | None:
        """Return a run summary (`"r"`), cancel request (`"x"`), thread pause (`"t"`) or
        conversation's latest response (`"o"`), or None."""
        return await self.store.get_session(f"{self.user}/{kind}/{checkpoint_id}")

    async def get_record_version(
        self, kind: RecordKind, checkpoint_id: str
    ) -> SessionRecord | None:
        """Return a record as `get_record` does, with its version (for `put_record`)."""
        return await self.store.get_session_record(f"{self.user}/{kind}/{checkpoint_id}")

    async def put_record(
        self,
        kind: RecordKind,
        checkpoint_id: str,
        data: bytes,
        *,
        expected_version: int | None = None,
    ) -> None:
        """Write a run summary (`"r"`), cancel request (`"x"`), thread pause (`"t"`) or
        conversation's latest response (`"o"`); with `expected_version`, only if the
        record is still at that version (else `SessionConflict`)."""
        key = f"{self.user}/{kind}/{checkpoint_id}"
        await self.store.put_session(key, data, expected_version=expected_version)
