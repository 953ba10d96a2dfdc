"""The agents `plait serve` workers serve in the multi-worker tests (each a TARGET of this
file: `served_agents.py:echo` ...), on scripted models.

Their tools tell the test what they do by appending lines to `calls.log` in the directory
named by the environment variable `PLAIT_AP_SCRATCH`: `<tool> <pid>` as each starts. A
`block` call waits until the file `release` exists there (or its run is stopped).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from plait import ChatModelAgent, Message, run_context, tool
from plait.testing import FunctionModel, ScriptedModel, call, reply

SCRATCH = Path(os.environ.get("PLAIT_AP_SCRATCH", "."))


def _note(name: str) -> None:
    """Append `<name> <pid>` to the calls log (one write: lines from two processes do not
    interleave)."""
    with (SCRATCH / "calls.log").open("a") as log:
        log.write(f"{name} {os.getpid()}\n")


@tool
async def work() -> str:
    """Work until the run is asked to stop."""
    ctx = run_context()
    _note("work")
    while not ctx.cancelled:  # noqa: ASYNC110 - a run's cancel is a flag
        await asyncio.sleep(0.01)
    return "stopped"


@tool
def step() -> str:
    """Take the first step (it must run once however the run is carried on)."""
    _note("step")
    return "stepped"


@tool
async def block() -> str:
    """Wait until the test releases the run."""
    ctx = run_context()
    _note("block")
    while not (SCRATCH / "release").exists() and not ctx.cancelled:  # noqa: ASYNC110 - a file
        await asyncio.sleep(0.02)
    return "released"


def _answered(messages: list[Message], name: str) -> bool:
    """Whether a call of tool `name` has its result among `messages`."""
    called = {c.id for m in messages for c in m.tool_calls if c.name == name}
    return any(m.tool_call_id in called for m in messages if m.tool_call_id)


def _stepper_reply(messages: list[Message], tools: object) -> Message:
    """Call `step`, then `block`, then answer: each as the conversation so far needs."""
    if not _answered(messages, "step"):
        return call("step", {})
    if not _answered(messages, "block"):
        return call("block", {})
    return reply("done")


echo = ChatModelAgent(
    "echo", ScriptedModel([lambda m, t: reply(f"echo: {m[-1].content}")], per_run=True)
)
worker = ChatModelAgent(
    "worker", ScriptedModel([call("work", {}), reply("worked")], per_run=True), tools=[work]
)
stepper = ChatModelAgent("stepper", FunctionModel(_stepper_reply), tools=[step, block])
