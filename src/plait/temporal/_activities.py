"""The activities of a plait worker: one model call, one tool call, one sync graph node.

They run in whichever worker process of the task queue picks them up, on the objects the
`Catalog` numbers; only JSON-able data crosses. A tool call runs in a context standing for
its place in the run (agent, address, session values, team state, the answers to its
interrupts), so `interrupt()`, `run_context()` and `ctx.idempotency_key` work in it; a pause
comes back as data and is raised again in the workflow, at the same address. What the call
changed in the session values and the team state comes back as a difference, applied in the
workflow.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from plait._util.json import dump_plain, load_plain, to_json
from plait.core.context import Frame
from plait.core.kernel import Interrupted, call_in
from plait.core.resume import ResumePoints
from plait.core.run_state import RunSnapshot
from plait.errors import InvalidToolArguments, PlaitError, UsageError
from plait.events import AgentAction, InterruptCtx
from plait.messages import Message
from plait.models.base import model_error
from plait.temporal._catalog import Catalog
from plait.tools.base import ToolInfo, ToolResult

__all__ = ["Activities", "diff", "failure", "rebuild"]

MODEL_ACTIVITY = "plait-model"
TOOL_ACTIVITY = "plait-tool"
NODE_ACTIVITY = "plait-node"

_T = TypeVar("_T")

#: Errors that fail the same way however often they are tried.
_FINAL = (InvalidToolArguments, UsageError)


def failure(exc: BaseException) -> ApplicationError:
    """Return the activity failure that carries `exc` (its class, message, and a plait
    error as plait's JSON) to the workflow."""
    details: list[Any] = []
    if isinstance(exc, PlaitError):
        details.append(to_json(exc, PlaitError))
    return ApplicationError(
        str(exc), *details, type=type(exc).__name__, non_retryable=isinstance(exc, _FINAL)
    )


def rebuild(kind: str | None, message: str, details: tuple[Any, ...]) -> Exception:
    """Rebuild in the workflow the exception an activity failed with (`failure`)."""
    from plait._util.json import from_json

    if details and isinstance(details[0], str):
        try:
            error: Exception = from_json(PlaitError, details[0])
            return error
        except Exception:
            pass
    name = kind or "Exception"
    found = getattr(builtins, name, None)
    if isinstance(found, type) and issubclass(found, Exception):
        builtin: Exception = found(message)
        return builtin
    made: Exception = type(name, (Exception,), {"__module__": "plait.temporal"})(message)
    return made


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """Return what changed from `before` to `after`: keys set and keys removed."""
    changed = {k: v for k, v in after.items() if k not in before or before[k] != v}
    return {"set": changed, "removed": [k for k in before if k not in after]}


async def _heartbeating(call: Awaitable[_T]) -> _T:
    """Await `call`, heartbeating the activity meanwhile when it has a heartbeat timeout
    (so a worker that dies during a long call is noticed within that timeout)."""
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        return await call
    every = max(timeout.total_seconds() / 3, 0.05)

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    beating = asyncio.create_task(beat())
    try:
        return await call
    finally:
        beating.cancel()


class Activities:
    """The activities of one worker, calling the objects of its `Catalog`."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    @activity.defn(name=MODEL_ACTIVITY)
    async def model(self, request: dict[str, Any]) -> dict[str, Any]:
        """Call model number `request["model"]` once; return its reply."""
        model = self.catalog.model(request["model"])
        messages = [load_plain(Message, m) for m in request["messages"]]
        tools = [load_plain(ToolInfo, t) for t in request["tools"]]
        try:
            reply = await _heartbeating(model.generate(messages, tools=tools, **request["options"]))
        except Exception as exc:
            raise failure(model_error(request["agent"], exc)) from None
        if not isinstance(reply, Message):
            raise failure(TypeError(f"generate() returned {type(reply).__name__}, not a Message"))
        plain: dict[str, Any] = dump_plain(reply, Message)
        return plain

    @activity.defn(name=TOOL_ACTIVITY)
    async def tool(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run tool number `request["tool"]` once, in a context standing for its place in
        the run; return its result (or its pause) and what it changed."""
        tool = self.catalog.tool(request["tool"])
        tctx = _tool_context(request)
        values_before = dict(request["values"])
        state_before = dict(request["state"])
        try:
            result = await _heartbeating(call_in(tctx, tool.call, request["arguments"], tctx))
        except Exception as exc:
            raise failure(exc) from None
        answer: dict[str, Any] = {
            "values": diff(values_before, tctx.session_values),
            "state": diff(state_before, tctx.state),
            "result": None,
            "action": None,
            "pause": None,
        }
        if isinstance(result, Interrupted):
            answer["pause"] = _pause(tctx, result)
            return answer
        action = tctx.take_action()
        if isinstance(result, ToolResult):
            if result.action is not None:
                action = result.action if action is None else action.merge(result.action)
            result = result.content
        answer["result"] = result
        answer["action"] = None if action is None else dump_plain(action, AgentAction)
        return answer

    @activity.defn(name=NODE_ACTIVITY)
    async def node(self, request: dict[str, Any]) -> Any:
        """Run sync graph node number `request["node"]` on the state; return its update."""
        import functools

        from plait._util.threads import run_in_thread
        from plait.temporal._state import decode, encode

        node = self.catalog.node(request["node"])
        state = decode(request["state"])
        try:
            update = await _heartbeating(run_in_thread(functools.partial(node, state)))
        except Exception as exc:
            raise failure(exc) from None
        return encode(update)


def _tool_context(request: dict[str, Any]) -> Frame:
    """Build the context of the tool call `request` describes, with the answers, states
    and resume info it has in the run."""
    address, name, call_id = request["address"], request["name"], request["call_id"]
    agent_address = address[: -len(f";tool:{name}:{call_id}")]
    ctx = Frame.detached(
        agent_name=request["agent"],
        run_path=tuple(request["run_path"]),
        depth=request["depth"],
        agent_address=agent_address,
        session_values=dict(request["values"]),
    )
    snapshot = RunSnapshot(
        state=dict(request["state"]),
        user_states={address: request["user_state"]},
        root_id=request["root_id"],
    )
    answers = {address: list(request["answers"])} if request["answers"] else {}
    ctx.restore(snapshot, answers, _points(address, request["resume"]))
    return ctx.for_tool(name, call_id)


def _points(address: str, resume: dict[str, Any] | None) -> ResumePoints | None:
    """Rebuild the tool call's `resume_info` (None: the run is not a resume)."""
    if resume is None:
        return None
    if not resume["was_interrupted"]:
        return ResumePoints([], {}, {})
    here = InterruptCtx(id="here", address=address, info=None)
    targets = {"here": resume["data"]} if resume["is_resume_target"] else {}
    return ResumePoints([here], {address: resume["interrupt_state"]}, targets)


def _pause(tctx: Frame, paused: Interrupted) -> dict[str, Any]:
    """Describe the pause of a tool call: the interrupt's info and state, and how many
    earlier answers it took before it paused."""
    snapshot = tctx.snapshot()
    address = tctx.address
    first = paused.contexts[0]
    return {
        "info": first.info,
        "state": snapshot.user_states.get(address),
        "answered": len(snapshot.answers.get(address, [])),
    }
