"""What the Agent Protocol's routes share: the error responses their documentation lists,
the request bodies' base and paging, and how a group of routes becomes a router."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict

from plait.server.bodies import error_responses

__all__ = ["Body", "Page", "RunCreate", "SortedPage", "errors", "router_of", "search_routes"]

#: What each error status means on the Agent Protocol's routes.
_MEANINGS = {
    401: "No valid API key (`x-api-key` or `Authorization: Bearer`).",
    404: "Unknown assistant, thread, run or item (also one of another user).",
    409: "The object exists, the thread is busy, or it cannot be changed so.",
    422: "The body does not match the schema, or names an unknown option.",
    501: "A part of the Agent Protocol plait does not serve yet.",
}

errors = functools.partial(error_responses, _MEANINGS)
"""Return a route's error responses for the given statuses."""


class Body(BaseModel):
    """A request body of the Agent Protocol: keys plait does not read are ignored, as newer
    clients may send more."""

    model_config = ConfigDict(extra="ignore")


class Page(Body):
    """A search's metadata filter and page, as the SDK sends them."""

    metadata: dict[str, Any] | None = None
    limit: int = 10
    offset: int = 0


class SortedPage(Page):
    """A page with the SDK's sort options."""

    sort_by: str | None = None
    sort_order: Literal["asc", "desc"] | None = None


def router_of(
    tag: str, caller: Callable[..., Any], *groups: Callable[[APIRouter, Any], None]
) -> APIRouter:
    """Return a router tagged `agent protocol: <tag>` holding each group of routes; a group
    adds its routes to the router, each depending on `caller` (the app's check of the API
    key) for the user."""
    router = APIRouter(tags=[f"agent protocol: {tag}"])
    who_dep: Any = Depends(caller)
    for group in groups:
        group(router, who_dep)
    return router


def search_routes(
    router: APIRouter,
    who_dep: Any,
    objects: str,
    body_type: type[Page],
    search: Callable[[Any, Any], Awaitable[list[dict[str, Any]]]],
    codes: tuple[int, ...] = (401, 422),
) -> None:
    """Add `POST /<objects>/search` (one page of what `search(user, body)` finds, in its
    order) and `POST /<objects>/count` (how many it finds), both taking a `body_type`."""
    noun = objects.rsplit("/", 1)[-1]

    async def search_page(body: Page, who: Any = who_dep) -> list[dict[str, Any]]:
        return (await search(who, body))[body.offset : body.offset + body.limit]

    async def count(body: Page, who: Any = who_dep) -> int:
        return len(await search(who, body))

    for endpoint, verb, what in (
        (search_page, "search", f"Return the caller's {noun} that match (one page)."),
        (count, "count", f"Return how many of the caller's {noun} match."),
    ):
        # the body's schema is the caller's own type: FastAPI reads it from the annotations
        endpoint.__annotations__ = {**endpoint.__annotations__, "body": body_type}
        endpoint.__doc__ = what
        router.add_api_route(
            f"/{objects}/{verb}",
            endpoint,
            methods=["POST"],
            summary=f"{verb.capitalize()} {noun}",
            responses=errors(*codes),
            name=f"{noun}_{verb}",
        )


class RunCreate(BaseModel):
    """What `runs.create`, `stream` and `wait` send (the options plait honours)."""

    model_config = ConfigDict(extra="ignore")

    assistant_id: str
    input: Any = None
    command: dict[str, Any] | None = None
    stream_mode: str | list[str] = "values"
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    if_not_exists: Literal["create", "reject"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    webhook: str | None = None
    after_seconds: float | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None
    checkpoint_id: str | None = None
    checkpoint: dict[str, Any] | None = None
