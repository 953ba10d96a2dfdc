"""Cost of a `once` tool call: its journal in the store, next to a plain (idempotent) call.

The workload is ten ReAct steps, each calling tool `add` (zero-latency scripted model). The
same run is timed with `add` plain (`effect="idempotent"`) and journaled (`effect="once"`),
on each store, with `durability="exit"` (the journal alone: a read of the call's entry, a
compare-and-set write of "started" before the function and one of "finished" after it) and
with `durability="step"` (the journal, plus the model reply saved before each `once` call,
a step checkpoint more per call). The cost of one `once` call is
(run with `once` - run with a plain tool) / 10.

SQLite uses a file in a temporary directory; PostgreSQL the server at `PLAIT_BENCH_POSTGRES`
(default `postgresql://postgres@127.0.0.1:5432/test`), skipped if none answers.

Run: `python bench/once_cost.py [--runs N] [--quick]`; the last line is JSON with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from core import TEXT_50, BenchModel, add
from plait import ChatModelAgent, FunctionTool, Runner
from plait.stores import PostgresStore, SqliteStore, Store

STEPS = 10
PG = os.environ.get("PLAIT_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


async def _median_us(run: Callable[[], Awaitable[object]], runs: int) -> float:
    for _ in range(2):
        await run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await run()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def _runner(store: Store, effect: str, durability: str) -> Runner:
    tool = FunctionTool(add.fn, effect=effect)  # type: ignore[arg-type]
    agent = ChatModelAgent("assistant", BenchModel(STEPS), instruction="You add.", tools=[tool])
    return Runner(agent, store=store, durability=durability)  # type: ignore[arg-type]


async def _turn(runner: Runner) -> None:
    result = await runner.query("Please add some numbers.").collect()
    assert result.final_output == TEXT_50, result.error


async def _store_figures(name: str, store: Store, runs: int) -> dict[str, float]:
    """The run times and the per-call cost of `once` on one store."""
    out: dict[str, float] = {}
    for durability in ("exit", "step"):
        times = {}
        for effect in ("idempotent", "once"):
            runner = _runner(store, effect, durability)
            times[effect] = await _median_us(lambda r=runner: _turn(r), runs)  # type: ignore[misc]
            out[f"{name}_{durability}_{effect}_run_us"] = times[effect]
        out[f"{name}_{durability}_plain_call_us"] = times["idempotent"] / STEPS
        out[f"{name}_{durability}_once_extra_per_call_us"] = (
            times["once"] - times["idempotent"]
        ) / STEPS
    return out


async def main(runs: int) -> dict[str, float]:
    """Measure on SQLite and (when it answers) PostgreSQL; return the figures."""
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        stores: dict[str, Store] = {"sqlite": SqliteStore(Path(tmp) / "plait.db")}
        try:
            pg = PostgresStore(PG, table_prefix=f"bench{uuid.uuid4().hex[:8]}_")
            await pg.get_session("probe")
            stores["postgres"] = pg
        except Exception as exc:
            print(f"postgres skipped: {exc}", file=sys.stderr)
        for name, store in stores.items():
            try:
                figures.update(await _store_figures(name, store, runs))
            finally:
                await store.close()
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs per configuration")
    parser.add_argument("--quick", action="store_true", help="a few runs (tests use this)")
    arguments = parser.parse_args()
    result = asyncio.run(main(3 if arguments.quick else arguments.runs))
    for key, value in result.items():
        print(f"{key:>40}: {value:,.1f}")
    print(json.dumps(result))
