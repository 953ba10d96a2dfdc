"""Framework overhead of plait's core runtime with a zero-latency model.

Workloads (the same as the side-by-side comparison in `bench/peers.sh`):
  W1  one turn: one model call answering with 50 words.
  W2  ten ReAct steps (tool `add`), then the answer; per step = (W2 - W1) / 10.
  W3  1,000 concurrent runs of 3 steps under one asyncio.gather (runs/s, peak RSS).
  W4  a chain of 5 agents, each transferring to the next; the last answers (5 model calls),
      with transfer (sub-agents) and as a swarm team.
  W5  one answer streamed as 200 chunks, read chunk by chunk (chunks/s).
Plus `import plait` time in a fresh interpreter (minus the interpreter's own start-up), and the
time to import what a first program uses (`from plait import ChatModelAgent, Runner, tool`).

Run: `python bench/core.py` (add `--quick` for a smoke run). Prints one line per figure and a
final JSON line. Uses only plait's public API.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from plait import ChatModelAgent, Message, Runner, Team, ToolCall, ToolInfo, set_sub_agents, tool

TEXT_50 = " ".join(f"word{i}" for i in range(50))
TOKENS = [("" if i == 0 else " ") + f"tok{i}" for i in range(200)]


class BenchModel:
    """Answers as a pure function of the history, so one instance serves concurrent runs."""

    def __init__(self, steps: int = 0, *, stream_tokens: bool = False) -> None:
        self.steps = steps
        self.stream_tokens = stream_tokens

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        if done < self.steps:
            args = f'{{"a":{done},"b":1}}'
            return Message.assistant("", (ToolCall(id=f"call_{done}", name="add", arguments=args),))
        return Message.assistant(TEXT_50)

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        if self.stream_tokens:
            for token in TOKENS:
                yield Message.assistant(token)
            return
        yield await self.generate(messages, tools=tools)


class HandoffModel:
    """Transfers to `target`, or answers when there is none."""

    def __init__(self, target: str | None) -> None:
        self.target = target

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        if self.target is None:
            return Message.assistant(TEXT_50)
        args = f'{{"agent_name":"{self.target}"}}'
        return Message.assistant("", (ToolCall(id="t", name="transfer_to_agent", arguments=args),))

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        yield await self.generate(messages, tools=tools)


def _chain(n: int = 5, *, swarm: bool = False) -> Runner:
    names = [f"agent_{i}" for i in range(1, n + 1)]
    agents = [
        ChatModelAgent(name, HandoffModel(names[i + 1] if i + 1 < n else None), description=name)
        for i, name in enumerate(names)
    ]
    if swarm:
        return Runner(Team.swarm(names[0], agents, name="chain", cross_request=False))
    for parent, child in itertools.pairwise(agents):
        set_sub_agents(parent, [child])
    return Runner(agents[0])


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def _runner(steps: int, *, streaming: bool = False) -> Runner:
    model = BenchModel(steps, stream_tokens=streaming)
    agent = ChatModelAgent("assistant", model, instruction="You are helpful.", tools=[add])
    return Runner(agent, enable_streaming=streaming)


async def _turn(runner: Runner) -> str | None:
    text = None
    async for event in runner.query("Please add some numbers."):
        if event.error is not None:
            raise event.error
        if event.message is not None:
            message = await event.message.get_message()
            if message.role == "assistant" and message.content:
                text = message.content
    return text


async def _stream_turn(runner: Runner) -> int:
    n = 0
    async for event in runner.query("Stream please."):
        if event.message is not None and event.message.stream is not None:
            async for _ in event.message.stream:
                n += 1
    return n


async def _time(fn: Callable[[], Awaitable[object]], runs: int) -> float:
    for _ in range(min(runs, 20)):
        await fn()
    gc.collect()
    start = time.perf_counter()
    for _ in range(runs):
        await fn()
    return (time.perf_counter() - start) / runs * 1e6


async def _concurrent(runner: Runner, n: int) -> float:
    start = time.perf_counter()
    results = await asyncio.gather(*(_turn(runner) for _ in range(n)))
    assert all(r == TEXT_50 for r in results)
    return n / (time.perf_counter() - start)


def _import_ms(code: str) -> float:
    def once(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start

    bare = statistics.median(once("pass") for _ in range(5))
    full = statistics.median(once(code) for _ in range(5))
    return (full - bare) * 1e3


async def main(quick: bool) -> dict[str, float]:
    """Measure every workload; return the figures."""
    scale = 0.02 if quick else 1.0
    w1 = _runner(0)
    assert await _turn(w1) == TEXT_50
    w2 = _runner(10)
    w4 = _chain()
    assert await _turn(w4) == TEXT_50
    w4_swarm = _chain(swarm=True)
    assert await _turn(w4_swarm) == TEXT_50
    w5 = _runner(0, streaming=True)
    assert await _stream_turn(w5) == 200
    reps = 1 if quick else 3
    figures: dict[str, list[float]] = {
        "w1_us": [],
        "w2_us": [],
        "w4_us": [],
        "w4_swarm_us": [],
        "w5_us": [],
        "w3_runs_per_s": [],
    }
    for _ in range(reps):
        figures["w1_us"].append(await _time(lambda: _turn(w1), int(5000 * scale) or 5))
        figures["w2_us"].append(await _time(lambda: _turn(w2), int(1000 * scale) or 5))
        figures["w4_us"].append(await _time(lambda: _turn(w4), int(2000 * scale) or 5))
        figures["w4_swarm_us"].append(await _time(lambda: _turn(w4_swarm), int(2000 * scale) or 5))
        figures["w5_us"].append(await _time(lambda: _stream_turn(w5), int(1000 * scale) or 5))
        figures["w3_runs_per_s"].append(await _concurrent(_runner(3), int(1000 * scale) or 10))
    out = {k: statistics.median(v) for k, v in figures.items()}
    out["step_us"] = (out["w2_us"] - out["w1_us"]) / 10
    out["w5_chunks_per_s"] = 200 / out["w5_us"] * 1e6
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["import_ms"] = _import_ms("import plait")
    out["import_core_ms"] = _import_ms("from plait import ChatModelAgent, Runner, tool")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs only (smoke test)")
    figures = asyncio.run(main(parser.parse_args().quick))
    for name, value in figures.items():
        print(f"{name:>16}: {value:,.1f}")
    print(json.dumps(figures))
