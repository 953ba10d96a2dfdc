"""plait under load and faults: concurrent pauses and resumes, memory over many runs, and the
time a store fault takes to become a `StoreError`.

Workloads:
  load    N runs that each pause on `interrupt()` in a tool, all at once (one asyncio.gather),
          then N concurrent resumes, on memory, SQLite, PostgreSQL and Redis: seconds for each
          phase, operations per second, and how many runs ended in an error (goal: 0).
  memory  10,000 runs that pause and are resumed, on one Runner and MemoryStore with a 1 s
          checkpoint TTL: resident memory after 1,000 runs and after 10,000 (goal: flat).
  faults  a server that accepts TCP and never answers (PostgreSQL and Redis), and a port where
          nothing listens: seconds until the run's error is a `StoreError`, with the stores'
          default timeouts.

Run: `python bench/reliability.py` (`--quick` for a smoke run; `--n 2000` to choose N).
PostgreSQL and Redis are read from PLAIT_TEST_POSTGRES_DSN / PLAIT_TEST_REDIS_URL (defaults:
the local servers); a store whose server does not answer is reported as skipped. Prints one
line per figure and a final JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from plait import ChatModelAgent, Message, Runner, ToolCall, ToolInfo, interrupt, tool
from plait.errors import StoreError
from plait.stores import MemoryStore, SqliteStore, Store

PG_DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("PLAIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


class PauseModel:
    """Calls `approve` once, then answers: a pure function of the history, so one instance
    serves any number of concurrent runs."""

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        if any(m.role == "tool" for m in messages):
            return Message.assistant("done")
        call = ToolCall(id="c1", name="approve", arguments="{}")
        return Message.assistant("", tool_calls=[call])

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        yield await self.generate(messages, tools=tools)


@tool
def approve() -> str:
    """Ask a person."""
    return f"approved: {interrupt('ok?')}"


def _runner(store: Store, *, checkpoint_ttl: float | None = None) -> Runner:
    agent = ChatModelAgent("A", PauseModel(), tools=[approve])
    return Runner(agent, store=store, checkpoint_ttl=checkpoint_ttl)


async def _load(store: Store, n: int) -> dict[str, float]:
    """Pause n runs at once, then resume them all at once."""
    runner = _runner(store)
    start = time.perf_counter()
    paused = await asyncio.gather(*(runner.query("q").collect() for _ in range(n)))
    pause_s = time.perf_counter() - start
    ids = [r.checkpoint_id for r in paused if r.error is None and r.checkpoint_id]
    start = time.perf_counter()
    resumed = await asyncio.gather(
        *(runner.resume(cid, value="yes").collect() for cid in ids), return_exceptions=True
    )
    resume_s = time.perf_counter() - start
    done = sum(1 for r in resumed if not isinstance(r, BaseException) and r.final_output == "done")
    return {
        "pause_s": round(pause_s, 3),
        "resume_s": round(resume_s, 3),
        "ops_per_s": round(2 * n / (pause_s + resume_s)),
        "errors": n - done,
    }


async def _reachable(make: Callable[[], Store]) -> Store | None:
    store = make()
    try:
        await asyncio.wait_for(store.get_session("probe"), 5)
    except Exception:
        await _close_quietly(store)
        return None
    return store


async def _close_quietly(store: Store) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(store.close(), 5)


def _stores(tmp: Path) -> dict[str, Callable[[], Store]]:
    tag = uuid.uuid4().hex[:10]

    def postgres() -> Store:
        from plait.stores import PostgresStore

        return PostgresStore(PG_DSN, table_prefix=f"bench{tag}_")

    def redis() -> Store:
        from plait.stores import RedisStore

        return RedisStore(REDIS_URL, prefix=f"bench{tag}:")

    return {
        "memory": MemoryStore,
        "sqlite": lambda: SqliteStore(tmp / "bench.db"),
        "postgres": postgres,
        "redis": redis,
    }


async def load(n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in _stores(Path(tmp)).items():
            store = await _reachable(make)
            if store is None:
                print(f"load {name:8s} skipped: no server answers")
                out[name] = "skipped"
                continue
            figures = await _load(store, n)
            await _close_quietly(store)
            out[name] = figures
            print(
                f"load {name:8s} {n} pauses {figures['pause_s']:.2f} s, {n} resumes "
                f"{figures['resume_s']:.2f} s, {figures['ops_per_s']} ops/s, "
                f"errors {figures['errors']}"
            )
    return out


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


async def memory(runs: int) -> dict[str, float]:
    store = MemoryStore()
    runner = _runner(store, checkpoint_ttl=1.0)  # finished runs' records expire, as in service
    marks: dict[int, float] = {}
    checkpoint = max(1, runs // 10)
    for i in range(1, runs + 1):
        paused = await runner.query("q").collect()
        await runner.resume(paused.checkpoint_id or "", value="yes").collect()
        if i in (checkpoint, runs):
            gc.collect()
            marks[i] = _rss_mb()
    first, last = marks[checkpoint], marks[runs]
    print(
        f"memory   RSS after {checkpoint} runs {first:.1f} MB, after {runs} runs {last:.1f} MB "
        f"(+{last - first:.1f} MB; {len(store)} records held)"
    )
    return {
        "runs": runs,
        "rss_first_mb": round(first, 1),
        "rss_last_mb": round(last, 1),
        "records_held": len(store),
    }


async def _blackhole() -> tuple[asyncio.Server, int]:
    """A server that accepts connections and never answers."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def _time_to_error(store: Store) -> float | str:
    runner = _runner(store)
    start = time.perf_counter()
    try:
        result = await asyncio.wait_for(runner.query("q").collect(), 120)
    except TimeoutError:
        return "no error in 120 s"
    finally:
        await _close_quietly(store)
    if not isinstance(result.error, StoreError):
        return f"ended with {result.error!r}"
    return round(time.perf_counter() - start, 3)


async def faults() -> dict[str, Any]:
    from plait.stores import PostgresStore, RedisStore

    server, port = await _blackhole()
    closed = _free_port()
    cases: dict[str, Callable[[], Store]] = {
        "postgres blackhole": lambda: PostgresStore(f"postgresql://postgres@127.0.0.1:{port}/t"),
        "redis blackhole": lambda: RedisStore(f"redis://127.0.0.1:{port}/0"),
        "postgres refused": lambda: PostgresStore(f"postgresql://postgres@127.0.0.1:{closed}/t"),
        "redis refused": lambda: RedisStore(f"redis://127.0.0.1:{closed}/0"),
    }
    out: dict[str, Any] = {}
    async with server:
        for name, make in cases.items():
            out[name] = await _time_to_error(make())
            took = out[name]
            shown = f"StoreError after {took} s" if isinstance(took, float) else took
            print(f"fault {name:20s} -> {shown}")
    return out


async def main(n: int, runs: int) -> dict[str, Any]:
    return {"load": await load(n), "memory": await memory(runs), "faults": await faults()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--n", type=int, default=2000, help="concurrent runs in the load test")
    args = parser.parse_args()
    n, runs = (50, 200) if args.quick else (args.n, 10_000)
    figures = asyncio.run(main(n, runs))
    print(json.dumps(figures))
    sys.exit(0)
