"""The conformance checks of effects and approvals (`plait.effects`), part of `CHECKS`.

Each runs real runs on the store it is given: a `"once"` call stopped in flight, or raced by
two resumes, never runs twice; an approval is bound to its fingerprint, expires to its
default, is skipped by a standing rule, and every decision lands in the audit log; the
journal's records expire with the run's checkpoints and its audit log takes concurrent
appends.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from plait._util.expect import raised
from plait.core.agent_context import AgentContext
from plait.core.run_state import IdSource
from plait.errors import CheckpointAlreadyResumed, CheckpointCorrupt, ResumeError, RunCancelled
from plait.messages import Message
from plait.stores.base import Store
from plait.tools.base import Approval, Effect, ToolInfo

__all__ = ["EFFECT_CHECKS", "Clock", "payment_runner"]

_WAIT = 60.0  # seconds a check waits for an event before it fails (a safety net only)


class Clock(IdSource):
    """A time source the checks move forward by hand (`advance`)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        """Return the real time plus what `advance` added."""
        return super().now() + self.offset

    def advance(self, seconds: float) -> None:
        """Move the clock `seconds` forward."""
        self.offset += timedelta(seconds=seconds)


class Payments:
    """A payment tool's world: the charges made, and a switch that holds a charge in
    flight (`hold`) until the run is stopped."""

    def __init__(self) -> None:
        self.charges: list[tuple[str, int]] = []  # (idempotency key, cents), per run of charge
        self.started = asyncio.Event()
        self.hold = False


def payment_runner(
    store: Store,
    payments: Payments,
    *,
    effect: Effect = "once",
    approval: bool | Approval | None = None,
    **options: Any,
) -> Any:
    """Return a `Runner` on `store` whose agent calls `charge(cents=500)` once (call id
    "charge-1") and then answers with the tool's result."""
    from plait import ChatModelAgent, Runner, tool
    from plait.testing import FunctionModel, call

    @tool(effect=effect, approval=approval)
    async def charge(ctx: AgentContext, cents: int) -> str:
        """Charge the customer."""
        assert ctx.idempotency_key is not None
        payments.charges.append((ctx.idempotency_key, cents))
        payments.started.set()
        if payments.hold:
            await asyncio.Event().wait()  # in flight until the run is stopped
        return f"charged {cents}"

    def model(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
        results = [m.content for m in messages if m.role == "tool"]
        if not results:
            return call("charge", {"cents": 500}, id="charge-1")
        return f"result: {results[-1]}"

    return Runner(
        ChatModelAgent("shop", FunctionModel(model), tools=[charge]), store=store, **options
    )


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


async def _resume(runner: Any, checkpoint_id: str, value: Any) -> Any:
    return await runner.resume(checkpoint_id, value=value).collect()


async def _stopped_in_flight(runner: Any, payments: Payments, checkpoint_id: str) -> Any:
    """Run until the charge is in flight, stop the run with `cancel()`; return its result."""
    payments.hold = True
    stream = runner.query("pay", checkpoint_id=checkpoint_id)
    collecting = asyncio.ensure_future(stream.collect())
    try:
        async with asyncio.timeout(_WAIT):
            await payments.started.wait()
        stream.cancel()
        async with asyncio.timeout(_WAIT):
            result = await collecting
    finally:
        collecting.cancel()
    payments.hold = False
    return result


async def once_calls_stopped_in_flight_never_run_twice(store: Store) -> None:
    """A `"once"` call stopped by `cancel()` while it runs is not run again on the resume:
    the run pauses on an `unknown_outcome` question; "done" settles it with the given result
    (recorded: a later look answers from the journal), and every answer is audited."""
    payments = Payments()
    runner = payment_runner(store, payments)
    stopped = await _stopped_in_flight(runner, payments, _id("pay"))
    assert isinstance(stopped.error, RunCancelled), stopped.error
    asked = await runner.resume(stopped.checkpoint_id).collect()
    assert len(payments.charges) == 1, payments.charges
    assert [list(i.info) for i in asked.interrupts] == [["unknown_outcome"]], asked.interrupts
    question = asked.interrupts[0].info["unknown_outcome"]
    key = payments.charges[0][0]
    assert (question["tool"], question["arguments"], question["key"]) == (
        "charge",
        {"cents": 500},
        key,
    )
    assert question["started_at"] is not None
    inbox = await runner.approvals.pending()
    assert [(i["kind"], i["interrupt_id"]) for i in inbox] == [
        ("unknown_outcome", asked.interrupts[0].id)
    ]
    bad = await raised(
        ResumeError,
        lambda: runner.resume(asked.checkpoint_id, value={"outcome": "maybe"}).collect(),
    )
    assert "outcome" in str(bad)
    done = await runner.resume(
        asked.checkpoint_id, value={"outcome": "done", "result": "charged 500 (by hand)"}
    ).collect()
    assert done.final_output == "result: charged 500 (by hand)", done.error
    assert len(payments.charges) == 1
    assert await runner.approvals.pending() == []
    [entry] = await runner.approvals.audit()
    assert (entry["decision"], entry["via"], entry["approver"], entry["tool"]) == (
        "done",
        "resume",
        "local",
        "charge",
    )
    assert entry["interrupt_id"] == asked.interrupts[0].id


async def damaged_journal_entries_never_run_a_call_again(store: Store) -> None:
    """A `"once"` call whose journal entry is damaged (not JSON, not an object, an unknown
    state, finished without a result, an approval without a decision) does not run: the
    resumed run ends with `CheckpointCorrupt` naming the key and leaves its checkpoint
    pending; the entry restored, the resume goes on as before (an `unknown_outcome`)."""
    from plait.stores.journal import entry_id

    payments = Payments()
    runner = payment_runner(store, payments)
    stopped = await _stopped_in_flight(runner, payments, _id("pay"))
    key = payments.charges[0][0]
    kept = await store.get_session_record(entry_id(key))
    assert kept is not None and json.loads(kept.data)["state"] == "started"
    damaged = (
        b"not json",
        b"[]",
        b'{"state": "paid"}',
        b'{"state": ["started"]}',
        b'{"state": "finished"}',
        b'{"approval": "yes"}',
    )
    for data in damaged:
        await store.put_session(entry_id(key), data, ttl=60.0)
        refused = await runner.resume(stopped.checkpoint_id).collect()
        assert isinstance(refused.error, CheckpointCorrupt), (data, refused.error)
        assert refused.error.key == key and key in str(refused.error)  # type: ignore[attr-defined]
        assert len(payments.charges) == 1, (data, payments.charges)
        record = await store.get_checkpoint(stopped.checkpoint_id)
        assert record is not None and record.status == "pending", data
        assert (await store.get_session_record(entry_id(key))).data == data  # type: ignore[union-attr]
    await store.put_session(entry_id(key), kept.data, ttl=60.0)
    asked = await runner.resume(stopped.checkpoint_id).collect()
    assert [list(i.info) for i in asked.interrupts] == [["unknown_outcome"]], asked.error
    assert len(payments.charges) == 1


async def unknown_outcomes_can_be_retried_or_skipped(store: Store) -> None:
    """ "retry" runs the stopped call again (with the same idempotency key); "skip" answers
    with `skipped: <message>` and runs nothing."""
    for outcome, expected in (("retry", "result: charged 500"), ("skip", "result: skipped: no")):
        payments = Payments()
        runner = payment_runner(store, payments)
        stopped = await _stopped_in_flight(runner, payments, _id("pay"))
        asked = await runner.resume(stopped.checkpoint_id).collect()
        answer: dict[str, Any] = {"outcome": outcome}
        if outcome == "skip":
            answer["message"] = "no"
        done = await runner.resume(asked.checkpoint_id, value=answer).collect()
        assert done.final_output == expected, (outcome, done.error)
        keys = {key for key, _ in payments.charges}
        assert len(payments.charges) == (2 if outcome == "retry" else 1) and len(keys) == 1
        assert (await runner.approvals.audit(limit=1))[0]["decision"] == outcome


async def concurrent_resumes_run_a_once_call_once(store: Store) -> None:
    """Two resumes of one approval, at once: one wins, the other is refused, and the
    approved `"once"` call runs exactly once."""
    payments = Payments()
    runner = payment_runner(store, payments, approval=True)
    paused = await runner.query("pay").collect()
    question = paused.interrupts[0].info["approval"]
    answer = {"approved": True, "fingerprint": question["fingerprint"]}

    async def resume() -> Any:
        try:
            return await runner.resume(paused.checkpoint_id, value=answer).collect()
        except CheckpointAlreadyResumed as exc:
            return exc

    outcomes = await asyncio.gather(resume(), resume())
    finished = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(finished) == 1, outcomes
    assert finished[0].final_output == "result: charged 500", finished[0].error
    assert len(payments.charges) == 1
    assert [e["decision"] for e in await runner.approvals.audit()] == ["approved"]


async def approvals_are_bound_to_their_arguments(store: Store) -> None:
    """An approval pauses with the tool, its arguments and their fingerprint; an answer
    with no fingerprint, another call's fingerprint, or a replay of an answer already used
    is refused and leaves the run pending; the right answer runs the call once, and a
    rejection answers "rejected by <approver>: <comment>"."""
    payments = Payments()
    runner = payment_runner(store, payments, approval=True)
    paused = await runner.query("pay").collect()
    [interrupt] = paused.interrupts
    question = interrupt.info["approval"]
    text = json.dumps(
        {"tool": "charge", "arguments": {"cents": 500}},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert question == {
        "tool": "charge",
        "arguments": {"cents": 500},
        "fingerprint": hashlib.sha256(text.encode()).hexdigest(),
        "expires_at": None,
        "default": "reject",
    }
    altered = json.dumps({"tool": "charge", "arguments": {"cents": 50000}}, sort_keys=True)
    other = hashlib.sha256(altered.encode()).hexdigest()
    wrongs: list[Any] = [{"approved": True}, {"approved": True, "fingerprint": other}, True]
    for wrong in wrongs:
        await raised(ResumeError, functools.partial(_resume, runner, paused.checkpoint_id, wrong))
        record = await store.get_checkpoint(paused.checkpoint_id)
        assert record is not None and record.status == "pending"
    assert payments.charges == []
    approve = {"approved": True, "fingerprint": question["fingerprint"], "comment": None}
    done = await runner.resume(paused.checkpoint_id, value=approve, approver="ann").collect()
    assert done.final_output == "result: charged 500" and len(payments.charges) == 1
    replay = await raised(
        ResumeError, lambda: runner.resume(paused.checkpoint_id, value=approve).collect()
    )
    assert isinstance(replay, CheckpointAlreadyResumed)
    again = await runner.query("pay").collect()
    digest = again.interrupts[0].info["approval"]["fingerprint"]
    reject = {"approved": False, "fingerprint": digest, "comment": "too much"}
    rejected = await runner.resume(again.checkpoint_id, value=reject, approver="bob").collect()
    assert rejected.final_output == "result: rejected by bob: too much"
    assert len(payments.charges) == 1
    audit = await runner.approvals.audit()
    assert [(e["decision"], e["approver"], e["via"]) for e in audit] == [
        ("rejected", "bob", "resume"),
        ("approved", "ann", "resume"),
    ]
    assert audit[1]["interrupt_id"] == interrupt.id
    assert audit[1]["checkpoint_id"] == paused.checkpoint_id
    assert audit[1]["arguments"] == {"cents": 500}


async def expired_approvals_apply_their_default(store: Store) -> None:
    """A resume after `expires_at` applies the default whatever the answer: "reject" answers
    "rejected: the approval expired" (audited with approver None, via "expiry"); "approve"
    runs the call."""
    for default, expected in (("reject", "result: rejected: the approval expired"),
                              ("approve", "result: charged 500")):  # fmt: skip
        payments, clock = Payments(), Clock()
        approval = Approval(expires_in=30, default=default)  # type: ignore[arg-type]
        runner = payment_runner(store, payments, approval=approval, ids=clock)
        paused = await runner.query("pay").collect()
        question = paused.interrupts[0].info["approval"]
        expires_at = datetime.fromisoformat(question["expires_at"])
        assert timedelta(seconds=29) < expires_at - clock.now() <= timedelta(seconds=30)
        assert question["default"] == default
        clock.advance(31)
        done = await runner.resume(paused.checkpoint_id, value={"approved": True}).collect()
        assert done.final_output == expected, done.error
        assert len(payments.charges) == (1 if default == "approve" else 0)
        [entry, *_] = await runner.approvals.audit()
        decision = "approved" if default == "approve" else "rejected"
        assert (entry["decision"], entry["approver"], entry["via"]) == (decision, None, "expiry")


async def standing_rules_approve_without_a_pause(store: Store) -> None:
    """A user's rule for a tool approves that user's calls without a pause (audited with
    the rule's user, the run's checkpoint id and no interrupt); another user's calls still
    ask; after `revoke` they ask again."""
    payments = Payments()
    await payment_runner(store, payments).approvals.allow("ann", "charge")
    ann = payment_runner(store, payments, approval=True, user="ann")
    run_id = _id("ann")
    done = await ann.query("pay", checkpoint_id=run_id).collect()
    assert (done.final_output, done.interrupts) == ("result: charged 500", ())
    [entry] = await ann.approvals.audit()
    assert (entry["decision"], entry["approver"], entry["via"]) == ("approved", "ann", "rule")
    assert (entry["checkpoint_id"], entry["interrupt_id"]) == (run_id, None)
    bob = payment_runner(store, payments, approval=True, user="bob")
    assert [list(i.info) for i in (await bob.query("pay").collect()).interrupts] == [["approval"]]
    assert await ann.approvals.rules("ann") == ["charge"]
    await ann.approvals.revoke("ann", "charge")
    assert (await ann.query("pay").collect()).interrupts
    assert len(payments.charges) == 1


async def answered_questions_leave_the_inbox(store: Store) -> None:
    """The stored inbox holds only the open questions: each answered approval (approved,
    rejected, or expired to its default) leaves it as its answer is applied, without the
    inbox being read; `pending()` lists exactly the open ones."""
    from plait.stores.journal import INBOX

    async def stored() -> list[dict[str, Any]]:
        found = await store.get_session_record(INBOX)
        return [] if found is None else list(json.loads(found.data)["items"])

    payments, clock = Payments(), Clock()
    approval = Approval(expires_in=600)
    runner = payment_runner(store, payments, approval=approval, ids=clock)
    waiting = [await runner.query("pay").collect() for _ in range(2)]
    before = {(i["checkpoint_id"], i["interrupt_id"]) for i in await stored()}
    open_ids = {(r.checkpoint_id, r.interrupts[0].id) for r in waiting}
    assert open_ids <= before
    asked = set(open_ids)
    for n in range(12):
        paused = await runner.query("pay").collect()
        asked.add((paused.checkpoint_id, paused.interrupts[0].id))
        assert len(await stored()) == len(before) + 1
        fingerprint = paused.interrupts[0].info["approval"]["fingerprint"]
        answer = {"approved": n % 3 == 0, "fingerprint": fingerprint}
        if n % 3 == 2:
            clock.advance(601)  # it expires: the default applies
        done = await runner.resume(paused.checkpoint_id, value=answer).collect()
        assert done.final_output is not None, done.error
        assert {(i["checkpoint_id"], i["interrupt_id"]) for i in await stored()} == before
    pending = await runner.approvals.pending()
    assert {(q["checkpoint_id"], q["interrupt_id"]) for q in pending} & asked == open_ids


async def effect_records_expire_with_the_checkpoints(store: Store) -> None:
    """A `"once"` call's journal entry has the checkpoint ttl: kept while it lasts, gone
    after it."""
    from plait.stores.journal import entry_id

    for ttl in (60.0, 0.3):
        payments = Payments()
        runner = payment_runner(store, payments, checkpoint_ttl=ttl)
        assert (await runner.query("pay").collect()).final_output == "result: charged 500"
        key = payments.charges[0][0]
        if ttl == 60.0:
            assert await store.get_session_record(entry_id(key)) is not None
    await asyncio.sleep(1.0)
    assert await store.get_session_record(entry_id(key)) is None


async def the_audit_log_keeps_concurrent_appends(store: Store) -> None:
    """Concurrent appends to the audit log all land, over several of its records, and are
    read back newest first."""
    from plait.stores.journal import PAGE, append_audit, read_audit

    count = PAGE + 6
    await asyncio.gather(*(append_audit(store, {"n": n}) for n in range(count)))
    found = await read_audit(store, count + 10)
    assert sorted(e["n"] for e in found) == list(range(count))
    await append_audit(store, {"n": "last"})
    assert (await read_audit(store, 1))[0] == {"n": "last"}


EFFECT_CHECKS = [
    once_calls_stopped_in_flight_never_run_twice,
    damaged_journal_entries_never_run_a_call_again,
    unknown_outcomes_can_be_retried_or_skipped,
    concurrent_resumes_run_a_once_call_once,
    approvals_are_bound_to_their_arguments,
    expired_approvals_apply_their_default,
    standing_rules_approve_without_a_pause,
    answered_questions_leave_the_inbox,
    effect_records_expire_with_the_checkpoints,
    the_audit_log_keeps_concurrent_appends,
]
