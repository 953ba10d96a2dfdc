"""A stop reaches every workflow the same way: a cancelled `ParallelAgent`, alone or inside
a `SequentialAgent`, ends with `RunCancelled` and a checkpoint that resumes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from plait import ChatModelAgent, ParallelAgent, Runner, SequentialAgent, tool
from plait.core.agent import Agent
from plait.errors import RunCancelled
from plait.stores import MemoryStore
from plait.testing import ScriptedModel, call, reply

pytestmark = pytest.mark.timeout(90)


class Gate:
    """A tool `work(part)` that waits until the gate opens; `started` counts callers."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.started: list[str] = []
        self.both = asyncio.Event()

        @tool
        async def work(part: str) -> str:
            """Do one part of the work.

            Args:
                part: Which part.
            """
            self.started.append(part)
            if len(self.started) >= 2:
                self.both.set()
            await self.open.wait()
            return f"{part} done"

        self.tool = work


def _worker(name: str, gate: Gate) -> ChatModelAgent:
    script = [call("work", {"part": name}), reply(f"{name} finished")]
    return ChatModelAgent(name, ScriptedModel(script, per_run=True), tools=[gate.tool])


def _parallel(gate: Gate) -> ParallelAgent:
    return ParallelAgent("fan", [_worker("left", gate), _worker("right", gate)])


async def _bounded(coro: Any) -> Any:
    async with asyncio.timeout(20):
        return await coro


@pytest.mark.parametrize("nested", [False, True])
async def test_a_cancelled_parallel_run_says_so_and_resumes(nested: bool) -> None:
    gate = Gate()
    root: Agent = _parallel(gate)
    if nested:
        root = SequentialAgent("outer", [root])
    runner = Runner(root, store=MemoryStore())
    stream = runner.query("go")
    consumer = asyncio.create_task(stream.collect())
    await _bounded(gate.both.wait())
    stream.cancel()
    result = await _bounded(consumer)
    assert isinstance(result.error, RunCancelled)
    assert result.final_output is None
    assert result.checkpoint_id is not None
    gate.open.set()
    resumed = await _bounded(runner.resume(result.checkpoint_id).collect())
    assert resumed.error is None
    said = {
        e.message.message.content
        for e in resumed.events
        if e.message is not None and e.message.message is not None
    }
    assert {"left finished", "right finished"} <= said
