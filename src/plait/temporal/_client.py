"""Building workers and replayers, starting runs, answering their interrupts."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import temporalio.workflow
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.worker import (
    Interceptor,
    Replayer,
    UnsandboxedWorkflowRunner,
    Worker,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from plait._util.json import dump_plain
from plait.core.agent import Agent
from plait.core.checkpoint import UNSET
from plait.errors import ResumeError, UsageError, WorkflowNondeterminism
from plait.events import RunResult
from plait.messages import Message
from plait.temporal._activities import Activities
from plait.temporal._catalog import Catalog
from plait.temporal._converter import data_converter
from plait.temporal._workflow import EXTERN, PlaitWorkflow, Served, quiet_thread

__all__ = ["ActivityOptions", "RunHandle", "replayer", "resume", "start", "worker"]

#: "default", "agent:<name>" or "tool:<name>" -> keyword arguments of
#: `temporalio.workflow.execute_activity` (`start_to_close_timeout`, `retry_policy`, ...).
ActivityOptions = Mapping[str, Mapping[str, Any]]
_OPTION_KEYS = frozenset(
    {
        "task_queue",
        "schedule_to_close_timeout",
        "schedule_to_start_timeout",
        "start_to_close_timeout",
        "heartbeat_timeout",
        "retry_policy",
        "cancellation_type",
        "versioning_intent",
        "summary",
        "priority",
        "local",  # plait's: True runs the calls as local activities
        "local_retry_threshold",
    }
)


class _Serve(Interceptor):
    """Gives the workflows of one worker (or replayer) its agents and options."""

    def __init__(self, served: Served) -> None:
        self._served = served

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        served = self._served
        input.unsafe_extern_functions[EXTERN] = lambda: served
        return None


def _named(agents: Agent | Sequence[Agent] | Mapping[str, Agent]) -> dict[str, Agent]:
    if isinstance(agents, Agent):
        pairs: list[tuple[Any, Any]] = [(agents.name, agents)]
    elif isinstance(agents, Mapping):
        pairs = list(agents.items())
    elif isinstance(agents, Sequence) and not isinstance(agents, str):
        pairs = [(getattr(a, "name", None), a) for a in agents]
    else:
        raise UsageError(f"plait.temporal takes agents, got {type(agents).__name__}")
    named: dict[str, Agent] = {}
    for name, agent in pairs:
        if not isinstance(agent, Agent):
            raise UsageError(f"plait.temporal takes agents; {agent!r} is not one")
        if not isinstance(name, str) or not name:
            raise UsageError(f"agent name {name!r} must be a non-empty string")
        if name in named:
            raise UsageError(f"two agents are named '{name}'; pass a mapping to rename one")
        named[name] = agent
    if not named:
        raise UsageError("plait.temporal needs at least one agent")
    return named


def _check_options(options: ActivityOptions | None) -> dict[str, dict[str, Any]]:
    checked: dict[str, dict[str, Any]] = {}
    for key, value in (options or {}).items():
        if not (key == "default" or key.startswith(("agent:", "tool:"))):
            raise UsageError(
                f"activity_options key {key!r}: use 'default', 'agent:<name>' or 'tool:<name>'"
            )
        if not isinstance(value, Mapping):
            raise UsageError(f"activity_options[{key!r}] must be a mapping of options")
        unknown = sorted(set(value) - _OPTION_KEYS)
        if unknown:
            raise UsageError(
                f"activity_options[{key!r}]: {unknown} are not options of "
                f"workflow.execute_activity; known: {sorted(_OPTION_KEYS)}"
            )
        checked[key] = dict(value)
    return checked


def _served(agents: Any, activity_options: ActivityOptions | None) -> Served:
    return Served(Catalog(_named(agents)), _check_options(activity_options))


def _plait_client(client: Client) -> Client:
    """Return a client on the same connection that reads and writes plait's payloads."""
    config = client.config()
    config["data_converter"] = data_converter(config["data_converter"])
    return Client(**config)


def worker(
    client: Client,
    agents: Agent | Sequence[Agent] | Mapping[str, Agent],
    *,
    task_queue: str = "plait",
    activity_options: ActivityOptions | None = None,
) -> Worker:
    """Return a Temporal worker (not yet running) that runs `PlaitWorkflow` for `agents` and
    their model and tool calls as activities; `async with` it or `await w.run()`.

    `agents` is an agent, a sequence of agents or a mapping name -> agent (as in
    `create_app`); every worker process of a task queue must build the same agents.
    `activity_options` maps "default", "agent:<name>" and "tool:<name>" to keyword arguments
    of `temporalio.workflow.execute_activity`; the most specific key wins, key by key.
    """
    served = _served(agents, activity_options)
    return Worker(
        _plait_client(client),
        task_queue=task_queue,
        workflows=[PlaitWorkflow],
        activities=_activities(served),
        interceptors=[_Serve(served)],
        workflow_runner=UnsandboxedWorkflowRunner(),
        workflow_failure_exception_types=[temporalio.workflow.NondeterminismError],
        workflow_task_executor=ThreadPoolExecutor(
            max(2, os.cpu_count() or 1), "plait-workflow", initializer=quiet_thread
        ),
    )


def _activities(served: Served) -> list[Any]:
    acts = Activities(served.catalog)
    return [acts.model, acts.tool, acts.node]


class _Replayer(Replayer):
    """A replayer whose nondeterminism is `WorkflowNondeterminism`, naming the workflow."""

    async def replay_workflow(self, history: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().replay_workflow(history, *args, **kwargs)
        except temporalio.workflow.NondeterminismError as exc:
            raise nondeterminism(history.workflow_id, exc) from exc


def nondeterminism(workflow_id: str, exc: BaseException) -> WorkflowNondeterminism:
    """The error of a run whose workflow replays differently with the agents as built now."""
    return WorkflowNondeterminism(
        f"workflow '{workflow_id}' does not replay with the agents as they are now (a change "
        f"to agents, tools or models broke a run in flight): {exc}",
        workflow_id=workflow_id,
    )


def replayer(
    agents: Agent | Sequence[Agent] | Mapping[str, Agent],
    *,
    activity_options: ActivityOptions | None = None,
) -> Replayer:
    """Return a `temporalio.worker.Replayer` set up like `worker` for `agents`:
    `await replayer(agents).replay_workflow(await handle.fetch_history())` replays a run
    with the agents as built now, raising `WorkflowNondeterminism` when it differs."""
    served = _served(agents, activity_options)
    return _Replayer(
        workflows=[PlaitWorkflow],
        interceptors=[_Serve(served)],
        workflow_runner=UnsandboxedWorkflowRunner(),
        data_converter=data_converter(),
    )


class RunHandle(WorkflowHandle[Any, RunResult]):
    """The handle `start` returns: a `WorkflowHandle` whose `result()` is the `RunResult`,
    and raises `WorkflowNondeterminism` when the run failed because a worker's agents no
    longer replay it."""

    async def result(self, *args: Any, **kwargs: Any) -> RunResult:
        try:
            return await super().result(*args, **kwargs)
        except WorkflowFailureError as exc:
            cause: BaseException | None = exc.cause
            while cause is not None:
                text = str(cause)
                if "TMPRL1100" in text or "Nondeterminism" in text:
                    raise nondeterminism(self.id, cause) from exc
                cause = cause.__cause__
            raise


async def start(
    client: Client,
    agent_name: str,
    input: str | Sequence[Message],
    *,
    workflow_id: str | None = None,
    task_queue: str = "plait",
) -> RunHandle:
    """Start a run of agent `agent_name` on `input` (a str: one user message, or messages)
    as a `PlaitWorkflow`; return its handle (`await handle.result()` is the `RunResult`)."""
    if isinstance(input, str):
        messages: Sequence[Message] = [Message.user(input)]
    elif isinstance(input, Sequence) and all(isinstance(m, Message) for m in input):
        messages = [m for m in input if isinstance(m, Message)]
    else:
        raise UsageError("input must be a str or a list of plait Messages")
    if workflow_id is None:
        import uuid

        workflow_id = f"plait-{agent_name}-{uuid.uuid4().hex}"
    request = {"agent": agent_name, "input": [dump_plain(m, Message) for m in messages]}
    plait_client = _plait_client(client)
    started = await plait_client.start_workflow(
        "PlaitWorkflow", request, id=workflow_id, task_queue=task_queue, result_type=RunResult
    )
    return RunHandle(
        plait_client,
        started.id,
        run_id=started.run_id,
        result_run_id=started.result_run_id,
        first_execution_run_id=started.first_execution_run_id,
        result_type=RunResult,
    )


async def resume(
    handle: WorkflowHandle[Any, Any],
    targets: Mapping[str, Any] | None = None,
    *,
    value: Any = UNSET,
) -> None:
    """Answer the pending interrupts of the run of `handle` (`targets`: interrupt id ->
    data; `value=`: the data when one interrupt is pending). Returns once the run has
    accepted them; a rejected resume raises `ResumeError` and leaves the run waiting."""
    if (targets is None) == (value is UNSET):
        raise ResumeError("give targets (interrupt id -> data) or value=, one of them")
    answer: dict[str, Any] = {"targets": dict(targets)} if targets is not None else {}
    if value is not UNSET:
        answer["value"] = value
    try:
        await handle.execute_update("resume", answer)
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        message = cause.message if isinstance(cause, ApplicationError) else str(cause)
        raise ResumeError(f"run '{handle.id}' refused the resume: {message}") from None
    except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError) as exc:
        if "completed" in str(exc):
            raise ResumeError(
                f"run '{handle.id}' is not waiting for a resume: its workflow has completed"
            ) from None
        raise ResumeError(f"run '{handle.id}' could not take the resume: {exc}") from exc
