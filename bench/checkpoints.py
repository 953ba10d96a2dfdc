"""Cost of durable steps: plait's per-step checkpoints next to LangGraph's savers.

Both run the same ten-step ReAct workload (tool `add`, zero-latency scripted model). The
per-step cost of durability is (run with checkpoints - run without) / 10:

- plait: `Runner(store=..., durability="step")`, which writes a checkpoint after every step
  and continues from it, against `durability="exit"` (no checkpoint unless the run pauses);
- LangGraph: `create_react_agent(..., checkpointer=AsyncSqliteSaver | AsyncPostgresSaver)`
  against no checkpointer (it writes after every super-step).

SQLite uses a file in a temporary directory; PostgreSQL the server at `PLAIT_BENCH_POSTGRES`
(default `postgresql://postgres@127.0.0.1:5432/test`), skipped if none answers, with its
default (step checkpoints committed without waiting for the disk) and with
`flush_steps=True` (`plait_postgres_flushed_per_step_us`: every step waits for the disk, as
LangGraph's saver does). LangGraph is
measured when `langgraph`, `langgraph-checkpoint-sqlite` and `langgraph-checkpoint-postgres`
are installed (see `bench/README.md`); its scripted model comes from the comparison harness
(`PEERS`, default `../shared/bench/peers`).

The configurations take turns, in blocks of five timed turns after an untimed one, until
each has run `--runs` timed turns: a busy stretch of the machine falls on all of them alike,
and each block runs with the caches as its own turns leave them. Each figure is a median of
its turns.

`plait_memory_per_step_us` is the same on `MemoryStore`: what a step's save costs plait's
own code (the checkpoint and its history entry encoded, the write a dictionary's).

The floor under plait's PostgreSQL and SQLite steps: the writes a durable run makes (its ten
step saves and the mark that retires its checkpoint when it completes, each one statement),
captured from one run and replayed back to back with nothing else running:

- through the store itself (`plait_<store>_writes_alone_per_step_us`: the store's
  `put_checkpoints`, new ids each turn);
- for PostgreSQL also with psycopg alone, one connection and the same rows in one upsert
  statement of a table of the same shape (`postgres_bare_statement_per_step_us`).

Each is a turn's writes / 10, so `<store>_floor_ratio` (the writes alone against LangGraph's
whole step) is the least `<store>_ratio` can be while every step's write is awaited.

Run: `python bench/checkpoints.py [--runs N | --quick]`; the last line is JSON with every
figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from core import TEXT_50, BenchModel, add
from plait import ChatModelAgent, Runner
from plait.stores import MemoryStore, PostgresStore, SqliteStore, Store

STEPS = 10
PG = os.environ.get("PLAIT_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
PEERS = Path(
    os.environ.get("PEERS", Path(__file__).resolve().parent.parent.parent / "shared/bench/peers")
)


Turn = Callable[[], Awaitable[object]]


#: Timed turns a configuration runs in a row, after one untimed turn.
BLOCK = 5


async def _medians_us(turns: dict[str, Turn], runs: int) -> dict[str, float]:
    """Time `runs` turns of every configuration, in blocks of `BLOCK` taken in turn (so that
    a busy stretch of the machine falls on all of them alike, while a block runs with the
    caches as its own turns left them); return the median of each, in µs."""
    for turn in turns.values():
        for _ in range(2):
            await turn()
    times: dict[str, list[float]] = {name: [] for name in turns}
    while any(len(values) < runs for values in times.values()):
        for name, turn in turns.items():
            await turn()  # after another configuration's turns: not timed
            for _ in range(min(BLOCK, runs - len(times[name]))):
                start = time.perf_counter()
                await turn()
                times[name].append((time.perf_counter() - start) * 1e6)
    return {name: statistics.median(values) for name, values in times.items()}


def _plait_runner(store: Store | None, durability: str) -> Runner:
    agent = ChatModelAgent(
        "assistant", BenchModel(STEPS), instruction="You are helpful.", tools=[add]
    )
    return Runner(agent, store=store, durability=durability)  # type: ignore[arg-type]


async def _plait_turn(runner: Runner) -> None:
    result = await runner.query("Please add some numbers.").collect()
    assert result.final_output == TEXT_50, result.error


async def plait_turns(tmp: Path, stack: contextlib.AsyncExitStack) -> dict[str, Turn]:
    """plait's turns: without checkpoints, and with one after every step on each store."""
    stores: dict[str, SqliteStore | PostgresStore] = {"sqlite": SqliteStore(tmp / "plait.db")}
    try:
        for name, flush in (("postgres", False), ("postgres_flushed", True)):
            prefix = f"bench{uuid.uuid4().hex[:8]}_"
            pg = PostgresStore(PG, table_prefix=prefix, flush_steps=flush)
            await pg.get_session("probe")
            stores[name] = pg
    except Exception as exc:
        print(f"postgres skipped: {exc}", file=sys.stderr)
    turns: dict[str, Turn] = {}
    plain = _plait_runner(None, "exit")
    turns["plait_no_checkpoint"] = lambda: _plait_turn(plain)
    # in memory: what a step's save costs plait itself, with a write that is a dict's
    memory = _plait_runner(MemoryStore(), "step")
    turns["plait_memory"] = lambda: _plait_turn(memory)
    run_id, batches = await recorded_writes()
    for name, store in stores.items():
        stack.push_async_callback(store.close)
        durable = _plait_runner(store, "step")
        turns[f"plait_{name}"] = lambda r=durable: _plait_turn(r)  # type: ignore[misc]
        if name in ("sqlite", "postgres"):
            turns[f"plait_{name}_writes_alone"] = _replayed(store, run_id, batches)
    if "postgres" in stores:
        turns["postgres_bare"] = await _bare_turn(stack, run_id, batches)
    return turns


#: One checkpoint of a `put_checkpoints` call: its id, its data, its status.
Write = tuple[str, bytes, Any]
#: One `put_checkpoints` call of a run: its writes, its `ttl` and its `flush`.
Batch = tuple[list[Write], float | None, bool]


class _Recorder(MemoryStore):
    """A memory store that keeps every batch of checkpoints written to it, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[Batch] = []

    async def put_checkpoints(
        self, writes: Any, *, ttl: float | None = None, flush: bool = True
    ) -> list[int]:
        self.batches.append(([(i, bytes(d), s) for i, d, s in writes], ttl, flush))
        return await super().put_checkpoints(writes, ttl=ttl, flush=flush)


async def recorded_writes() -> tuple[str, list[Batch]]:
    """Return the id of a durable run and the batches of checkpoints it wrote (its second
    turn's, as every later turn writes them)."""
    recorder = _Recorder()
    runner = _plait_runner(recorder, "step")
    await _plait_turn(runner)
    recorder.batches.clear()
    await _plait_turn(runner)
    batches = recorder.batches
    assert len(batches) == STEPS + 1, len(batches)  # a write a step, and the retiring mark
    return batches[0][0][0][0], batches


def _replayed(store: SqliteStore | PostgresStore, run_id: str, batches: list[Batch]) -> Turn:
    """A turn that makes a run's writes through `store` alone, under a new run id."""

    async def turn() -> None:
        new = uuid.uuid4().hex
        for writes, ttl, flush in batches:
            renamed = [(i.replace(run_id, new, 1), data, s) for i, data, s in writes]
            await store.put_checkpoints(renamed, ttl=ttl, flush=flush)

    return turn


async def _bare_turn(stack: contextlib.AsyncExitStack, run_id: str, batches: list[Batch]) -> Turn:
    """A turn that makes a run's writes with psycopg alone: one upsert statement a batch
    (the same bytes under two ids sent once), into a table of the store's shape."""
    import psycopg

    conn = await psycopg.AsyncConnection.connect(PG, autocommit=True)
    stack.push_async_callback(conn.close)
    table = f"bench{uuid.uuid4().hex[:8]}_bare"
    await conn.execute(
        f"CREATE TABLE {table} (id TEXT PRIMARY KEY, data BYTEA NOT NULL,"
        " version BIGINT NOT NULL, status TEXT NOT NULL, expires_at TIMESTAMPTZ)"
    )
    stack.push_async_callback(conn.execute, f"DROP TABLE {table}")
    with contextlib.suppress(psycopg.Error):  # before PostgreSQL 14: its default
        await conn.execute(f"ALTER TABLE {table} ALTER COLUMN data SET COMPRESSION lz4")
    statements = [_bare_statement(table, writes, flush) for writes, _, flush in batches]

    async def turn() -> None:
        new = uuid.uuid4().hex
        for sql, params in statements:
            named = {k: v.replace(run_id, new, 1) if k[0] == "i" else v for k, v in params.items()}
            cursor = await conn.execute(sql, named)
            await cursor.fetchall()

    return turn


def _bare_statement(table: str, writes: list[Write], flush: bool) -> tuple[str, dict[str, Any]]:
    """Return one upsert of `writes` and its parameters (equal data sent once); without
    `flush`, its commit does not wait for the disk."""
    params: dict[str, Any] = {}
    slots: dict[bytes, str] = {}  # each distinct data, the name of its parameter
    rows = []
    for n, (checkpoint_id, data, status) in enumerate(writes):
        slot = slots.setdefault(data, f"d{len(slots)}")
        params[f"i{n}"], params[f"s{n}"], params[slot] = checkpoint_id, status, data
        rows.append(f"(%(i{n})s, %({slot})b, %(s{n})s)")
    start, join = "", ""
    if not flush:
        start = "WITH a AS (SELECT set_config('synchronous_commit', 'off', true))"
        join = "CROSS JOIN a"
    sql = f"""{start}
        INSERT INTO {table} AS c (id, data, version, status)
        SELECT w.id, w.data, 1, w.status FROM (VALUES {", ".join(rows)}) AS w (id, data, status)
        {join}
        ON CONFLICT (id) DO UPDATE SET
            data = EXCLUDED.data, version = c.version + 1, status = EXCLUDED.status
        RETURNING id, version"""
    return sql, params


async def langgraph_turns(tmp: Path, stack: contextlib.AsyncExitStack) -> dict[str, Turn]:
    """LangGraph's turns: without a checkpointer, and with its async SQLite and Postgres
    savers."""
    try:
        sys.path.insert(0, str(PEERS))
        sys.path.insert(0, str(PEERS / "adapters"))
        from common import TEXT_50 as HARNESS_TEXT
        from langchain_core.tools import tool as lc_tool
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        from langgraph.prebuilt import create_react_agent
        from langgraph_adapter import ScriptedChatModel  # the harness's model
    except ImportError as exc:
        print(f"langgraph skipped: {exc}", file=sys.stderr)
        return {}

    @lc_tool
    async def add(a: int, b: int) -> int:
        """Add two integers and return the sum."""
        return a + b

    def graph(checkpointer: Any) -> Any:
        model = ScriptedChatModel(mode="react", steps=STEPS)
        return create_react_agent(
            model, [add], prompt="You are helpful.", checkpointer=checkpointer
        )

    async def turn(app: Any) -> None:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        out = await app.ainvoke({"messages": [("user", "Please add some numbers.")]}, config)
        assert out["messages"][-1].content == HARNESS_TEXT

    turns: dict[str, Turn] = {}
    base_app = graph(None)
    turns["langgraph_no_checkpoint"] = lambda: turn(base_app)
    sqlite_saver = await stack.enter_async_context(
        AsyncSqliteSaver.from_conn_string(str(tmp / "lg.db"))
    )
    sqlite_app = graph(sqlite_saver)
    turns["langgraph_sqlite"] = lambda: turn(sqlite_app)
    try:
        pg_saver = await stack.enter_async_context(AsyncPostgresSaver.from_conn_string(PG))
        await pg_saver.setup()
    except Exception as exc:
        print(f"langgraph postgres skipped: {exc}", file=sys.stderr)
    else:
        pg_app = graph(pg_saver)
        turns["langgraph_postgres"] = lambda: turn(pg_app)
    return turns


async def main(runs: int) -> dict[str, float]:
    """Measure everything available, interleaved; return the figures."""
    with tempfile.TemporaryDirectory() as tmp:
        async with contextlib.AsyncExitStack() as stack:
            turns = await plait_turns(Path(tmp), stack)
            turns.update(await langgraph_turns(Path(tmp), stack))
            medians = await _medians_us(turns, runs)
    figures: dict[str, float] = {}
    for framework in ("plait", "langgraph"):
        base = medians.get(f"{framework}_no_checkpoint")
        if base is None:
            continue
        figures[f"{framework}_no_checkpoint_us"] = base
        for store in ("memory", "sqlite", "postgres", "postgres_flushed"):
            total = medians.get(f"{framework}_{store}")
            if total is not None:
                figures[f"{framework}_{store}_per_step_us"] = (total - base) / STEPS
    for name in ("plait_sqlite_writes_alone", "plait_postgres_writes_alone", "postgres_bare"):
        if name in medians:  # a turn's writes, with no run around them
            key = "postgres_bare_statement" if name == "postgres_bare" else name
            figures[f"{key}_per_step_us"] = medians[name] / STEPS
    for store in ("sqlite", "postgres"):
        theirs = figures.get(f"langgraph_{store}_per_step_us")
        for ours, ratio in (
            (f"plait_{store}_per_step_us", f"{store}_ratio"),
            (f"plait_{store}_writes_alone_per_step_us", f"{store}_floor_ratio"),
            (f"{store}_bare_statement_per_step_us", f"{store}_bare_floor_ratio"),
        ):
            if figures.get(ours) is not None and theirs:
                figures[ratio] = figures[ours] / theirs
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs per configuration")
    parser.add_argument("--quick", action="store_true", help="2 timed runs (a smoke test)")
    args = parser.parse_args()
    result = asyncio.run(main(2 if args.quick else args.runs))
    for key, value in result.items():
        print(f"{key:>34}: {value:,.2f}")
    print(json.dumps(result))
