"""What hooks cost per ReAct step: none, and four no-op runner hooks.

    .venv/bin/python bench/hooks.py

A zero-latency model calls the tool `add` ten times, then answers; the per-step figure is
(ten-step run - one-turn run) / 10, the median of five measurements, in microseconds.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from plait import ChatModelAgent, Hooks, Message, Runner, ToolCall, tool


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


class Scripted:
    """Calls `add` until `steps` tool results are in, then answers."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    async def generate(self, messages: list[Message], **_: Any) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        if done < self.steps:
            call = ToolCall(id=f"c{done}", name="add", arguments='{"a": 1, "b": 2}')
            return Message.assistant(tool_calls=(call,))
        return Message.assistant("done")

    async def stream(self, messages: list[Message], **options: Any) -> Any:
        yield await self.generate(messages, **options)


class Noop(Hooks):
    """Overrides the four per-step seams and changes nothing."""

    async def before_model(self, ctx: Any, request: Any) -> None:
        return None

    async def after_model(self, ctx: Any, request: Any, reply: Any) -> None:
        return None

    async def before_tool(self, ctx: Any, call: Any) -> None:
        return None

    async def after_tool(self, ctx: Any, call: Any, result: Any) -> None:
        return None


async def _per_run(steps: int, runs: int, hooks: list[Hooks]) -> float:
    agent = ChatModelAgent("calc", Scripted(steps), instruction="Add.", tools=[add])
    runner = Runner(agent, hooks=hooks)
    for _ in range(min(runs, 50)):  # warm up
        await runner.query("add").collect()
    started = time.perf_counter()
    for _ in range(runs):
        await runner.query("add").collect()
    return (time.perf_counter() - started) / runs * 1e6


def per_step(hooks: list[Hooks]) -> float:
    """Return the median per-step cost in microseconds over five measurements."""
    figures = []
    for _ in range(5):
        one = asyncio.run(_per_run(0, 1500, hooks))
        ten = asyncio.run(_per_run(10, 300, hooks))
        figures.append((ten - one) / 10)
    return statistics.median(figures)


def main() -> None:
    bare = per_step([])
    hooked = per_step([Noop()])
    print(f"per ReAct step, no hooks:            {bare:6.1f} µs")
    print(f"per ReAct step, four no-op seams:     {hooked:6.1f} µs ({hooked / bare:.2f} times)")


if __name__ == "__main__":
    main()
