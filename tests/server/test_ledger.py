"""The ledger's documents: changes of one document from many tasks and two store clients
are all kept, a call recorded twice is one row counted once, and the budgets decide as the
ledger's docstring says."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from plait.errors import UsageError
from plait.server.ledger import Budgets, Ledger, Row
from plait.server.shared_docs import change_document, create_document, read_document
from plait.stores import SqliteStore

NOON = datetime(2026, 5, 1, 12, tzinfo=UTC)


def _row(tokens: int = 10, run_id: str = "run-1") -> Row:
    return Row(
        user="ann",
        agent="helper",
        model="FunctionModel",
        input_tokens=tokens,
        output_tokens=5,
        cost=0.0,
        priced=False,
        run_id=run_id,
        time=NOON,
    )


async def test_many_changes_at_once_from_two_clients_are_all_kept(tmp_path: Path) -> None:
    one, two = SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")

    def add(doc: dict[str, int]) -> int:
        doc["n"] = doc.get("n", 0) + 1
        return doc["n"]

    seen = await asyncio.gather(
        *(change_document(one if i % 2 else two, "k", add) for i in range(60))
    )
    assert sorted(seen) == list(range(1, 61))
    assert await read_document(one, "k") == {"n": 60}

    def broken(doc: dict[str, int]) -> None:
        doc["n"] = -1
        raise UsageError("no")

    results = await asyncio.gather(
        change_document(one, "k", add),
        change_document(one, "k", broken),
        change_document(one, "k", add),
        return_exceptions=True,
    )
    assert results[0] == 61 and isinstance(results[1], UsageError) and results[2] == 62
    assert await read_document(two, "k") == {"n": 62}  # the broken edit left no trace
    await one.close()
    await two.close()


async def test_a_document_is_created_once_and_a_second_create_changes_nothing(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "docs.db")
    assert await create_document(store, "k", {"n": 1})
    assert not await create_document(store, "k", {"n": 2})
    assert await read_document(store, "k") == {"n": 1}
    await store.close()


async def test_a_runs_rows_written_twice_keep_the_first_and_add_the_new(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "ledger.db")
    ledger = Ledger(store)
    row = ["2026-05-01T12:00:00+00:00", "helper", "FunctionModel", 10, 5, 0.0, False]
    await ledger.add_rows("ann", "run-1", {"1:a": row})  # the run's document is made
    again = [*row[:3], 99, *row[4:]]  # the same call, sent again on a resume, is kept as it was
    await ledger.add_rows("ann", "run-1", {"1:a": again, "2:a": row})
    found = await ledger.rows("ann", NOON.date(), NOON.date())
    assert sorted(r.input_tokens for r in found) == [10, 10]
    await store.close()


async def test_a_call_recorded_twice_is_one_row_counted_once(tmp_path: Path) -> None:
    ledger = Ledger(SqliteStore(tmp_path / "s.db"))
    budgets = Budgets(model_calls_per_day=5)
    decided = await ledger.reserve("ann", "run-1", budgets, 4, NOON)
    assert decided.go and decided.hold is not None
    assert await ledger.settle("1:agent:helper", _row(), decided.hold)
    assert not await ledger.settle("1:agent:helper", _row(), None)  # a replay of that call
    assert [r.input_tokens for r in await ledger.rows("ann", NOON.date(), NOON.date())] == [10]
    day = await read_document(ledger.store, "ann/q/d/2026-05-01")
    assert day["totals"]["calls"] == 1 and day["holds"] == {}
    assert await ledger.users() == ["ann"]


@pytest.mark.parametrize(
    ("budgets", "expected"),
    [
        (Budgets(tokens_per_day=100), "go"),  # the first call of the day goes alone
        (Budgets(tokens_per_day=30), "go"),  # 15 spent, a call of 15 fits exactly
        (Budgets(tokens_per_day=29), "tokens_per_day"),  # it would pass it: refused
        (Budgets(model_calls_per_day=1), "model_calls_per_day"),
    ],
)
async def test_a_call_goes_only_when_it_fits(
    tmp_path: Path, budgets: Budgets, expected: str
) -> None:
    ledger = Ledger(SqliteStore(tmp_path / "s.db"))
    if expected != "go" or budgets.tokens_per_day != 100:
        await ledger.settle("1:a", _row(), None)  # one call of 15 tokens spent today
    decided = await ledger.reserve("ann", "run-1", budgets, 1, NOON)
    assert (decided.refused[0] if decided.refused else "go") == expected


async def test_a_call_waits_while_calls_in_flight_hold_the_room_it_needs(tmp_path: Path) -> None:
    ledger = Ledger(SqliteStore(tmp_path / "s.db"))
    await ledger.settle("1:a", _row(), None)  # 15 spent: the size of a call is known
    budgets = Budgets(tokens_per_day=40)
    first = await ledger.reserve("ann", "run-1", budgets, 1, NOON)  # 15 + 15 <= 40
    assert first.go and first.hold is not None
    second = await ledger.reserve("ann", "run-2", budgets, 1, NOON)  # 15 + 15 + 15 > 40
    assert not second.go and second.refused is None  # waits: the call in flight may fail
    await ledger.release("ann", first.hold)
    third = await ledger.reserve("ann", "run-2", budgets, 1, NOON)
    assert third.go
