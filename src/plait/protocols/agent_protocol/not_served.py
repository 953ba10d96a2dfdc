"""The Agent Protocol's routes that plait does not serve yet: each answers `501`, naming
what it is, so a client learns at once what is missing rather than meeting a `404`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter

from plait.protocols.agent_protocol.shapes import errors
from plait.server.caller import Caller
from plait.server.limits import ApiError

__all__ = ["NOT_YET", "not_yet_routes"]

#: What a `501` of the Agent Protocol says after the name of what is not served.
NOT_YET = "is not served by plait yet"


def not_yet_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes of what is not served yet: each answers `501`, naming it."""

    def refuse(what: str) -> Callable[..., Any]:
        async def not_yet(who: Caller = who_dep) -> None:
            raise ApiError(501, f"{what} {NOT_YET}")

        not_yet.__doc__ = f"Answer `501`: {what} {NOT_YET}."
        return not_yet

    for method, path, what in (
        ("POST", "/runs", "a stateless run"),
        ("POST", "/runs/stream", "a stateless run"),
        ("POST", "/runs/wait", "a stateless run"),
        ("POST", "/runs/batch", "a batch of stateless runs"),
    ):
        router.add_api_route(
            path,
            refuse(what),
            methods=[method],
            summary=f"Not served yet: {what}",
            responses=errors(401, 501),
        )
