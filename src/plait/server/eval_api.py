"""`POST /v1/eval`: run an eval set (`plait.eval`) on one of the server's agents.

The body is `{"agent": NAME, "evalset": {...}}` (plait's eval-set JSON or Google ADK's); the
answer is the JSON report (`{"pass_rate", "cases": [...]}`), each case with an extra
`expected` object (`tools`, `response`) so the dev page can show what differs. The cases run
in the request, one after another, each on a fresh in-memory runner: they touch neither the
store nor the caller's sessions. A bad eval set is a `400` naming the case and the field;
the server has no judge model, so a case judged by a model is a `400` too, and so is a case
with a cassette (a file of the server's, not the caller's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from plait.errors import EvalSetError
from plait.server.bodies import ErrorResponse
from plait.server.limits import ApiError

__all__ = ["EvalRequest", "eval_router"]


class EvalRequest(BaseModel):
    """Run an eval set on an agent."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(description="The name of the agent to evaluate (GET /v1/agents).")
    evalset: dict[str, Any] = Field(
        description='The eval set: `{"cases": [...]}` (docs/production.md), or an ADK EvalSet.'
    )


_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in {
        400: "A bad eval set (the message names the case and the field).",
        401: "No valid API key.",
        404: "Unknown agent.",
        413: "The request body is over the server's limit.",
        422: "The body does not match the schema.",
    }.items()
}


def eval_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the eval route; `caller` is the app's dependency that checks the API key."""
    router = APIRouter(tags=["eval"])
    caller_dep: Any = Depends(caller)

    @router.post(
        "/v1/eval",
        summary="Run an eval set on an agent",
        responses=_RESPONSES,
    )
    async def run_eval(body: EvalRequest, who: Any = caller_dep) -> dict[str, Any]:
        """Run each case of `evalset` on agent `agent` and answer the report: the pass rate,
        and per case whether it passed, the tools called, the response, tokens, latency,
        error, and what was expected."""
        from plait.eval import evaluate, load_evalset

        agent = who.server.agents.get(body.agent)
        if agent is None:
            raise ApiError(404, f"no agent '{body.agent[:128]}'; GET /v1/agents lists them")
        evalset = load_evalset(body.evalset)
        for case in evalset.cases:
            if case.cassette is not None:
                raise EvalSetError(
                    f"case {case.id!r}: cassette: cassettes are replayed by `plait eval`, "
                    "not over HTTP",
                    case=case.id,
                    field="cassette",
                )
        report = await evaluate(agent, evalset)
        return report.to_dict(expected=True)

    return router
