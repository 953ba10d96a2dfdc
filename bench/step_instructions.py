"""The work of one ReAct step, for counting instructions: R runs of a `ChatModelAgent` that
takes K tool-call steps (an async tool, a zero-latency model), after three runs to warm up.

Count with callgrind, and take the difference of K=10 and K=0 over 300 steps:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python bench/step_instructions.py --steps 10 --runs 30
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python bench/step_instructions.py --steps 0 --runs 30

(each prints `Collected : N`; (N10 - N0) / 300 is a step's instructions). Set
PYTHONHASHSEED=0 and count each build three times: single counts vary by up to 3 %.
`--quick` runs it once, tiny, and prints the steps it took as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from typing import Any

from plait import ChatModelAgent, Message, Runner, ToolCall, tool


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class _Model:
    """A model that calls `add` until `steps` results are in, then answers."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    async def generate(self, messages: Sequence[Message], **options: Any) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        if done < self.steps:
            call = ToolCall(id=f"c{done}", name="add", arguments=json.dumps({"a": done, "b": 1}))
            return Message.assistant("", tool_calls=(call,))
        return Message.assistant("done")

    async def stream(self, messages: Sequence[Message], **options: Any) -> Any:
        yield await self.generate(messages, **options)


async def _main(steps: int, runs: int) -> int:
    agent = ChatModelAgent(name="a", model=_Model(steps), instruction="x", tools=[add])
    runner = Runner(agent)
    taken = 0
    for _ in range(3):  # warm up
        async for _ in runner.query("go"):
            pass
    for _ in range(runs):
        async for event in runner.query("go"):
            if event.error is not None:
                raise event.error
            message = event.output.message if event.output is not None else None
            taken += message is not None and message.role == "tool"
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.runs = 2, 1
    taken = asyncio.run(_main(args.steps, args.runs))
    if args.quick:
        print(json.dumps({"steps": taken}))


if __name__ == "__main__":
    main()
