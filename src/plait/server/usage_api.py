"""`GET /v1/usage`: the ledger's rows (`plait.server.ledger`), as rows or grouped.

A caller sees their own rows; a caller whose key is one of the app's `admin_keys` sees every
user's. `from` and `to` are UTC days (`2026-05-01`) or times (ISO 8601); a day as `to`
reaches to its end. Without them: today (UTC). Rows come oldest first; groups by their
value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query

from plait.server.bodies import error_responses
from plait.server.ledger import Row
from plait.server.limits import ApiError

__all__ = ["MAX_DAYS", "usage_router"]

#: The most days one request reads.
MAX_DAYS = 366

_errors = functools.partial(
    error_responses,
    {401: "No valid API key.", 422: "A bad `from`, `to` or `group_by`."},
)
GroupBy = Literal["user", "agent", "model", "day"]


def _moment(value: str | None, name: str, *, end: bool) -> datetime | None:
    """Return the time `value` names (a day: its start, or with `end` its end)."""
    if value is None:
        return None
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            start = datetime.combine(day, time.min, UTC)
            return start + timedelta(days=1) - timedelta(microseconds=1) if end else start
        found = datetime.fromisoformat(value)
    except ValueError:
        raise ApiError(
            422, f"{name}: expected a day (2026-05-01) or an ISO 8601 time, got {value[:64]!r}"
        ) from None
    return (found if found.tzinfo is not None else found.replace(tzinfo=UTC)).astimezone(UTC)


def _group(rows: list[Row], by: GroupBy) -> list[dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for row in rows:
        value = row.time.date().isoformat() if by == "day" else getattr(row, by)
        group = groups.setdefault(
            value,
            {by: value, "model_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost": 0.0},
        )
        group["model_calls"] += 1
        group["input_tokens"] += row.input_tokens
        group["output_tokens"] += row.output_tokens
        group["cost"] += row.cost
    return [groups[key] for key in sorted(groups)]


def usage_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the `GET /v1/usage` route; `caller` is the app's dependency that checks the
    API key."""
    router = APIRouter()
    caller_dep: Any = Depends(caller)

    @router.get(
        "/v1/usage",
        summary="Read the cost ledger",
        responses=_errors(401, 422),
        tags=["usage"],
    )
    async def read_usage(
        start: Annotated[
            str | None, Query(alias="from", description="The first day or time (UTC).")
        ] = None,
        end: Annotated[str | None, Query(alias="to", description="The last day or time.")] = None,
        group_by: Annotated[GroupBy | None, Query(description="Sum the rows by this.")] = None,
        who: Any = caller_dep,
    ) -> dict[str, Any]:
        """Return the caller's model calls (every user's for an admin key): `{"rows":
        [{"user", "agent", "model", "input_tokens", "output_tokens", "cost", "priced",
        "run_id", "time"}]}`, or with `group_by` their sums, `{"groups": [{<group_by>,
        "model_calls", "input_tokens", "output_tokens", "cost"}]}`. `cost` is in US dollars;
        a row whose model has no known price costs 0 and has `priced` false."""
        tenants = who.server.runs.tenants
        now = tenants.clock().astimezone(UTC)
        first = _moment(start, "from", end=False) or datetime.combine(now.date(), time.min, UTC)
        last = _moment(end, "to", end=True) or datetime.combine(now.date(), time.max, UTC)
        if last < first:
            raise ApiError(422, "to: comes before from")
        if (last.date() - first.date()).days >= MAX_DAYS:
            raise ApiError(422, f"from and to are more than {MAX_DAYS} days apart")
        users = await tenants.ledger.users() if who.admin else [who.user]
        rows: list[Row] = []
        for user in users:
            found = await tenants.ledger.rows(user, first.date(), last.date())
            rows.extend(row for row in found if first <= row.time <= last)
        rows.sort(key=lambda row: row.time)
        if group_by is None:
            return {"rows": [row.to_json() for row in rows]}
        return {"groups": _group(rows, group_by)}

    return router
