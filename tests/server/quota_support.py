"""What the quota tests share: a clock they move, agents whose calls cost what they say."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from plait import ChatModelAgent, Message, Usage, tool
from plait.core.agent import Agent
from plait.testing import FunctionModel, call, reply
from plait.tools.base import ToolInfo
from tests.server.support import WAIT

#: Every call of the test models: 10 tokens in, 5 out.
CALL_USAGE = Usage(input_tokens=10, output_tokens=5)
#: What a call of the priced model costs, in US dollars.
CALL_COST = 0.01
#: Tool calls the stepping agents make before they answer.
STEPS = 3


class Clock:
    """A clock the tests move by hand (what `create_app(clock=...)` reads)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.now

    def advance(self, **delta: float) -> None:
        """Move the clock forward."""
        with self._lock:
            self.now += timedelta(**delta)

    def next_day(self) -> None:
        """Move the clock to the start of the next UTC day."""
        with self._lock:
            day = self.now.astimezone(UTC).date() + timedelta(days=1)
            self.now = datetime(day.year, day.month, day.day, 0, 0, 1, tzinfo=UTC)


@dataclass
class Gate:
    """Holds the `blocker` agent's runs in their tool until opened."""

    entered: threading.Event = field(default_factory=threading.Event)
    opened: threading.Event = field(default_factory=threading.Event)


class PricedModel(FunctionModel):
    """A test model that prices itself: every call costs `CALL_COST`."""

    def price(self, usage: Usage) -> float:
        return CALL_COST


def _stepping(messages: Sequence[Message], tools: Sequence[ToolInfo]) -> Message:
    """Call the `step` tool until it ran `STEPS` times, then answer."""
    done = sum(1 for m in messages if m.role == "tool")
    if done < STEPS:
        return call("step", {"n": done + 1}, usage=CALL_USAGE)
    return reply("finished", usage=CALL_USAGE)


def make_quota_agents(steps: list[int], gate: Gate | None = None) -> dict[str, Agent]:
    """Return the agents of the quota tests: `stepper` (4 calls of 15 tokens, 3 tool
    calls, each recorded in `steps`) and `priced` (the same on a model that prices itself),
    `echo` (one call) and `blocker` (waits in a tool until `gate` opens)."""
    gate = gate or Gate()

    @tool
    def wait() -> str:
        """Wait until the test lets the run go on."""
        gate.entered.set()
        gate.opened.wait(WAIT)
        return "let go"

    def waiting(messages: Sequence[Message], tools: Sequence[ToolInfo]) -> Message:
        if messages[-1].role == "tool":
            return reply("done", usage=CALL_USAGE)
        return call("wait", usage=CALL_USAGE)

    @tool
    def step(n: int) -> str:
        """Do one step of the work.

        Args:
            n: The step's number.
        """
        steps.append(n)
        return f"step {n} done"

    def echo(messages: Sequence[Message], tools: Sequence[ToolInfo]) -> Message:
        return reply("hi", usage=CALL_USAGE)

    return {
        "stepper": ChatModelAgent("stepper", FunctionModel(_stepping), tools=[step]),
        "priced": ChatModelAgent("priced", PricedModel(_stepping), tools=[step]),
        "echo": ChatModelAgent("echo", FunctionModel(echo)),
        "blocker": ChatModelAgent("blocker", FunctionModel(waiting), tools=[wait]),
    }


def run(http: Any, agent: str, text: str = "go") -> Any:
    """Start a run of `agent` and wait for its summary; return the response."""
    return http.post(f"/v1/agents/{agent}/runs", json={"input": text, "stream": False})
