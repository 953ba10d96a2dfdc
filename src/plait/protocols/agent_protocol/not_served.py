"""What plait does not serve of the Agent Protocol: each answers `501` with a message that
names it (and what to use instead, where plait has something), so a client learns at once
what is missing rather than meeting a `404`.

Options of a run: `interrupt_before` / `interrupt_after` (a plait run pauses where an
agent, a tool or a graph node calls `interrupt()`; nothing pauses it around a named agent).
Routes: `assistants.get_subgraphs`, `threads.join_stream` (a thread's stream across its
runs) and `threads.stream` (the SDK's thread-centric streaming protocol). Others are said
where they are refused: `after_seconds` on a streamed run (`runs`), a checkpoint before a
thread's state now (`state`), `threads.create` with `ttl` (`threads`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from fastapi import APIRouter

from plait.protocols.agent_protocol.shapes import errors, router_of
from plait.server.caller import Caller
from plait.server.limits import ApiError

__all__ = ["NOT_YET", "not_served_router", "refuse_options"]

#: What a `501` of the Agent Protocol says after the name of what is not served.
NOT_YET = "is not served by plait yet"

_PAUSES = (
    "a plait run pauses where an agent, a tool or a graph node calls interrupt(), "
    "not around a named agent"
)


def refuse_options(body: Any) -> None:
    """Refuse (`501`) a run that asks for what plait does not serve."""
    for name in ("interrupt_before", "interrupt_after"):
        if getattr(body, name) is not None:
            raise ApiError(501, f"{name} {NOT_YET}: {_PAUSES}")


def _refuse(what: str, instead: str) -> NoReturn:
    raise ApiError(501, f"{what} {NOT_YET}; {instead}")


def not_served_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the routes of what is not served, each answering `501` (after the API key
    check); `caller` is the app's dependency that checks the API key."""
    return router_of("not served", caller, _routes)


_STATUS = errors(401, 501)


def _routes(router: APIRouter, who_dep: Any) -> None:
    """Add a route answering `501` for each method not served."""
    status = _STATUS

    @router.get("/assistants/{assistant_id}/subgraphs", summary="Not served", responses=status)
    @router.get(
        "/assistants/{assistant_id}/subgraphs/{namespace}", summary="Not served", responses=status
    )
    async def subgraphs(assistant_id: str, who: Caller = who_dep) -> None:
        """`assistants.get_subgraphs`: plait's nested agents keep no state of their own."""
        _refuse(
            "assistants.get_subgraphs",
            "a plait agent's nested agents and graphs keep no state namespaces of their own "
            "(assistants.get_graph draws them)",
        )

    @router.get("/threads/{thread_id}/stream", summary="Not served", responses=status)
    async def thread_stream(thread_id: str, who: Caller = who_dep) -> None:
        """`threads.join_stream`: a thread's stream across its runs."""
        _refuse("threads.join_stream", "runs.join_stream re-attaches to one run's stream")

    @router.post("/threads/{thread_id}/commands", summary="Not served", responses=status)
    @router.post("/threads/{thread_id}/stream/events", summary="Not served", responses=status)
    async def thread_protocol(thread_id: str, who: Caller = who_dep) -> None:
        """`threads.stream`: the SDK's thread-centric streaming protocol."""
        _refuse("threads.stream (thread-centric streaming)", "runs.stream streams a run")
