"""`GET /v1/memory?query=...&k=10`: the caller's long-term memories that match a query, read
only (what the dev page's Memory view shows).

The server has no memory of its own: the memories are those of the memory services its
agents recall from (each `plait.memory.RecallTool` of any agent it serves). They are
searched as the caller's user (the user of the API key, "local" without keys), the
`user_id` those tools recall for: one user never sees another's memories. Without any
memory service the answer says so (`"enabled": false`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from plait.memory.base import MemoryService
from plait.memory.limits import MAX_K, MAX_QUERY_LENGTH
from plait.memory.recall import RecallTool
from plait.server.bodies import error_responses
from plait.server.topology import agents_in

__all__ = ["MemoryFound", "memory_router", "memory_services"]


class MemoryOut(BaseModel):
    """A memory that matches: its id, text, metadata and score (higher is better)."""

    id: str
    text: str
    metadata: dict[str, Any] | None = None
    score: float


class MemoryFound(BaseModel):
    """The caller's memories that match, best first."""

    enabled: bool = Field(description="Whether the served agents recall from any memory.")
    user: str = Field(description="The user whose memories were searched.")
    items: list[MemoryOut]


def memory_services(agents: Mapping[str, Any]) -> list[MemoryService]:
    """Return the memory services the agents recall from (each once), in order."""
    found: list[MemoryService] = []
    for agent in agents.values():
        for inner in agents_in(agent):
            for tool in getattr(inner, "_user_tools", ()):
                if isinstance(tool, RecallTool) and all(tool.service is not s for s in found):
                    found.append(tool.service)
    return found


def memory_router(caller: Callable[..., Any]) -> APIRouter:
    """Return `GET /v1/memory`; `caller` is the app's dependency that checks the API key."""
    router = APIRouter(tags=["memory"])
    caller_dep: Any = Depends(caller)
    errors = {401: "No valid API key.", 422: "A bad `query` or `k`."}

    @router.get(
        "/v1/memory",
        summary="Search your memories",
        response_model=MemoryFound,
        responses=error_responses(errors, 401, 422),
    )
    async def search_memory(
        query: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_LENGTH)],
        k: Annotated[int, Query(ge=1, le=MAX_K)] = 10,
        who: Any = caller_dep,
    ) -> MemoryFound:
        """Return the caller's memories that share words with `query`, best first (at most
        `k`), from the memory services the served agents recall from."""
        services = memory_services(who.server.agents)
        items = []
        for service in services:
            items.extend(await service.search(who.user, query, k))
        items.sort(key=lambda item: -item.score)
        return MemoryFound(
            enabled=bool(services),
            user=who.user,
            items=[
                MemoryOut(id=i.id, text=i.text, metadata=i.metadata, score=i.score)
                for i in items[:k]
            ],
        )

    return router
