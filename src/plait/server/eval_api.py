"""`POST /v1/eval`: run an eval set (`plait.eval`) on one of the server's agents.

The body is `{"agent": NAME, "evalset": {...}}` (plait's eval-set JSON or Google ADK's); the
answer is the JSON report (`{"pass_rate", "cases": [...]}`), each case with an extra
`expected` object (`tools`, `response`) so the dev page can show what differs, and the
`run_id` of its run. Each case is one run of the server's, started as
`POST /v1/agents/{name}/runs` starts one (without a session): listed by `GET /v1/runs` and
stopped by `POST /v1/runs/{id}/cancel` like any run (a cancelled case fails and the next one
runs). The cases run one after another while the client waits; a client that leaves stops
the evaluation: the run in flight is cancelled and no other case starts.

A bad eval set is a `400` naming the case and the field; the server has no judge model, so
a case judged by a model is a `400` too, and so is a case with a cassette (a file of the
server's, not the caller's). An eval set of more than `MAX_EVAL_CASES` cases is a `413`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import Receive

from plait.errors import EvalSetError
from plait.eval.evalset import EvalCase, EvalSet
from plait.events import AgentEvent, RunResult
from plait.server.bodies import error_responses
from plait.server.limits import ApiError
from plait.server.runs import LiveRun, Relay

__all__ = ["MAX_EVAL_CASES", "EvalRequest", "eval_router"]

#: The most cases one request runs.
MAX_EVAL_CASES = 100

_T = TypeVar("_T")


class EvalRequest(BaseModel):
    """Run an eval set on an agent."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(description="The name of the agent to evaluate (GET /v1/agents).")
    evalset: dict[str, Any] = Field(
        description=(
            'The eval set: `{"cases": [...]}` (docs/capabilities/evaluation.md), or an ADK EvalSet.'
        )
    )


_RESPONSES = error_responses(
    {
        400: "A bad eval set (the message names the case and the field).",
        401: "No valid API key.",
        404: "Unknown agent.",
        413: f"The request body is over the server's limit, or over {MAX_EVAL_CASES} cases.",
        422: "The body does not match the schema.",
    }
)


def eval_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the eval route; `caller` is the app's dependency that checks the API key."""
    router = APIRouter(tags=["eval"])
    caller_dep: Any = Depends(caller)

    @router.post(
        "/v1/eval",
        summary="Run an eval set on an agent",
        responses=_RESPONSES,
    )
    async def run_eval(body: EvalRequest, request: Request, who: Any = caller_dep) -> Any:
        """Run each case of `evalset` on agent `agent`, each as a run of its own (listed by
        `GET /v1/runs`, cancellable), and answer the report: the pass rate, and per case
        whether it passed, the tools called, the response, tokens, latency, error, what was
        expected and its `run_id`. Leaving the request stops the evaluation."""
        from plait.eval import load_evalset
        from plait.eval.run import evaluate_cases

        if body.agent not in who.server.agents:
            raise ApiError(404, f"no agent '{body.agent[:128]}'; GET /v1/agents lists them")
        evalset = _checked(load_evalset(body.evalset))
        cases = _CaseRuns(who, body.agent)
        report = await _unless_gone(evaluate_cases(evalset, cases.run), request.receive)
        if report is None:  # the client left; the run in flight was stopped
            await cases.stop()
            return Response(status_code=204)
        out = report.to_dict(expected=True)
        for case in out["cases"]:
            case["run_id"] = cases.run_ids.get(case["id"])
        return out

    return router


def _checked(evalset: EvalSet) -> EvalSet:
    """Return `evalset` if the server can run it: at most `MAX_EVAL_CASES` cases, none with
    a cassette."""
    if len(evalset.cases) > MAX_EVAL_CASES:
        raise ApiError(
            413,
            f"the eval set has {len(evalset.cases)} cases; a request runs at most "
            f"{MAX_EVAL_CASES} (send it in parts)",
            type=EvalSetError.__name__,
        )
    for case in evalset.cases:
        if case.cassette is not None:
            raise EvalSetError(
                f"case {case.id!r}: cassette: cassettes are replayed by `plait eval`, "
                "not over HTTP",
                case=case.id,
                field="cassette",
            )
    return evalset


class _Quiet(Relay):
    """Send nothing of a case's events: the report is the answer."""

    async def relay(self, event: AgentEvent) -> None:
        """Drop `event` (the run's result keeps it)."""


class _CaseRuns:
    """Run the cases of one request as runs of the server, one at a time."""

    def __init__(self, who: Any, agent: str) -> None:
        self.who = who
        self.agent = agent
        self.run_ids: dict[str, str] = {}  # case id -> run id
        self.live: LiveRun | None = None

    async def run(self, case: EvalCase) -> RunResult:
        """Start `case` as a run of the agent (no session) and return its result."""
        live: LiveRun = await self.who.server.runs.start(
            self.who.store,
            self.agent,
            case.messages(),
            session_id=None,
            session_values=case.session_values,
            relay=_Quiet(),
        )
        self.live = live
        self.run_ids[case.id] = live.run_id
        await live.outcome()
        self.live = None
        assert live.result is not None  # set before the summary is queued
        return live.result

    async def stop(self) -> None:
        """Cancel the run in flight, as `POST /v1/runs/{id}/cancel` does."""
        if self.live is not None:
            await self.who.server.runs.cancel(self.who.store, self.live.checkpoint_id)


async def _unless_gone(work: Coroutine[Any, Any, _T], receive: Receive) -> _T | None:
    """Return what `work` returns; if the client leaves first, cancel it and return None."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_client_gone(receive))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return task.result() if not task.cancelled() else None


async def _client_gone(receive: Receive) -> None:
    """Return once the client has left (the request's body was read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass
