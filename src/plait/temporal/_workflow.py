"""`PlaitWorkflow`: one plait run as a Temporal workflow.

The run's control flow (the ReAct loops, transfers, teams, workflows, graphs, agents run as
tools) executes in the workflow, through the same `Runner` as outside Temporal, with the
workflow's deterministic ids and time (`WorkflowIds`) and the `Router` as the run's
interceptor (leaf model and tool calls, sync graph nodes: activities). The runner's store is
an in-memory one inside the workflow: Temporal's history is what makes the run durable, and
replaying it rebuilds that store. A pause waits for the `resume` update; the `events` query
returns the events so far as JSON objects.

The workflow is not sandboxed: plait's agents are live objects built outside it (by the
worker's process), and determinism comes from the run kernel (every id and time from
`IdSource`, every clock it reads the workflow's). The sync functions a run calls in the
workflow (a guardrail, the `exit` tool) run inline on the workflow's thread, not on a worker
thread: the workflow's loop takes no callback from another thread, and inline they run at
the same step on every replay.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from temporalio import workflow

from plait._util.json import load_plain
from plait._util.threads import call_sync_inline
from plait.core.agent_context import AgentContext
from plait.core.checkpoint import UNSET
from plait.core.context import inside
from plait.core.hooks import Hooks
from plait.core.run_state import IdSource
from plait.errors import ResumeError, UsageError
from plait.events import AgentEvent, InterruptCtx, RunResult
from plait.messages import Message
from plait.run.runner import Runner
from plait.run.stream import RunStream
from plait.stores.memory import MemoryStore
from plait.temporal._catalog import Catalog
from plait.temporal._router import Router

__all__ = ["EXTERN", "PlaitWorkflow", "Served", "WorkflowIds", "check_answer"]

EXTERN = "plait_served"  # the extern function that gives a workflow its worker's agents


@dataclass(frozen=True)
class Served:
    """What a worker serves: its agents (catalogued) and its activity options."""

    catalog: Catalog
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class WorkflowIds(IdSource):
    """Ids and timestamps from the workflow's deterministic sources."""

    def new_id(self) -> str:
        return workflow.uuid4().hex

    def now(self) -> datetime:
        return workflow.now()


class _Install(Hooks):
    """Installs the router as the interceptor of each run and resume of the workflow."""

    def __init__(self, router: Router) -> None:
        self._router = router

    async def before_run(self, ctx: AgentContext, input: Any) -> None:
        inside(ctx).run.interceptor = self._router


def check_answer(pending: tuple[InterruptCtx, ...], answer: Mapping[str, Any]) -> None:
    """Refuse (`ResumeError`) resume data that does not fit the pending interrupts."""
    if not pending:
        raise ResumeError("the run is not waiting for a resume")
    targets, has_value = answer.get("targets"), "value" in answer
    if has_value and targets is not None:
        raise ResumeError("give either targets or value=, not both")
    if has_value:
        if len(pending) != 1:
            raise ResumeError(
                f"value= needs exactly one pending interrupt; {len(pending)} are pending: "
                "give targets (interrupt id -> data)"
            )
        return
    if not isinstance(targets, Mapping) or not targets:
        raise ResumeError("give targets (interrupt id -> data) or value=")
    known = {i.id for i in pending}
    unknown = [k for k in targets if k not in known]
    if unknown:
        raise ResumeError(
            f"unknown interrupt id(s) {unknown}; the pending interrupts are {sorted(known)}"
        )


@workflow.defn(name="PlaitWorkflow", sandboxed=False)
class PlaitWorkflow:
    """One plait run: `run(request)` with `{"agent": name, "input": [message objects]}`
    (see `plait.temporal.start`); the `events` query; the `resume` update."""

    def __init__(self) -> None:
        self._events: list[dict[str, Any]] = []
        self._pending: tuple[InterruptCtx, ...] = ()
        self._answer: dict[str, Any] | None = None

    @workflow.run
    async def run(self, request: dict[str, Any]) -> RunResult:
        """Run the agent on the input, waiting for `resume` at each pause."""
        call_sync_inline()
        served = _served()
        agent = served.catalog.agents.get(request["agent"])
        if agent is None:
            error = UsageError(
                f"this worker serves no agent named '{request['agent']}'; it serves "
                f"{sorted(served.catalog.agents)}"
            )
            return RunResult(error=error)
        runner = Runner(
            agent,
            store=MemoryStore(),
            ids=WorkflowIds(),
            hooks=[_Install(Router(served.catalog, served.options))],
        )
        messages = [load_plain(Message, m) for m in request["input"]]
        result = await self._leg(runner.run(messages))
        while result.interrupts:
            result = await self._resumed(runner, result)
        events = tuple(AgentEvent.from_json(json.dumps(e)) for e in self._events)
        return replace(result, events=events)

    async def _resumed(self, runner: Runner, paused: RunResult) -> RunResult:
        """Wait for the `resume` update, then resume the run with its data; a resume the
        runner refuses leaves the run waiting as it was."""
        self._pending = paused.interrupts
        await workflow.wait_condition(lambda: self._answer is not None)
        answer, self._answer = self._answer or {}, None
        value = answer.get("value", UNSET)
        stream = runner.resume(paused.checkpoint_id or "", answer.get("targets"), value=value)
        try:
            return await self._leg(stream)
        except ResumeError:
            return paused  # refused before it started: the checkpoint is as it was

    async def _leg(self, stream: RunStream) -> RunResult:
        """Drain one leg of the run (a start or a resume), keeping its events."""
        try:
            async for event in stream:
                self._events.append(json.loads(event.to_json()))
            return await stream.collect()
        except GeneratorExit:
            raise  # the workflow was dropped (see `quiet_thread`): nothing more runs
        except BaseException:
            await stream.aclose()  # cancelled or evicted: close the run in order, here
            raise

    @workflow.query(name="events")
    def events(self) -> list[dict[str, Any]]:
        """The events of the run so far, as `AgentEvent.to_json()` objects."""
        return list(self._events)

    @workflow.update(name="resume")
    async def resume(self, answer: dict[str, Any]) -> None:
        """Take the resume data of the pending interrupts (`targets` or `value`)."""
        self._answer = dict(answer)
        self._pending = ()

    @resume.validator
    def _check_resume(self, answer: dict[str, Any]) -> None:
        check_answer(self._pending if self._answer is None else (), answer)


def _drop(agen: Any) -> None:
    """The finalizer of the async generators of workflows run on plait's workflow threads:
    a generator left suspended when its workflow was dropped (a worker shut down with the
    run in flight) is not resumed from whatever thread collects it; the run goes on by
    replay elsewhere, and none of its code may run outside its workflow."""


def quiet_thread() -> None:
    """Make this thread (one of a worker's workflow threads) finalize dropped workflows'
    async generators with `_drop` (the initializer of the worker's thread pool)."""
    sys.set_asyncgen_hooks(firstiter=None, finalizer=_drop)


def _served() -> Served:
    """Return what this workflow's worker serves (its extern function)."""
    found = workflow.extern_functions().get(EXTERN)
    if found is None:
        raise UsageError(
            "PlaitWorkflow runs in a worker made by plait.temporal.worker (or a replayer made "
            "by plait.temporal.replayer), which gives it the agents"
        )
    served: Served = found()
    return served
