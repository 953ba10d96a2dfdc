"""Who calls: the app's shared `Server` (agents, store, keys, runs) and each request's
`Caller` (its user and that user's view of the store), found from the bearer key. Every
route, the protocols' too, takes its caller from here (`CallerDep`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import Scope

from plait.core.agent import Agent
from plait.run.sessions import Sessions
from plait.server.limits import ApiError
from plait.server.runs import Runs
from plait.server.users import LOCAL_USER, UserStore, find_user
from plait.server.webhooks import Webhooks
from plait.stores.base import Store
from plait.stores.session_index import SessionIndex

__all__ = [
    "CHECKPOINT_HEADER",
    "Caller",
    "CallerDep",
    "Server",
    "find_caller",
    "identify",
    "scope_caller",
]

#: The header every run response carries its checkpoint id in.
CHECKPOINT_HEADER = "x-plait-checkpoint-id"


@dataclass(slots=True)
class Server:
    """What the routes of one app share: its agents, store, keys, runs and webhook
    deliveries (and what to close when the app stops, before its store: the A2A services'
    running tasks)."""

    agents: dict[str, Agent]
    store: Store
    api_keys: dict[str, str] | None
    runs: Runs
    owns_store: bool
    index: SessionIndex = field(default_factory=SessionIndex)
    closing: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    webhooks: Webhooks = field(default_factory=Webhooks)
    #: The time the app's schedules go by (crons): a function that returns this moment.
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    #: What runs beside the app while it serves (the cron scheduler), cancelled at its end.
    background: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    #: The keys whose callers see every user's usage (`GET /v1/usage`).
    admin_keys: frozenset[str] = frozenset()
    #: New objects between two young garbage collections while the app serves (None: the
    #: interpreter's), `plait.server.collector`.
    gc_young: int | None = None


@dataclass(slots=True)
class Caller:
    """The request's user and that user's view of the store."""

    server: Server
    user: str
    store: UserStore
    admin: bool = False  # the key is one of the app's admin keys

    @property
    def sessions(self) -> Sessions:
        """Return the user's sessions (the service `runner.sessions` is too)."""
        return Sessions(self.store, self.store.session_catalog())


_bearer = HTTPBearer(
    auto_error=False,
    description="`Authorization: Bearer <key>`, required when the server has API keys.",
)
_api_key = APIKeyHeader(
    name="x-api-key",
    auto_error=False,
    description="The API key as `x-api-key: <key>` (what the langgraph-sdk client sends), "
    "instead of `Authorization: Bearer`.",
)


async def find_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header_key: Annotated[str | None, Depends(_api_key)],
) -> Caller:
    """Return who is calling: the user of the key (`Authorization: Bearer` or `x-api-key`),
    or "local" without keys."""
    server: Server = request.app.state.plait
    given = header_key if credentials is None else credentials.credentials
    found = identify(server, given)
    if found is None:
        raise ApiError(
            401,
            "send a valid API key: Authorization: Bearer <key> (or x-api-key: <key>)",
            headers={"www-authenticate": "Bearer"},
        )
    return found


def identify(server: Server, given: str | None) -> Caller | None:
    """Return the caller of the key `given` (any caller is "local" on a server without
    keys), or None when the server has keys and `given` is none of them."""
    keys = server.api_keys
    user = LOCAL_USER
    admin = False
    if keys is not None:
        found = None if given is None else find_user(keys, given)
        if found is None:
            return None
        assert given is not None
        user = found
        admin = (
            bool(server.admin_keys)
            and find_user(dict.fromkeys(server.admin_keys, ""), given) is not None
        )
    return Caller(server, user, UserStore(server.store, user, server.index), admin)


def scope_caller(server: Server, scope: Scope) -> Caller | None:
    """Return the caller of the request of `scope` as `find_caller` finds it (from its raw
    headers, read as FastAPI's security schemes read them), or None where `find_caller`
    answers `401`."""
    authorization = header_key = None
    for name, value in scope["headers"]:  # the first of each, as Starlette's headers give
        if name == b"authorization" and authorization is None:
            authorization = value.decode("latin-1")
        elif name == b"x-api-key" and header_key is None:
            header_key = value.decode("latin-1")
    given = header_key or None
    if authorization:
        scheme, _, credentials = authorization.partition(" ")
        credentials = credentials.strip()
        if scheme and credentials and scheme.lower() == "bearer":
            given = credentials
    return identify(server, given)


CallerDep = Annotated[Caller, Depends(find_caller)]
