"""`UsageHooks`, the ledger's hook of a user without daily budgets: each call's row is kept
with the run (saved with its checkpoints) and the run's rows are written as it pauses or
ends, once each, also when it is resumed by another worker."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import plait
from plait import ChatModelAgent, Runner, tool
from plait.messages import Usage
from plait.server.budget import UsageHooks, ledger_hooks
from plait.server.quotas import Tenants
from plait.stores import MemoryStore
from plait.testing import ScriptedModel, call, reply

USAGE = Usage(input_tokens=10, output_tokens=5)
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
DAY = date(2026, 5, 1)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool
def approve(item: str) -> str:
    """Ask a person to approve an item.

    Args:
        item: What to approve.
    """
    return f"{item}: {plait.interrupt({'approve': item})}"


def _runner(
    store: MemoryStore, tenants: Tenants, *, resumed: bool = False, run_id: str | None = "run-1"
) -> Runner:
    model = ScriptedModel(
        [reply("ok", usage=USAGE)]
        if resumed
        else [
            call("add", {"a": 1, "b": 2}, usage=USAGE),
            call("approve", {"item": "x"}, usage=USAGE),
        ]
    )
    agent = ChatModelAgent("calc", model, tools=[add, approve])
    hook = ledger_hooks(tenants, "ann", "calc", run_id=run_id)
    assert isinstance(hook, UsageHooks)
    return Runner(agent, store=store, hooks=[hook], durability="step")


def _kept_rows(data: bytes) -> dict[str, list[object]]:
    """Return the ledger's rows a checkpoint holds (the run's values)."""
    records = json.loads(data)["records"]
    (values,) = [r["record"]["values"] for r in records if r["address"] == "run"]
    rows: dict[str, list[object]] = values["plait.ledger.rows"]
    return rows


async def test_a_run_given_no_id_keeps_the_one_it_took_for_its_next_legs() -> None:
    """As the A2A routes run: the hook takes the run's checkpoint id as the rows' run id and
    keeps it with the run, so a resume (given no id either) writes under the same run."""
    store = MemoryStore()
    tenants = Tenants(store, {}, lambda: NOW)
    paused = await _runner(store, tenants, run_id=None).query("go", checkpoint_id="cp-1").collect()
    record = await store.get_checkpoint("cp-1")
    assert record is not None
    (values,) = [
        r["record"]["values"] for r in json.loads(record.data)["records"] if r["address"] == "run"
    ]
    assert values["plait.ledger.run_id"] == "cp-1"
    runner = _runner(store, tenants, resumed=True, run_id=None)
    done = await runner.resume(paused.checkpoint_id, value="yes").collect()
    assert done.final_output == "ok"
    rows = await tenants.ledger.rows("ann", DAY, DAY)
    assert [r.run_id for r in rows] == ["cp-1"] * 3


async def test_each_calls_row_is_saved_with_the_runs_checkpoints() -> None:
    store = MemoryStore()
    tenants = Tenants(store, {}, lambda: NOW)
    paused = await _runner(store, tenants).query("go", checkpoint_id="cp-1").collect()
    assert paused.interrupts
    record = await store.get_checkpoint("cp-1")
    assert record is not None
    row = [NOW.isoformat(), "calc", "ScriptedModel", 10, 5, 0.0, False]
    assert _kept_rows(record.data) == {"1:agent:calc": row, "2:agent:calc": row}
    # the pause wrote them: the ledger has both
    assert len(await tenants.ledger.rows("ann", DAY, DAY)) == 2


async def test_a_run_resumed_by_another_worker_writes_each_row_once() -> None:
    store = MemoryStore()
    first = Tenants(store, {}, lambda: NOW)
    paused = await _runner(store, first).query("go", checkpoint_id="cp-1").collect()
    for key in [k for k in store._sessions if "/q/r/" in k]:  # the pause's write was lost
        del store._sessions[key]
    other = Tenants(store, {}, lambda: NOW)  # another worker on the same store
    done = (
        await _runner(store, other, resumed=True)
        .resume(paused.checkpoint_id, value="yes")
        .collect()
    )
    assert done.final_output == "ok"
    rows = await other.ledger.rows("ann", DAY, DAY)
    assert [(r.run_id, r.agent, r.input_tokens, r.output_tokens) for r in rows] == [
        ("run-1", "calc", 10, 5)
    ] * 3
