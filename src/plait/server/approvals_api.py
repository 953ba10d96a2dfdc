"""The approvals routes: the caller's inbox of open questions, standing rules, audit log.

- `GET /v1/approvals`: the caller's pending approvals and unknown outcomes, across runs and
  workers, oldest first (`[{"checkpoint_id", "interrupt_id", "agent", "tool", "arguments",
  "fingerprint", "expires_at", "kind"}]`); answer one with `POST
  /v1/runs/{checkpoint_id}/resume`, whose approver is the caller.
- `GET /v1/approvals/rules`, `POST /v1/approvals/rules` `{"tool"}`, `DELETE
  /v1/approvals/rules/{tool}`: the tools whose calls the caller approves without a pause.
- `GET /v1/audit?limit=100`: the caller's audit log, newest first.

Everything is read from and written to the caller's part of the store, so one user never
sees another's questions, rules or decisions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from plait.server.bodies import error_responses
from plait.stores.base import GuardedStore
from plait.tools.approvals import Approvals

__all__ = ["RuleRequest", "Rules", "approvals_router"]


class RuleRequest(BaseModel):
    """Approve the caller's calls of a tool without a pause."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, max_length=128, pattern=r"^[^/]+$", description="A tool name.")


class Rules(BaseModel):
    """The tools the caller approves without a pause."""

    tools: list[str]


class Question(BaseModel):
    """An open question of a paused run: an approval, or a call whose outcome is unknown."""

    checkpoint_id: str
    interrupt_id: str
    agent: str
    tool: str
    arguments: Any
    fingerprint: str
    expires_at: str | None
    kind: str = Field(description='"approval" or "unknown_outcome".')


class AuditEntry(BaseModel):
    """One decision of the audit log."""

    at: str
    checkpoint_id: str | None
    interrupt_id: str | None
    tool: str
    fingerprint: str
    arguments: Any
    decision: str = Field(description='"approved", "rejected", "done", "retry" or "skip".')
    approver: str | None
    via: str = Field(description='"resume", "expiry" or "rule".')


_errors = functools.partial(
    error_responses, {401: "No valid API key.", 422: "The body or a parameter does not fit."}
)


def approvals_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the approvals routes; `caller` is the app's dependency that checks the API key
    (its value has `user` and `store`, the user's part of the store)."""
    router = APIRouter(tags=["approvals"])
    caller_dep: Any = Depends(caller)
    _add_inbox_and_audit(router, caller_dep)
    _add_rules(router, caller_dep)
    return router


def _approvals(who: Any) -> Approvals:
    return Approvals(GuardedStore(who.store))


def _add_inbox_and_audit(router: APIRouter, caller_dep: Any) -> None:
    @router.get(
        "/v1/approvals",
        summary="The caller's open approvals and unknown outcomes",
        response_model=list[Question],
        responses=_errors(401),
    )
    async def inbox(who: Any = caller_dep) -> list[dict[str, Any]]:
        """List the questions the caller's paused runs wait on, oldest first."""
        return await _approvals(who).pending()

    @router.get(
        "/v1/audit",
        summary="The caller's audit log",
        response_model=list[AuditEntry],
        responses=_errors(401, 422),
    )
    async def audit(
        who: Any = caller_dep, limit: int = Query(100, ge=1, le=1000)
    ) -> list[dict[str, Any]]:
        """List the caller's decisions (approve, reject, expiry, rule, unknown outcomes),
        newest first."""
        return await _approvals(who).audit(limit)


def _add_rules(router: APIRouter, caller_dep: Any) -> None:
    @router.get(
        "/v1/approvals/rules",
        summary="The caller's standing rules",
        response_model=Rules,
        responses=_errors(401),
    )
    async def rules(who: Any = caller_dep) -> Rules:
        """List the tools whose calls the caller approves without a pause."""
        return Rules(tools=await _approvals(who).rules(who.user))

    @router.post(
        "/v1/approvals/rules",
        summary="Approve a tool's calls without a pause",
        response_model=Rules,
        responses=_errors(401, 422),
    )
    async def allow(body: RuleRequest, who: Any = caller_dep) -> Rules:
        """Approve the caller's later calls of `tool` without a pause; answer the rules."""
        service = _approvals(who)
        await service.allow(who.user, body.tool)
        return Rules(tools=await service.rules(who.user))

    @router.delete(
        "/v1/approvals/rules/{tool}",
        summary="Take back a standing rule",
        status_code=204,
        responses=_errors(401),
    )
    async def revoke(tool: str, who: Any = caller_dep) -> Response:
        """Take back the caller's rule for `tool`: its calls ask again."""
        if "/" not in tool and 0 < len(tool) <= 128:
            await _approvals(who).revoke(who.user, tool)
        return Response(status_code=204)
