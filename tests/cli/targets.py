"""Agents the command-line tests name as TARGETs (`tests/cli/targets.py:<name>`).

`helper`'s model picks by the user's first word: "approve X" calls a tool that asks a
person, "slow" calls a tool that works until the run is asked to stop, "fail" is a model
error, anything else is echoed. After a tool result it answers from the results. It decides
from the messages alone, so a run paused in one process is resumed in another.

`gated` waits at gates the test controls (files in the folder `PLAIT_TEST_GATES` names): its
model call, or its sync tool `stuck`, notes that it reached the gate and waits until the
test opens it, so a test acts while the call is in flight without guessing a time.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from plait import AgentTool, ChatModelAgent, Message, Team, Usage, interrupt, run_context, tool
from plait.testing import FunctionModel, ScriptedModel, call, calls, reply
from plait.tools.base import ToolInfo

#: The longest the slow tool works when nobody stops it.
SLOW_SECONDS = 30.0
#: Where the slow tool notes the calls it has started (shared by every process here).
STARTED = Path(tempfile.gettempdir()) / "plait-cli-tests-slow"


@tool
def approve(action: str) -> str:
    """Ask a person to approve an action.

    Args:
        action: What to approve.
    """
    answer = interrupt({"question": f"approve {action}?"})
    return f"{action}={answer}"


@tool
async def slow() -> str:
    """Work until a stop cancels the call; a call run again after a stop finishes at once."""
    ctx = run_context()
    STARTED.mkdir(exist_ok=True)
    mark = STARTED / f"{ctx.tool_call_id}"
    if mark.exists():  # a stop cancelled this call before; the resumed run calls it again
        return "ran again after a stop"
    mark.touch()
    await asyncio.sleep(SLOW_SECONDS)
    return "slow work done"


def _helper_reply(messages: list[Message], tools: list[ToolInfo]) -> Message:
    last = messages[-1]
    if last.role == "tool":
        results = [m.content for m in messages if m.role == "tool"]
        return reply("done: " + " | ".join(results), usage=Usage(input_tokens=11, output_tokens=4))
    words = last.content.split()
    first = words[0] if words else ""
    if first == "approve":
        return call("approve", {"action": " ".join(words[1:])})
    if first == "two":
        return calls(call("approve", {"action": "a"}), call("approve", {"action": "b"}))
    if first == "slow":
        return call("slow")
    if first == "fail":
        raise RuntimeError("the model is down")
    return reply(f"echo: {' '.join(words)}", usage=Usage(input_tokens=2, output_tokens=3))


helper = ChatModelAgent(
    "helper",
    FunctionModel(_helper_reply),
    description="Echoes, asks for approval, works slowly.",
    tools=[approve, slow],
)


def make_helper() -> ChatModelAgent:
    """Return a fresh helper (a zero-argument factory)."""
    return ChatModelAgent(
        "helper", FunctionModel(_helper_reply), description="Echoes.", tools=[approve, slow]
    )


def scripted_support() -> ChatModelAgent:
    """Return an agent on a scripted model: one tool call, then an answer."""

    @tool
    def lookup(order: str) -> str:
        """Look an order up.

        Args:
            order: The order id.
        """
        return f"order {order}: shipped"

    model = ScriptedModel([call("lookup", {"order": "A-1"}), reply("Your order has shipped.")])
    return ChatModelAgent("support", model, description="Orders.", tools=[lookup])


@tool
def forecast(city: str) -> str:
    """The weather of a city, as JSON text with its non-ASCII characters escaped.

    Args:
        city: The city.
    """
    return json.dumps({"city": city, "temperature": "18°C"})  # "18\\u00b0C"


def weather() -> ChatModelAgent:
    """Return an agent whose model, as many providers' do, escapes the non-ASCII characters
    of a tool call's arguments (`"Z\\u00fcrich"`), and whose tool answers escaped JSON."""
    model = ScriptedModel(
        [call("forecast", '{"city": "Z\\u00fcrich"}'), reply("It is 18°C in Zürich.")]
    )
    return ChatModelAgent("weather", model, description="Weather.", tools=[forecast])


def desk() -> Team:
    """Return a swarm whose entry hands off to billing, which answers."""
    triage = ChatModelAgent(
        "triage",
        ScriptedModel(
            [call("transfer_to_agent", {"agent_name": "billing", "reason": "a bill question"})]
        ),
        description="Routes.",
    )
    billing = ChatModelAgent(
        "billing", ScriptedModel([reply("Your bill is 10.")]), description="Bills."
    )
    return Team.swarm(triage, [triage, billing], name="desk", description="A desk.")


def manager() -> ChatModelAgent:
    """Return an agent that asks `helper`, called as a tool, to echo a text."""
    model = ScriptedModel(
        [call("helper", {"request": "from the manager"}), reply("The helper answered.")]
    )
    return ChatModelAgent(
        "manager", model, description="Delegates.", tools=[AgentTool(make_helper())]
    )


def needs_arguments(name: str) -> ChatModelAgent:
    """A factory that cannot be called without arguments."""
    return make_helper()


def broken_factory() -> ChatModelAgent:
    """A factory that fails."""
    raise RuntimeError("the factory is broken")


def returns_text() -> str:
    """A factory of something that is not an agent."""
    return "not an agent"


not_an_agent = 42


#: The environment variable naming the folder of the gates (set by the test that uses them).
GATES = "PLAIT_TEST_GATES"
#: The longest a gate waits when the test never opens it.
GATE_SECONDS = 120.0


def _gate_files(name: str) -> tuple[Path, Path]:
    folder = Path(os.environ[GATES])
    return folder / f"{name}.reached", folder / f"{name}.open"


def wait_at_gate(name: str) -> None:
    """Note that the gate `name` was reached, then wait until the test opens it (a file)."""
    reached, opened = _gate_files(name)
    reached.touch()
    deadline = time.monotonic() + GATE_SECONDS
    while not opened.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


async def await_gate(name: str) -> None:
    """`wait_at_gate` for a coroutine: the event loop goes on while it waits."""
    reached, opened = _gate_files(name)
    reached.touch()
    deadline = time.monotonic() + GATE_SECONDS
    while not opened.exists() and time.monotonic() < deadline:  # noqa: ASYNC110 - a file
        await asyncio.sleep(0.02)


@tool
def stuck() -> str:
    """Block its thread at the gate "tool" (a sync tool's thread cannot be cancelled)."""
    wait_at_gate("tool")
    return "unstuck"


async def _gated_reply(messages: list[Message], tools: list[ToolInfo]) -> Message:
    last = messages[-1]
    if last.role == "tool":
        return reply(f"done: {last.content}")
    if last.content == "stuck":
        return call("stuck")
    await await_gate("model")  # a model call that answers once the test lets it
    return reply("the model answered")


def gated() -> ChatModelAgent:
    """Return an agent whose model call ("anything") or sync tool call ("stuck") waits at a
    gate."""
    return ChatModelAgent(
        "gated", FunctionModel(_gated_reply), description="Waits at gates.", tools=[stuck]
    )


class StallingStream:
    """A model that streams its first words, then waits until the run stops its stream. A
    request made again after a stop (a resumed run) streams its whole reply."""

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Return the whole reply (the resumed call's)."""
        return reply(f"resumed: {messages[-1].content} is done")

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Stream the first words and stall, or stream the whole reply if it stalled before."""
        STARTED.mkdir(exist_ok=True)
        mark = STARTED / f"stream-{messages[-1].content.replace(' ', '-')}"
        if mark.exists():
            yield await self.generate(messages, tools=tools, **options)
            return
        mark.touch()
        yield Message.assistant("the first words ")
        await asyncio.Event().wait()  # until the stream is stopped
        yield Message.assistant("never shown")


def streamer() -> ChatModelAgent:
    """Return an agent whose streamed reply stalls after its first words (see
    `StallingStream`; the user's request names the stall, so give each test its own)."""
    return ChatModelAgent("streamer", StallingStream(), description="Streams, then stalls.")


def _traced() -> None:
    """Turn OpenTelemetry tracing on in the process."""
    from opentelemetry.sdk.trace import TracerProvider

    from plait import tracing

    tracing.instrument(TracerProvider())


def traced_streamer() -> ChatModelAgent:
    """`streamer` with OpenTelemetry tracing on in the process."""
    _traced()
    return streamer()


def traced_gated() -> ChatModelAgent:
    """`gated` with OpenTelemetry tracing on in the process."""
    _traced()
    return gated()


def slow_to_load() -> ChatModelAgent:
    """A factory that waits at the gate "load" (a TARGET still loading)."""
    wait_at_gate("load")
    return make_helper()


def gated_demo_models() -> tuple[FunctionModel, FunctionModel, FunctionModel]:
    """The demo's models, the router's waiting at the gate "model"."""
    return FunctionModel(_gated_reply), FunctionModel(_gated_reply), FunctionModel(_gated_reply)


def _triage_reply(messages: list[Message], tools: list[ToolInfo]) -> Message:
    return call("transfer_to_agent", {"agent_name": "clerk", "reason": "a refund"})


def _clerk_reply(messages: list[Message], tools: list[ToolInfo]) -> Message:
    last = messages[-1]
    if last.role == "tool":
        return reply(f"refunded: {last.content}")
    return call("approve", {"action": "the refund"})


def refund_desk() -> Team:
    """Return a swarm: triage hands off to clerk, which asks a person before it answers (one
    handoff before the pause, the END entry after it)."""
    triage = ChatModelAgent("triage", FunctionModel(_triage_reply), description="Routes.")
    clerk = ChatModelAgent(
        "clerk", FunctionModel(_clerk_reply), description="Refunds.", tools=[approve]
    )
    return Team.swarm(triage, [triage, clerk], name="refunds", description="A refund desk.")
