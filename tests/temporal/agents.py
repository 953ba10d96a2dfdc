"""The agents the Temporal tests run, built the same way in the test process and in the
worker processes it starts. Models and tools append a line to `calls.log` in a directory
each time they really run, so a test can count them across processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from plait import (
    END,
    START,
    AgentContext,
    AgentInput,
    AgentTool,
    ChatModelAgent,
    Compaction,
    GuardrailResult,
    Inherit,
    Message,
    StateGraph,
    Team,
    interrupt,
    tool,
)
from plait.graph import append
from plait.testing import FunctionModel, ScriptedModel, call

DEADLINE = 120.0  # seconds a blocked tool waits for its file (a safety net)


def log(directory: Path, line: str) -> None:
    """Append `line` to the directory's call log (one write per line)."""
    with (directory / "calls.log").open("a", encoding="utf-8") as out:
        out.write(line + "\n")


def calls(directory: Path) -> list[str]:
    """The lines of the directory's call log."""
    path = directory / "calls.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _tool_results(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.role == "tool"]


def steps_agent(directory: Path, count: int = 3) -> ChatModelAgent:
    """Calls `step(1)` … `step(count)` one after another, then answers "done". Step 2 waits
    until the file `go` exists (so a test can kill its worker while it runs)."""

    @tool
    def step(n: int) -> str:
        """Do step n.

        Args:
            n: The step's number.
        """
        log(directory, f"tool start {n}")
        if n == 2:
            deadline = time.monotonic() + DEADLINE
            while not (directory / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        log(directory, f"tool done {n}")
        return f"step {n} ok"

    def reply(messages: list[Message], tools: list[Any]) -> Message | str:
        done = len(_tool_results(messages))
        log(directory, f"model {done}")
        if done < count:
            return call("step", {"n": done + 1}, id=f"s{done + 1}")
        return "done"

    return ChatModelAgent("steps", FunctionModel(reply), tools=[step])


def asker_agent(directory: Path, tool_name: str = "approve") -> ChatModelAgent:
    """Asks for approval through a tool that calls `interrupt()`, then answers with the
    tool's result."""

    def approve(item: str) -> str:
        log(directory, f"tool {item}")
        answer = interrupt({"question": f"approve {item}?"})
        return f"approved: {answer}"

    approve.__doc__ = "Ask a person to approve an item.\n\nArgs:\n    item: What to approve."
    approve_tool = tool(approve)
    approve_tool.name = tool_name

    def reply(messages: list[Message], tools: list[Any]) -> Message | str:
        results = _tool_results(messages)
        log(directory, f"model {len(results)}")
        if not results:
            return call("approve", {"item": "invoice"}, id="a1")
        return results[-1].content

    return ChatModelAgent("asker", FunctionModel(reply), tools=[approve_tool])


def team(directory: Path) -> Team:
    """A coordinator team on scripted models: the lead asks its researcher (who looks a fact
    up with a tool), then its writer, then answers."""

    @tool
    async def lookup(topic: str) -> str:
        """Look a topic up.

        Args:
            topic: What to look up.
        """
        log(directory, f"tool lookup {topic}")
        return f"{topic} is 42"

    def logged(line: str, answer: Callable[[list[Message]], Message | str]) -> Any:
        def entry(messages: list[Message], tools: list[Any]) -> Message | str:
            log(directory, line)
            return answer(messages)

        return entry

    def last(messages: list[Message]) -> str:
        return messages[-1].content

    researcher = ScriptedModel(
        [
            logged("model researcher 0", lambda m: call("lookup", {"topic": "answer"}, id="r1")),
            logged("model researcher 1", lambda m: f"found: {last(m)}"),
        ]
    )
    writer = ScriptedModel([logged("model writer", lambda m: f"written: {last(m)}")])
    lead = ScriptedModel(
        [
            logged("model lead 0", lambda m: call("researcher", {"request": "find"}, id="c1")),
            logged("model lead 1", lambda m: call("writer", {"request": last(m)}, id="c2")),
            logged("model lead 2", lambda m: f"final: {last(m)}"),
        ]
    )
    members = [
        ChatModelAgent("researcher", researcher, tools=[lookup], description="finds facts"),
        ChatModelAgent("writer", writer, description="writes"),
    ]
    return Team.coordinator(ChatModelAgent("lead", lead), members)


def slow_agent(directory: Path) -> ChatModelAgent:
    """Calls a tool that takes far longer than its activity may, then answers with the
    tool's result."""

    @tool
    async def slow() -> str:
        """Take a long time."""
        log(directory, "tool slow")
        await asyncio.sleep(DEADLINE)
        return "finished"

    @tool
    async def nap() -> str:
        """Take a few seconds."""
        await asyncio.sleep(2.5)
        return "rested"

    def reply(messages: list[Message], tools: list[Any]) -> Message | str:
        results = _tool_results(messages)
        if not results:
            wanted = "nap" if "nap" in messages[-1].content else "slow"
            return call(wanted, {}, id="w1")
        return results[-1].content

    return ChatModelAgent("sloth", FunctionModel(reply), tools=[slow, nap])


class GraphState(TypedDict, total=False):
    messages: Annotated[list[Any], append]
    order: Annotated[list[str], append]


def graph(directory: Path) -> Any:
    """A graph whose sync node (an activity) measures the input and whose async node (in
    the workflow) records it."""

    def measure(state: dict[str, Any]) -> dict[str, Any]:
        log(directory, "node measure")
        return {"order": [f"measured {len(state['messages'][0].content)}"]}

    async def note(state: dict[str, Any]) -> dict[str, Any]:
        return {"order": ["noted"]}

    built = StateGraph(GraphState)
    built.add_node("measure", measure).add_node("note", note)
    built.add_edge(START, "measure").add_edge("measure", "note").add_edge("note", END)
    return built.compile(name="counter")


def swarm(directory: Path) -> Team:
    """A swarm: `desk` transfers to `billing`, which inherits a summary of the talk."""

    def desk(messages: list[Message], tools: list[Any]) -> Message | str:
        log(directory, "model desk")
        return call("transfer_to_agent", {"agent_name": "billing"}, id="t1")

    def billing(messages: list[Message], tools: list[Any]) -> Message | str:
        log(directory, "model billing")
        return "billing saw: " + " | ".join(m.content for m in messages if m.role == "user")

    def summarize(messages: list[Message], tools: list[Any]) -> Message | str:
        log(directory, "model summary")
        return "the user wants a refund"

    members = [
        ChatModelAgent("desk", FunctionModel(desk), description="front desk"),
        ChatModelAgent("billing", FunctionModel(billing), description="money"),
    ]
    return Team.swarm(
        "desk", members, name="support", inherit=Inherit.summary(FunctionModel(summarize))
    )


def nested(directory: Path) -> ChatModelAgent:
    """An agent whose `AgentTool` child pauses in its tool (which records its idempotency
    key and writes a session value); the outer agent's next tool reads that value."""

    @tool
    def sign(ctx: AgentContext) -> str:
        """Sign once a person agrees."""
        log(directory, f"key {ctx.idempotency_key}")
        answer = interrupt({"sign?": True})
        ctx.session_values["signed"] = answer
        ctx.state["by"] = "clerk"
        return f"signed: {answer}"

    @tool
    def peek(ctx: AgentContext) -> str:
        """Read what was signed."""
        return f"{ctx.session_values.get('signed')} by {ctx.state.get('by')}"

    def clerk(messages: list[Message], tools: list[Any]) -> Message | str:
        results = _tool_results(messages)
        return results[-1].content if results else call("sign", {}, id="k1")

    def desk(messages: list[Message], tools: list[Any]) -> Message | str:
        results = _tool_results(messages)
        if not results:
            return call("clerk", {"request": "sign it"}, id="d1")
        if len(results) == 1:
            return call("peek", {}, id="d2")
        return f"{results[0].content}; {results[1].content}"

    inner = ChatModelAgent("clerk", FunctionModel(clerk), tools=[sign], description="signs")
    return ChatModelAgent("desk", FunctionModel(desk), tools=[AgentTool(inner), peek])


def compacting(directory: Path) -> ChatModelAgent:
    """An agent whose long prompt is compacted first, its summary written by a model of its
    own."""

    def summarize(messages: list[Message], tools: list[Any]) -> Message | str:
        log(directory, "model summary")
        return "they talked at length"

    def answer(messages: list[Message], tools: list[Any]) -> Message | str:
        log(directory, "model answer")
        return " / ".join(m.content[-60:] for m in messages if m.role == "user")

    compaction = Compaction(max_tokens=60, keep_last=1, model=FunctionModel(summarize))
    return ChatModelAgent("compact", FunctionModel(answer), compaction=compaction)


def guarded(directory: Path) -> ChatModelAgent:
    """Checks its input and its answer with sync guardrails (the input trips on "homework",
    the answer on "secret") and builds its model input with a sync `gen_model_input`."""

    def no_homework(ctx: AgentContext, text: str) -> GuardrailResult:
        log(directory, f"input guardrail {text}")
        return GuardrailResult(tripwire="homework" in text, info={"topic": "homework"})

    def no_secret(ctx: AgentContext, text: str) -> GuardrailResult:
        log(directory, f"output guardrail {text}")
        return GuardrailResult(tripwire="secret" in text, info={"said": text})

    def model_input(instruction: str, input: AgentInput, ctx: AgentContext) -> list[Message]:
        return [Message.system(instruction), *input.messages, Message.user("(be brief)")]

    def reply(messages: list[Message], tools: list[Any]) -> Message | str:
        asked = [m.content for m in messages if m.role == "user"]
        log(directory, "model")
        return "the answer is: " + " ".join(asked)

    return ChatModelAgent(
        "guarded",
        FunctionModel(reply),
        instruction="Answer.",
        gen_model_input=model_input,
        input_guardrails=[no_homework],
        output_guardrails=[no_secret],
    )


def finisher(directory: Path) -> ChatModelAgent:
    """Ends its turn with plait's own (sync) `exit` tool."""

    def reply(messages: list[Message], tools: list[Any]) -> Message | str:
        log(directory, "model")
        return call("exit", {"final_result": "finished via exit"}, id="x1")

    return ChatModelAgent("finisher", FunctionModel(reply), exit_tool=True)


def all_agents(directory: Path) -> list[Any]:
    return [
        guarded(directory),
        finisher(directory),
        compacting(directory),
        nested(directory),
        steps_agent(directory),
        asker_agent(directory),
        team(directory),
        slow_agent(directory),
        graph(directory),
        swarm(directory),
    ]
