"""Inside the workflow: the run's interceptor that turns each leaf model call, tool call and
sync graph node into a Temporal activity, and what an activity's failure becomes.

`Router` is installed in every run (and resume) the workflow makes. Its stand-ins keep the
shape of what they replace (a `ChatModel`, a `Tool`, a node), so the ReAct loop, its hooks,
its limits and its events are the same code as outside Temporal; only the call itself
crosses to an activity. An activity that fails for good fails as the call would: a model
call with a `ModelError`, a tool call as if the tool raised (after a timeout, saying that
its activity timed out).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

from plait._util.json import dump_plain, load_plain
from plait.core.context import Frame
from plait.errors import ModelError, PlaitError, ToolError
from plait.events import AgentAction
from plait.messages import Message
from plait.temporal._activities import MODEL_ACTIVITY, NODE_ACTIVITY, TOOL_ACTIVITY, rebuild
from plait.temporal._catalog import Catalog, runs_in_workflow
from plait.tools.base import ToolInfo, ToolResult

__all__ = ["DEFAULT_OPTIONS", "Router", "options_for"]

#: plait's activity options, under the worker's "default", "agent:<name>" and "tool:<name>".
DEFAULT_OPTIONS: Mapping[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=5),
    "retry_policy": RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1)),
}


def options_for(
    options: Mapping[str, Mapping[str, Any]], agent: str, tool: str | None = None
) -> dict[str, Any]:
    """Return the activity options of a call: plait's defaults, then the worker's
    "default", "agent:<agent>" and "tool:<tool>", the most specific winning key by key."""
    merged = dict(DEFAULT_OPTIONS)
    keys = ["default", f"agent:{agent}"] + ([f"tool:{tool}"] if tool is not None else [])
    for key in keys:
        merged.update(options.get(key) or {})
    return merged


def _timed_out(exc: ActivityError) -> str | None:
    """Return how the activity timed out (e.g. "start_to_close"), or None."""
    cause = exc.cause
    if isinstance(cause, TimeoutError):
        kind = cause.type
        return "a timeout" if kind is None else kind.name.lower()
    return None


def _cause(exc: ActivityError) -> Exception:
    """Return the exception the activity's code raised (rebuilt), or a description."""
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return rebuild(cause.type, cause.message, tuple(cause.details))
    return RuntimeError(str(cause or exc))


#: The options a local activity takes (`"local": True`: `workflow.execute_local_activity`).
_LOCAL_KEYS = frozenset(
    {
        "schedule_to_close_timeout",
        "schedule_to_start_timeout",
        "start_to_close_timeout",
        "retry_policy",
        "local_retry_threshold",
        "cancellation_type",
        "summary",
    }
)


async def _activity(name: str, request: Any, activity_id: str, options: dict[str, Any]) -> Any:
    """Run one activity (a local one with `"local": True`) and return its result. A workflow
    evicted while it waits (its worker shutting down, its cache full) ends the wait as a
    cancellation, which plait's agents, tools and generators close on in order, as for any
    cancelled run."""
    try:
        if options.pop("local", False):
            local = {k: v for k, v in options.items() if k in _LOCAL_KEYS}
            return await workflow.execute_local_activity(
                name, request, activity_id=activity_id, **local
            )
        options.pop("local_retry_threshold", None)
        return await workflow.execute_activity(name, request, activity_id=activity_id, **options)
    except BaseException as exc:
        if type(exc).__name__ == "_WorkflowBeingEvictedError":
            raise asyncio.CancelledError("the workflow is being evicted") from None
        raise


class Router:
    """The run's interceptor in the workflow: leaf calls become activities."""

    def __init__(self, catalog: Catalog, options: Mapping[str, Mapping[str, Any]]) -> None:
        self.catalog = catalog
        self.options = options
        self.calls = 0  # activities scheduled, numbering their ids

    def activity_id(self, *parts: str) -> str:
        """Return the next activity's id: its number, kind and names (a change of agent
        or tool in a run in flight is seen by Temporal as nondeterminism)."""
        self.calls += 1
        return ":".join((str(self.calls), *parts))

    def model(self, ctx: Frame, model: Any) -> Any:
        """Return the stand-in of the model the agent at `ctx` calls."""
        return ActivityModel(self, ctx, model)

    def side_model(self, ctx: Frame, model: Any) -> Any:
        """Return the stand-in of a model called outside the ReAct loop."""
        return ActivityModel(self, ctx, model)

    def tool(self, ctx: Frame, tool: Any) -> Any:
        """Return the stand-in of a leaf tool (control-flow tools run here as they are)."""
        return tool if runs_in_workflow(tool) else ActivityTool(self, ctx, tool)

    async def sync_node(self, ctx: Frame, name: str, fn: Any, state: Any) -> Any:
        """Run a sync graph node as an activity; return its update."""
        from plait.temporal._state import decode, encode

        request = {"node": self.catalog.number(fn, "graph node"), "state": encode(state)}
        opts = options_for(self.options, ctx.agent_name, name)
        try:
            update = await _activity(
                NODE_ACTIVITY, request, self.activity_id("node", ctx.agent_name, name), opts
            )
        except ActivityError as exc:
            timed_out = _timed_out(exc)
            if timed_out is not None:
                raise RuntimeError(
                    f"graph node '{name}': its activity timed out ({timed_out})"
                ) from None
            raise _cause(exc) from None
        return decode(update)


class ActivityModel:
    """A model whose every call is a `plait-model` activity."""

    def __init__(self, router: Router, ctx: Frame, model: Any) -> None:
        self._router = router
        self._ctx = ctx
        self._number = router.catalog.number(model, "model")

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Call the model in an activity; return its reply."""
        router, agent = self._router, self._ctx.agent_name
        request = {
            "model": self._number,
            "agent": agent,
            "messages": [dump_plain(m, Message) for m in messages],
            "tools": [dump_plain(t, ToolInfo) for t in tools],
            "options": dict(options),
        }
        try:
            reply = await _activity(
                MODEL_ACTIVITY,
                request,
                router.activity_id("model", agent),
                options_for(router.options, agent),
            )
        except ActivityError as exc:
            raise _model_failure(agent, exc) from None
        message: Message = load_plain(Message, reply)
        return message

    def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Call the model in an activity; yield its reply as one chunk."""
        return self._stream(messages, tools, options)

    async def _stream(
        self, messages: Sequence[Message], tools: Sequence[ToolInfo], options: dict[str, Any]
    ) -> AsyncGenerator[Message, None]:
        yield await self.generate(messages, tools=tools, **options)


def _model_failure(agent: str, exc: ActivityError) -> PlaitError:
    timed_out = _timed_out(exc)
    if timed_out is not None:
        return ModelError(
            f"the model call of agent '{agent}' failed: its activity timed out ({timed_out})",
            agent_name=agent,
        )
    cause = _cause(exc)
    if isinstance(cause, PlaitError):
        return cause
    return ModelError(f"the model call of agent '{agent}' failed: {cause}", agent_name=agent)


class ActivityTool:
    """A leaf tool whose every call is a `plait-tool` activity."""

    def __init__(self, router: Router, tctx: Frame, tool: Any) -> None:
        self._router = router
        self._tctx = tctx
        self._tool = tool
        self._number = router.catalog.number(tool, "tool")

    def info(self) -> ToolInfo:
        """Describe the tool (the real one's description)."""
        info: ToolInfo = self._tool.info()
        return info

    async def call(self, arguments_json: str, ctx: Any) -> str | ToolResult:
        """Run the call in an activity: return its result, raise what it raised, or pause
        the run here when it paused."""
        router, tctx = self._router, self._tctx
        name = tctx.tool_name or ""
        answers, root_id = tctx.waiting_answers()
        request = _tool_request(tctx, self._number, arguments_json, answers, root_id)
        try:
            answer = await _activity(
                TOOL_ACTIVITY,
                request,
                router.activity_id("tool", tctx.agent_name, name),
                options_for(router.options, tctx.agent_name, name),
            )
        except ActivityError as exc:
            raise _tool_failure(tctx, exc) from None
        _apply(tctx.session_values, answer["values"])
        _apply(tctx.state, answer["state"])
        pause = answer["pause"]
        if pause is not None:
            for _ in range(pause["answered"]):
                tctx.interrupt()  # the answers it took before it paused, taken here too
            tctx.interrupt(pause["info"], state=pause["state"])  # pauses, with a new id
        action = answer["action"]
        if action is not None:
            return ToolResult(content=answer["result"], action=load_plain(AgentAction, action))
        result: str = answer["result"]
        return result


def _tool_request(
    tctx: Frame, number: int, arguments: str, answers: list[Any], root_id: str
) -> dict[str, Any]:
    info = tctx.resume_info
    resume = None
    if info is not None:
        resume = {
            "was_interrupted": info.was_interrupted,
            "is_resume_target": info.is_resume_target,
            "interrupt_state": info.interrupt_state,
            "data": info.data,
        }
    return {
        "tool": number,
        "name": tctx.tool_name,
        "arguments": arguments,
        "agent": tctx.agent_name,
        "run_path": list(tctx.run_path),
        "depth": tctx.depth,
        "address": tctx.address,
        "call_id": tctx.tool_call_id,
        "values": dict(tctx.session_values),
        "state": dict(tctx.state),
        "user_state": tctx.interrupt_state(),
        "answers": answers,
        "resume": resume,
        "root_id": root_id,
    }


def _tool_failure(tctx: Frame, exc: ActivityError) -> Exception:
    timed_out = _timed_out(exc)
    name = tctx.tool_name or ""
    if timed_out is not None:
        return ToolError(
            f"tool '{name}' failed: its activity timed out ({timed_out})",
            tool_name=name,
            call_id=tctx.tool_call_id,
            agent_name=tctx.agent_name,
        )
    return _cause(exc)


def _apply(target: dict[str, Any], change: Mapping[str, Any]) -> None:
    target.update(change["set"])
    for key in change["removed"]:
        target.pop(key, None)
