"""Tool effects and approvals through the public API: the options and their errors, which
calls are journaled, parallel approvals, a `once` tool that pauses itself, sync tools."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from plait import (
    AgentContext,
    Approval,
    ChatModelAgent,
    FunctionTool,
    Message,
    Runner,
    interrupt,
    tool,
)
from plait.errors import UsageError
from plait.stores import MemoryStore
from plait.testing import FunctionModel, call, calls
from plait.tools import ToolInfo


def _payer(tools: list[Any], *arguments: dict[str, Any]) -> ChatModelAgent:
    """An agent that calls `pay` once per arguments (in one reply), then lists the results."""

    def model(messages: list[Message], offered: list[ToolInfo]) -> Message | str:
        if messages[-1].role == "tool":
            return " | ".join(m.content for m in messages if m.role == "tool")
        made = [call("pay", args, id=f"pay-{n}") for n, args in enumerate(arguments)]
        return calls(*made)

    return ChatModelAgent("payer", FunctionModel(model), tools=tools)


def _journaled(store: MemoryStore, key: str | None) -> bool:
    """Whether the call with idempotency key `key` has a journal entry in `store`."""
    return asyncio.run(store.get_session_record(f"plait.effects/call/{key}")) is not None


@pytest.mark.parametrize(
    ("options", "text"),
    [
        ({"effect": "twice"}, "effect is 'read', 'idempotent' or 'once'"),
        ({"approval": "yes"}, "approval is True, False, None or a plait.Approval"),
    ],
)
def test_bad_effects_and_approvals_are_usage_errors(options: dict[str, Any], text: str) -> None:
    with pytest.raises(UsageError, match=text):
        FunctionTool(lambda: "x", name="t", **options)


def test_an_approval_refuses_a_bad_expiry_or_default() -> None:
    with pytest.raises(UsageError):
        Approval(expires_in=0)
    with pytest.raises(UsageError, match="'reject' or 'approve'"):
        Approval(default="maybe")  # type: ignore[arg-type]


def test_the_effect_is_in_the_tools_info_and_idempotent_by_default() -> None:
    @tool
    def plain() -> str:
        """Plain."""
        return ""

    @tool(effect="read", approval=True)
    def look() -> str:
        """Look."""
        return ""

    assert (plain.info().effect, plain.approval) == ("idempotent", None)
    assert (look.info().effect, look.approval) == ("read", Approval())


@pytest.mark.parametrize("effect", ["read", "idempotent"])
def test_only_once_calls_are_journaled(effect: str) -> None:
    store, keys = MemoryStore(), []

    @tool(effect=effect)  # type: ignore[call-overload]
    def pay(ctx: AgentContext, cents: int) -> str:
        """Pay."""
        keys.append(ctx.idempotency_key)
        return f"paid {cents}"

    result = Runner(_payer([pay], {"cents": 1}), store=store).query_sync("pay")
    assert result.final_output == "paid 1"
    assert not _journaled(store, keys[0])


def test_a_sync_once_call_is_journaled_and_answers_from_its_journal() -> None:
    store, ran = MemoryStore(), []

    @tool(effect="once")
    def pay(ctx: AgentContext, cents: int) -> str:
        """Pay."""
        ran.append(ctx.idempotency_key)
        return f"paid {cents}"

    result = Runner(_payer([pay], {"cents": 2}), store=store).query_sync("pay")
    assert (result.final_output, len(ran)) == ("paid 2", 1)
    assert _journaled(store, ran[0])


def test_a_once_tool_that_pauses_itself_runs_from_its_start_on_the_resume() -> None:
    store, starts = MemoryStore(), []

    @tool(effect="once")
    def pay(cents: int) -> str:
        """Pay after a confirmation of the tool's own."""
        starts.append(cents)
        sure = interrupt("sure?")
        return f"paid {cents}" if sure == "yes" else "not paid"

    runner = Runner(_payer([pay], {"cents": 3}), store=store)
    paused = runner.query_sync("pay")
    assert [i.info for i in paused.interrupts] == ["sure?"]
    done = runner.resume_sync(paused.checkpoint_id, value="yes")
    assert done.final_output == "paid 3"
    assert starts == [3, 3]  # its own pause is not an unknown outcome


def test_parallel_approvals_are_asked_and_answered_one_by_one() -> None:
    store, paid = MemoryStore(), []

    @tool(effect="once", approval=Approval(expires_in=3600))
    def pay(cents: int) -> str:
        """Pay."""
        paid.append(cents)
        return f"paid {cents}"

    runner = Runner(_payer([pay], {"cents": 10}, {"cents": 20}), store=store)
    paused = runner.query_sync("pay")
    first, second = paused.interrupts
    assert [i.info["approval"]["arguments"] for i in paused.interrupts] == [
        {"cents": 10},
        {"cents": 20},
    ]
    answer = {"approved": True, "fingerprint": first.info["approval"]["fingerprint"]}
    again = runner.resume_sync(paused.checkpoint_id, {first.id: answer}, approver="ann")
    [still] = again.interrupts  # the second is asked again, its expiry unchanged
    assert still.info == second.info and still.id != second.id
    inbox = asyncio.run(store.get_session_record("plait.effects/inbox"))
    assert inbox is not None  # it holds the question asked again, in place of both
    assert [i["interrupt_id"] for i in json.loads(inbox.data)["items"]] == [still.id]
    assert paid == [10]
    no = {"approved": False, "fingerprint": still.info["approval"]["fingerprint"]}
    done = runner.resume_sync(again.checkpoint_id, {still.id: no}, approver="ben")
    assert done.final_output == "paid 10 | rejected by ben"
    audit = asyncio.run(runner.approvals.audit())
    assert [(e["decision"], e["approver"]) for e in audit] == [
        ("rejected", "ben"),
        ("approved", "ann"),
    ]
    assert asyncio.run(runner.approvals.pending()) == []


def test_runner_user_and_approver_must_be_user_ids() -> None:
    agent = _payer([], {"cents": 1})
    with pytest.raises(UsageError, match="user"):
        Runner(agent, user="a/b")
    with pytest.raises(UsageError, match="approver"):
        Runner(agent).resume("cp", value=1, approver="")
    with pytest.raises(UsageError):
        asyncio.run(Runner(agent).approvals.allow("", "pay"))


async def test_an_approval_is_not_asked_again_after_a_stop() -> None:
    from plait.stores.conformance_effects import Payments, payment_runner

    payments = Payments()
    runner = payment_runner(MemoryStore(), payments, approval=True)
    paused = await runner.query("pay").collect()
    question = paused.interrupts[0].info["approval"]
    payments.hold = True
    answer = {"approved": True, "fingerprint": question["fingerprint"]}
    stream = runner.resume(paused.checkpoint_id, value=answer, approver="ann")
    collecting = asyncio.ensure_future(stream.collect())
    async with asyncio.timeout(60):
        await payments.started.wait()
    stream.cancel()
    stopped = await collecting
    payments.hold = False
    asked = await runner.resume(stopped.checkpoint_id).collect()
    assert [list(i.info) for i in asked.interrupts] == [["unknown_outcome"]]
    assert len(payments.charges) == 1
    audit = await runner.approvals.audit()
    assert [(e["decision"], e["approver"]) for e in audit] == [("approved", "ann")]


async def test_an_answered_question_leaves_the_inbox_while_its_run_goes_on() -> None:
    from plait.stores.conformance_effects import Payments, payment_runner

    payments = Payments()
    runner = payment_runner(MemoryStore(), payments, approval=True, durability="step")
    paused = await runner.query("pay").collect()
    assert len(await runner.approvals.pending()) == 1
    payments.hold = True
    fingerprint = paused.interrupts[0].info["approval"]["fingerprint"]
    answer = {"approved": True, "fingerprint": fingerprint}
    stream = runner.resume(paused.checkpoint_id, value=answer)
    collecting = asyncio.ensure_future(stream.collect())
    async with asyncio.timeout(60):
        await payments.started.wait()
    # the run saved a step over the paused checkpoint before the charge: pending again,
    # but no longer waiting on the question
    record = await runner.store.get_checkpoint(paused.checkpoint_id)
    assert record is not None and record.status == "pending"
    assert await runner.approvals.pending() == []
    stream.cancel()
    stopped = await collecting
    payments.hold = False
    asked = await runner.resume(stopped.checkpoint_id).collect()
    [question] = await runner.approvals.pending()
    assert (question["kind"], question["interrupt_id"]) == (
        "unknown_outcome",
        asked.interrupts[0].id,
    )
