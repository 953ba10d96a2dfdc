"""Agents of every kind, served as assistants in the tests of graphs, custom agents, kept
steps and interrupts across nesting: each on scripted models, fresh per server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, TypedDict

from plait import (
    AgentContext,
    AgentEvent,
    AgentInput,
    AgentOutput,
    AgentTool,
    ChatModelAgent,
    Message,
    StateGraph,
    Team,
    interrupt,
    run_context,
    tool,
)
from plait.core.agent import Agent
from plait.graph import END, START, append
from plait.testing import ScriptedModel, call, calls, reply
from tests.protocols.agent_protocol.support import approve, work


@tool
def note(n: int) -> str:
    """Write a number down in the session values.

    Args:
        n: The number.
    """
    run_context().session_values["count"] = n
    return f"noted {n}"


class Draft(TypedDict, total=False):
    """The state of the `drafts` graph."""

    messages: Annotated[list[Any], append]
    topic: str


def _plan(state: dict[str, Any]) -> dict[str, Any]:
    """A function node: the topic is the last message's text."""
    return {"topic": state["messages"][-1].content}


class Greeter:
    """A custom agent on `AgentContext` alone: it greets, says what it did as a custom
    value, and asks for a person's name with `interrupt()` when it does not know it."""

    def __init__(self, name: str = "greeter") -> None:
        self.name = name
        self.description = "Greets whoever writes, asking their name."

    async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        known = ctx.session_values.get("name")
        if known is None:
            if ctx.load_state("said") is None:  # the first time: greet (not again on resume)
                said = input.messages[-1].content
                ctx.save_state("said", said)
                yield ctx.event(message=Message.assistant(f"hello! you said: {said}"))
            known = interrupt({"question": "what is your name?"})
            ctx.session_values["name"] = known
        yield ctx.event(output=AgentOutput(custom={"greeted": known}))
        yield ctx.event(message=Message.assistant(f"nice to meet you, {known}"))


def _asker(name: str, *script: Any) -> ChatModelAgent:
    return ChatModelAgent(name, ScriptedModel(list(script), per_run=True), tools=[approve])


def make_kinds() -> dict[str, Agent]:
    """Return the served agents: a multi-step agent, one that steps then works until
    cancelled, a graph, a custom agent, and interrupts in a team member, an agent run as
    a tool (two at once) and a graph's agent node."""
    stepper = ChatModelAgent(
        "stepper",
        ScriptedModel(
            [call("note", {"n": 1}), call("note", {"n": 2}), reply("noted twice")], per_run=True
        ),
        tools=[note],
    )
    halter = ChatModelAgent(
        "halter",
        ScriptedModel([call("note", {"n": 7}), call("work", {}), reply("halted")], per_run=True),
        tools=[note, work],
    )
    writer = ChatModelAgent(
        "writer", ScriptedModel([lambda m, t: reply(f"draft: {m[-1].content}")], per_run=True)
    )
    drafts = (
        StateGraph(Draft)
        .add_node("plan", _plan)
        .add_node("write", writer)
        .add_edge(START, "plan")
        .add_edge("plan", "write")
        .add_edge("write", END)
        .compile(name="drafts")
    )
    drafts.description = "Plans a topic, then drafts it."
    lead = ChatModelAgent(
        "lead",
        ScriptedModel(
            [call("transfer_to_agent", {"agent_name": "payer"}), reply("handed")], per_run=True
        ),
    )
    payer = _asker("payer", call("approve", {"action": "wire"}), reply("wired"))
    office = Team.swarm(lead, [lead, payer], name="office", description="A lead and a payer.")
    clerk = _asker(
        "clerk",
        calls(call("approve", {"action": "a"}), call("approve", {"action": "b"})),
        lambda m, t: reply(" ".join(x.content for x in m if x.role == "tool")),
    )
    boss = ChatModelAgent(
        "boss",
        ScriptedModel(
            [call("clerk", {"request": "get both approved"}), lambda m, t: reply(m[-1].content)],
            per_run=True,
        ),
        tools=[AgentTool(clerk)],
    )
    signer = _asker("signer", call("approve", {"action": "sign"}), reply("signed"))
    review = (
        StateGraph(Draft).add_node("sign", signer).add_edge(START, "sign").compile(name="review")
    )
    agents: list[Agent] = [stepper, halter, drafts, Greeter(), office, boss, review]
    return {agent.name: agent for agent in agents}
