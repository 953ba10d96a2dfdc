"""The gate in front of a tool call: its approval, and the journal of a `"once"` effect.

`Gate` is a `plait.Hooks` on the `wrap_tool` seam: an agent puts it innermost of its own
hooks for the calls of a tool that has an approval or a `"once"` effect (`call_next` runs
the tool; only the runner's innermost hooks, such as a cassette, stand between them).

A tool with `approval` pauses the run before it runs, with an interrupt whose info names the
tool, its exact arguments and their fingerprint; the answer (checked against the fingerprint
before the checkpoint is claimed, `plait.approvals.check_answers`) approves or rejects that
call, and the decision is kept in the call's journal entry, so it is asked once, even after
a stop or a crash. A standing rule (`runner.approvals.allow`) approves without a pause.

A `"once"` tool's call is journaled under its idempotency key (`plait.journal`): "started"
is committed before the function runs, "finished" with the result after. Reached again, a
finished call answers with its recorded result; a started one whose outcome is unknown (the
run stopped or crashed while it ran) pauses the run with an `unknown_outcome` interrupt
instead of running again. A damaged entry is never taken as "not started": the call does not
run and the run ends with `CheckpointCorrupt`. Every decision goes to the audit log, and an
answered question leaves the inbox as its answer is applied.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from plait.core.context import Frame, inside
from plait.core.hooks import Hooks, end_run
from plait.core.kernel import Interrupted, call_in
from plait.core.signal import raise_pause
from plait.errors import CheckpointCorrupt, ResumeError, ToolError
from plait.events import InterruptCtx
from plait.messages import ToolCall
from plait.stores.journal import (
    EffectStore,
    add_inbox,
    append_audit,
    change,
    drop_inbox,
    entry_id,
    has_rule,
    put_new,
    read_entry,
)
from plait.tools.base import Approval, Effect, ToolResult

if TYPE_CHECKING:
    from plait.core.agent_context import HookContext

__all__ = ["APPROVAL", "UNKNOWN_OUTCOME", "EffectRun", "Gate", "fingerprint", "gated_call"]

CallNext = Callable[[ToolCall], Awaitable[Any]]

#: The `state` of the interrupts a gate raises (saved with the checkpoint): which question.
APPROVAL = "plait.approval"
UNKNOWN_OUTCOME = "plait.unknown_outcome"


def fingerprint(tool: str, arguments: Any) -> str:
    """Return the sha256 hex digest that binds an answer to a tool and its arguments."""
    text = json.dumps(
        {"tool": tool, "arguments": arguments},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def parsed(arguments: str) -> Any:
    """Return a call's arguments as JSON data (the text itself when it is not JSON)."""
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return arguments


def _no_checkpoint() -> str | None:
    return None


@dataclasses.dataclass(slots=True, eq=False)
class EffectRun:
    """What the gates of one run's tool calls use: the store, whose calls (`user`, for
    standing rules), who answers on this resume (`approver`), the ttl of the run's records,
    the run's checkpoint id, the checkpoint this run resumed and the questions it answers,
    and the questions raised in this run (for the inbox)."""

    store: EffectStore
    _: dataclasses.KW_ONLY
    user: str
    approver: str
    ttl: float | None
    agent: str
    checkpoint: Callable[[], str | None] = dataclasses.field(default=_no_checkpoint, init=False)
    resumed: str | None = dataclasses.field(default=None, init=False)  # the run it resumed
    # address -> id of the interrupt this resume answers
    answered: dict[str, str] = dataclasses.field(default_factory=dict, init=False)
    # address -> inbox item, while it pauses
    waiting: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict, init=False)

    def answering(self, checkpoint_id: str, interrupts: tuple[InterruptCtx, ...]) -> None:
        """Note the checkpoint this run resumes and the interrupts it answers."""
        self.resumed = checkpoint_id
        self.answered = {i.address: i.id for i in interrupts}

    async def list_questions(
        self, interrupts: tuple[InterruptCtx, ...], checkpoint_id: str, at: datetime
    ) -> None:
        """Put the questions the run paused on (approvals, unknown outcomes) in the inbox,
        with their checkpoint and interrupt ids, in place of those of the checkpoint it
        resumed (asked again, they have new ids)."""
        items = [
            {
                **self.waiting[i.address],
                "checkpoint_id": checkpoint_id,
                "interrupt_id": i.id,
                "agent": self.agent,
                "at": at.isoformat(),
            }
            for i in interrupts
            if i.address in self.waiting
        ]
        self.waiting.clear()
        if items:
            resumed = self.resumed
            replacing = [] if resumed is None else [(resumed, i) for i in self.answered.values()]
            await add_inbox(self.store, items, replacing=replacing)

    async def close_question(self, address: str | None) -> None:
        """Take the question this resume answers at `address` out of the inbox."""
        interrupt_id = None if address is None else self.answered.get(address)
        if self.resumed is not None and interrupt_id is not None:
            await drop_inbox(self.store, [(self.resumed, interrupt_id)])

    def audit(
        self,
        ctx: Frame,
        call: ToolCall,
        decision: str,
        approver: str | None,
        via: str,
        *,
        address: str | None,
    ) -> dict[str, Any]:
        """Return the audit entry of a decision about `call` (the interrupt answered at
        `address`, None for a rule)."""
        arguments = parsed(call.arguments)
        return {
            "at": ctx.run.ids.now().isoformat(),
            "checkpoint_id": self.checkpoint(),
            "interrupt_id": None if address is None else self.answered.get(address),
            "tool": call.name,
            "fingerprint": fingerprint(call.name, arguments),
            "arguments": arguments,
            "decision": decision,
            "approver": approver,
            "via": via,
        }


class Gate(Hooks):
    """The gate of one tool's calls, on the `wrap_tool` seam: its `approval` is asked (or
    applied) first; with `effect="once"` the call is then journaled."""

    def __init__(self, effect: Effect, approval: Approval | None) -> None:
        self.effect = effect
        self.approval = approval

    def __repr__(self) -> str:
        return f"Gate(effect={self.effect!r}, approval={self.approval!r})"

    async def wrap_tool(self, ctx: HookContext, call: ToolCall, call_next: CallNext) -> Any:
        """Let the call through the gate (`call_next` runs the tool), or answer it."""
        return await gated_call(self.effect, self.approval, call, inside(ctx), call_next)


async def gated_call(
    effect: Effect, approval: Approval | None, call: ToolCall, tctx: Frame, call_next: CallNext
) -> str | ToolResult:
    """Let `call` through its gate: ask (or apply) its approval, then run it (`call_next`),
    journaled when its effect is "once"."""
    run: EffectRun | None = tctx.run.effects
    if run is None:  # not inside a runner: nothing to journal in
        result: str | ToolResult = await call_next(call)
        return result
    key = tctx.idempotency_key
    assert key is not None
    entry, version = await _read_entry(run, key)
    if approval is not None:
        decided = entry.get("approval")
        if decided is None:
            decided = await _decide(run, approval, call, tctx, key)
            entry, version = await _read_entry(run, key)
            decided = entry.get("approval") or decided
        if decided["decision"] == "rejected":
            return _rejection(decided)
    if effect == "once":
        return await _once(run, call_next, call, tctx, key, entry, version)
    result = await call_next(call)
    return result


async def _read_entry(run: EffectRun, key: str) -> tuple[dict[str, Any], int]:
    """Return the call's journal entry and its version; a damaged one ends the whole run
    with its `CheckpointCorrupt` (the call does not run: it may have run already)."""
    try:
        return await read_entry(run.store, key)
    except CheckpointCorrupt as exc:
        end_run(exc)
        raise


def _rejection(decided: dict[str, Any]) -> str:
    """Return the tool result of a rejected call."""
    if decided.get("via") == "expiry":
        return "rejected: the approval expired"
    text = f"rejected by {decided.get('approver')}"
    comment = decided.get("comment")
    return f"{text}: {comment}" if comment else text


def _expired(expires_at: str | None, now: datetime) -> bool:
    return expires_at is not None and now >= datetime.fromisoformat(expires_at)


async def _decide(
    run: EffectRun, approval: Approval, call: ToolCall, tctx: Frame, key: str
) -> dict[str, Any]:
    """Decide the approval of `call`: by a standing rule, by expiry, or by the answer of a
    person (the run pauses here until one is given). Record it in the journal entry and
    the audit log; return it."""
    if await has_rule(run.store, run.user, call.name):
        decided = {"decision": "approved", "approver": run.user, "via": "rule", "comment": None}
        return await _record(run, tctx, call, key, decided, None)
    gate = tctx.place("approval")
    arguments = parsed(call.arguments)
    digest = fingerprint(call.name, arguments)
    prior = gate.interrupt_state()
    now = tctx.run.ids.now()
    if isinstance(prior, dict) and prior.get("kind") == APPROVAL:
        expires_at = prior.get("expires_at")
    elif approval.expires_in is not None:
        expires_at = (now + timedelta(seconds=approval.expires_in)).isoformat()
    else:
        expires_at = None
    answer: Any = None
    if not _expired(expires_at, now):
        question = {
            "tool": call.name,
            "arguments": arguments,
            "fingerprint": digest,
            "expires_at": expires_at,
            "default": approval.default,
        }
        state = {"kind": APPROVAL, "fingerprint": digest, "expires_at": expires_at}
        run.waiting[gate.address] = {**question, "kind": "approval"}
        answer = gate.interrupt({"approval": question}, state=state)
        run.waiting.pop(gate.address, None)
        now = tctx.run.ids.now()
    if _expired(expires_at, now):
        decision = "approved" if approval.default == "approve" else "rejected"
        decided = {"decision": decision, "approver": None, "via": "expiry", "comment": None}
        return await _record(run, tctx, call, key, decided, gate.address)
    if not isinstance(answer, dict) or answer.get("fingerprint") != digest:
        raise ResumeError(f"the answer to the approval of tool '{call.name}' does not fit it")
    decided = {
        "decision": "approved" if answer.get("approved") is True else "rejected",
        "approver": run.approver,
        "via": "resume",
        "comment": answer.get("comment"),
    }
    return await _record(run, tctx, call, key, decided, gate.address)


async def _record(
    run: EffectRun,
    tctx: Frame,
    call: ToolCall,
    key: str,
    decided: dict[str, Any],
    address: str | None,
) -> dict[str, Any]:
    """Keep an approval decision in the call's journal entry (unless one was recorded
    first) and append it to the audit log."""
    first = True

    def keep(entry: dict[str, Any]) -> dict[str, Any] | None:
        nonlocal first
        first = entry.get("approval") is None
        return {**entry, "approval": decided} if first else None

    await change(run.store, entry_id(key), keep, ttl=run.ttl)
    await run.close_question(address)
    if first:
        entry = run.audit(tctx, call, decided["decision"], decided["approver"], decided["via"],
                          address=address)  # fmt: skip
        await append_audit(run.store, entry)
    return decided


async def _once(
    run: EffectRun,
    call_next: CallNext,
    call: ToolCall,
    tctx: Frame,
    key: str,
    entry: dict[str, Any],
    version: int,
) -> str | ToolResult:
    """Run a `"once"` call at most once: answer a finished call from the journal, ask
    about one whose outcome is unknown, else mark it started and run it."""
    while True:
        state = entry.get("state")
        if state == "finished":
            return str(entry.get("result", ""))
        if state == "failed":
            raise ToolError(str(entry.get("error", "")), tool_name=call.name, call_id=call.id)
        if state == "started":
            settled = await _unknown_outcome(run, call, tctx, key, entry)
            if settled is not None:
                return settled
            entry, version = await _read_entry(run, key)
        started = {**entry, "state": "started", "started_at": tctx.run.ids.now().isoformat()}
        written = await put_new(run.store, entry_id(key), started, version, run.ttl)
        if written is not None:
            return await _run_journaled(run, call_next, call, tctx, key, (started, written))
        entry, version = await _read_entry(run, key)  # another run got there


async def _run_journaled(
    run: EffectRun,
    call_next: CallNext,
    call: ToolCall,
    tctx: Frame,
    key: str,
    marked: tuple[dict[str, Any], int],
) -> str | ToolResult:
    """Run the tool (`marked` started: the entry and its version); record how it ended (a
    pause: not started, and the pause goes on up)."""
    started, version = marked
    try:
        result = await call_in(tctx, call_next, call)
    except asyncio.CancelledError:  # stopped in flight: its outcome is unknown
        raise
    except Exception as exc:
        await _settle(run, key, {**started, "state": "failed", "error": f"{exc}"}, version)
        raise
    if isinstance(result, Interrupted):  # the tool paused itself: it runs again from its start
        await _settle(run, key, {**started, "state": None, "started_at": None}, version)
        raise_pause(result.contexts)
    answer: str | ToolResult = result
    content = answer.content if isinstance(answer, ToolResult) else answer
    await _settle(run, key, {**started, "state": "finished", "result": content}, version)
    return answer


async def _settle(
    run: EffectRun, key: str, entry: dict[str, Any], version: int | None = None
) -> None:
    """Write how a started call ended over its entry (at `version` when known: no read)."""

    async def write() -> None:
        if (
            version is None
            or await put_new(run.store, entry_id(key), entry, version, run.ttl) is None
        ):
            await change(run.store, entry_id(key), lambda _: entry, ttl=run.ttl)

    await asyncio.shield(asyncio.ensure_future(write()))  # a stop now does not lose it


async def _unknown_outcome(
    run: EffectRun, call: ToolCall, tctx: Frame, key: str, entry: dict[str, Any]
) -> str | None:
    """Ask what became of a call that started and never finished (the run pauses here);
    return the tool result the answer settles it with, or None to run it again."""
    gate = tctx.place("outcome")
    arguments = parsed(call.arguments)
    question = {
        "tool": call.name,
        "arguments": arguments,
        "key": key,
        "started_at": entry.get("started_at"),
    }
    run.waiting[gate.address] = {
        "tool": call.name,
        "arguments": arguments,
        "fingerprint": fingerprint(call.name, arguments),
        "expires_at": None,
        "kind": "unknown_outcome",
    }
    answer = gate.interrupt({"unknown_outcome": question}, state={"kind": UNKNOWN_OUTCOME})
    run.waiting.pop(gate.address, None)
    outcome = answer.get("outcome") if isinstance(answer, dict) else None
    if outcome not in ("done", "retry", "skip"):
        raise ResumeError(f"the answer about tool '{call.name}' is not an outcome")
    audited = run.audit(tctx, call, outcome, run.approver, "resume", address=gate.address)
    await append_audit(run.store, audited)
    await run.close_question(gate.address)
    if outcome == "retry":
        return None
    if outcome == "done":
        result = answer.get("result")
        content = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    else:
        content = f"skipped: {answer.get('message')}"
    await _settle(run, key, {**entry, "state": "finished", "result": content})
    return content
