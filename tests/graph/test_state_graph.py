"""StateGraph: routing, fan-out and joins, reducers, limits, agents and teams as nodes, pauses."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, NotRequired, TypedDict

import pytest
from pydantic import BaseModel

from plait import (
    END,
    START,
    AgentTool,
    ChatModelAgent,
    Message,
    Runner,
    StateGraph,
    Team,
    interrupt,
    run_context,
)
from plait.errors import MaxStepsExceeded, UsageError
from plait.graph import append, merge
from plait.stores import MemoryStore
from plait.testing import ScriptedModel, call, reply


class State(TypedDict, total=False):
    messages: Annotated[list[Any], append]
    order: Annotated[list[str], append]
    meta: Annotated[dict[str, Any], merge]
    size: int
    decision: str


def _visit(name: str) -> Any:
    def node(state: dict[str, Any]) -> dict[str, Any]:
        return {"order": [name]}

    return node


def test_conditional_routing_by_input_length() -> None:
    graph = StateGraph(State)
    graph.add_node("measure", lambda s: {"size": len(s["messages"][0].content)})
    graph.add_node("long", _visit("long")).add_node("short", _visit("short"))
    graph.add_edge(START, "measure")
    graph.add_conditional_edges("measure", lambda s: "long" if s["size"] > 10 else "short")
    graph.add_edge("long", END)
    runner = Runner(graph.compile())
    assert runner.query_sync("a rather long input").final_output["order"] == ["long"]
    assert runner.query_sync("tiny").final_output["order"] == ["short"]


def test_an_unknown_route_target_is_an_error_naming_it() -> None:
    graph = StateGraph(State)
    graph.add_node("a", _visit("a"))
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: "k", {"k": "t"})
    result = Runner(graph.compile()).query_sync("q")
    assert isinstance(result.error, UsageError)
    assert str(result.error) == (
        "conditional edge from 'a' returned 'k'; target node 't' does not exist"
    )


def test_fan_out_and_join_runs_the_join_once() -> None:
    graph = StateGraph(State)
    for name in ("start", "b", "c", "join"):
        graph.add_node(name, _visit(name))
    graph.add_edge(START, "start")
    graph.add_edge("start", "b").add_edge("start", "c")
    graph.add_edge(["b", "c"], "join")
    order = Runner(graph.compile()).query_sync("q").final_output["order"]
    assert order[0] == "start" and order[-1] == "join"
    assert sorted(order[1:3]) == ["b", "c"]
    assert len(order) == 4


def test_a_node_returning_nothing_still_fires_its_edges_and_reducers_merge() -> None:
    graph = StateGraph(State)
    graph.add_node("quiet", lambda s: None)
    graph.add_node("x", lambda s: {"meta": {"x": 1}}).add_node("y", lambda s: {"meta": {"y": 2}})
    graph.add_edge(START, "quiet").add_edge("quiet", "x").add_edge("quiet", "y")
    final = Runner(graph.compile()).query_sync("q").final_output
    assert final["meta"] == {"x": 1, "y": 2}


def test_a_cycle_past_max_steps_is_an_error() -> None:
    graph = StateGraph(State)
    graph.add_node("a", _visit("a")).add_node("b", _visit("b"))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "a")
    result = Runner(graph.compile(max_steps=3)).query_sync("q")
    assert isinstance(result.error, MaxStepsExceeded)
    assert "max_steps=3" in str(result.error)


def test_compile_checks_the_edges() -> None:
    graph = StateGraph(State)
    graph.add_node("a", _visit("a"))
    graph.add_edge("a", "nowhere")
    with pytest.raises(UsageError, match="unknown node 'nowhere'"):
        graph.compile()
    with pytest.raises(UsageError, match="no edge from START"):
        StateGraph(State).add_node("a", _visit("a")).compile()


def test_an_interrupted_node_reruns_from_its_top_and_siblings_do_not() -> None:
    counts = {"review": 0, "sibling": 0}

    def review(state: dict[str, Any]) -> dict[str, Any]:
        counts["review"] += 1
        return {"decision": interrupt({"review": "please"})}

    def sibling(state: dict[str, Any]) -> dict[str, Any]:
        counts["sibling"] += 1
        return {"order": ["sibling"]}

    graph = StateGraph(State)
    graph.add_node("review", review).add_node("sibling", sibling)
    graph.add_node("after", _visit("after"))
    graph.add_edge(START, "review").add_edge(START, "sibling")
    graph.add_edge(["review", "sibling"], "after")
    runner = Runner(graph.compile(name="hitl"), store=MemoryStore())
    paused = runner.query_sync("q")
    assert paused.interrupts[0].address == "agent:hitl;node:review"
    resumed = runner.resume_sync(paused.checkpoint_id, value="approved")
    final = resumed.final_output
    assert final["decision"] == "approved"
    assert final["order"] == ["sibling", "after"]
    assert counts == {"review": 2, "sibling": 1}


@dataclass
class DataState:
    messages: Annotated[list[Any], append] = field(default_factory=list)
    notes: str = ""


def test_agents_and_teams_are_nodes_and_the_final_output_is_the_state() -> None:
    writer = ChatModelAgent("writer", ScriptedModel([reply("the report")]))
    researcher = ChatModelAgent("researcher", ScriptedModel([reply("facts")]), description="finds")
    lead = ChatModelAgent(
        "lead", ScriptedModel([call("researcher", {"request": "look"}), reply("research done")])
    )
    team = Team.coordinator(lead, [researcher], name="research_team")
    graph = StateGraph(DataState)
    graph.add_node("collect", lambda s: {"notes": "requirements"})
    graph.add_node("research", team).add_node("report", writer)
    graph.add_edge(START, "collect").add_edge("collect", "research")
    graph.add_edge("research", "report").add_edge("report", END)
    result = Runner(graph.compile(name="research")).query_sync("write about X")
    final = result.final_output
    assert final["notes"] == "requirements"
    assert [m.content for m in final["messages"]] == [
        "write about X",
        "research done",
        "the report",
    ]
    nested = {(e.agent_name, e.depth) for e in result.events}
    assert ("researcher", 2) in nested and ("lead", 1) in nested
    progress = [
        e.output.custom["node"]
        for e in result.events
        if e.agent_name == "research"
        and e.output
        and isinstance(e.output.custom, dict)
        and "node" in e.output.custom
    ]
    assert progress == ["collect", "research", "report"]


def test_per_step_durability_runs_the_graph_to_the_end() -> None:
    graph = StateGraph(State)
    for name in ("a", "b", "c"):
        graph.add_node(name, _visit(name))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c")
    runner = Runner(graph.compile(), store=MemoryStore(), durability="step")
    assert runner.query_sync("q").final_output["order"] == ["a", "b", "c"]


def test_an_agent_node_can_pause_and_resume() -> None:
    from plait import tool

    @tool
    def confirm() -> str:
        """Ask a person."""
        return f"confirmed {interrupt('go on?')}"

    agent = ChatModelAgent(
        "checker", ScriptedModel([call("confirm", {}), reply("checked")]), tools=[confirm]
    )
    graph = StateGraph(State)
    graph.add_node("check", agent).add_node("after", _visit("after"))
    graph.add_edge(START, "check").add_edge("check", "after")
    runner = Runner(graph.compile(name="g"))
    paused = runner.query_sync("q")
    assert paused.interrupts[0].address.startswith("agent:g;node:check;agent:checker;tool:confirm:")
    final = runner.resume_sync(paused.checkpoint_id, value="yes").final_output
    assert [m.content for m in final["messages"]] == ["q", "checked"]
    assert final["order"] == ["after"]


def test_a_graph_as_a_team_member_answers_with_its_last_assistant_message() -> None:
    writer = ChatModelAgent("writer", ScriptedModel([reply("the report")]))
    graph = StateGraph(State)
    graph.add_node("write", writer).add_node("after", _visit("after"))
    graph.add_edge(START, "write").add_edge("write", "after")
    member = graph.compile(name="reporting")
    member.description = "writes reports"
    lead_model = ScriptedModel([call("reporting", {"request": "a report on X"}), reply("sent")])
    team = Team.coordinator(ChatModelAgent("lead", lead_model), [member])
    result = Runner(team).query_sync("go")
    assert result.final_output == "sent"
    tool_result = lead_model.requests[1].messages[-1]
    assert (tool_result.role, tool_result.content) == ("tool", "the report")


def test_a_graph_as_an_agent_tool_without_an_answer_returns_its_state_as_json() -> None:
    graph = StateGraph(State)
    graph.add_node("a", _visit("a")).add_node("b", lambda s: {"size": 3})
    graph.add_edge(START, "a").add_edge("a", "b")
    model = ScriptedModel([call("steps", {"request": "count"}), reply("done")])
    agent = ChatModelAgent("caller", model, tools=[AgentTool(graph.compile(name="steps"))])
    assert Runner(agent).query_sync("go").final_output == "done"
    state = json.loads(model.requests[1].messages[-1].content)
    assert (state["order"], state["size"]) == (["a"], 3)
    assert [m["content"] for m in state["messages"]] == ["count"]


def test_the_answer_is_the_last_assistant_message_a_node_added_not_one_from_the_input() -> None:
    graph = StateGraph(State)
    graph.add_node("say", lambda s: {"messages": [Message.assistant("from the node")]})
    graph.add_node("quiet", _visit("quiet"))
    graph.add_edge(START, "say").add_edge("say", "quiet")
    history = [Message.user("q"), Message.assistant("earlier"), Message.user("again")]
    result = Runner(graph.compile(name="g")).run_sync(history)
    answers = [e.message.message for e in result.events if e.depth == 0 and e.message]
    assert [m.content for m in answers if m is not None] == ["from the node"]
    assert result.final_output["order"] == ["quiet"]

    bare = StateGraph(State).add_node("quiet", _visit("quiet")).add_edge(START, "quiet")
    events = Runner(bare.compile()).run_sync(history).events
    answer = next(e.message.message for e in events if e.message and e.message.message)
    assert json.loads(answer.content)["order"] == ["quiet"]


class DatedDict(TypedDict):
    messages: Annotated[list[Any], append]
    start: NotRequired[datetime]
    due: NotRequired[datetime]
    decision: NotRequired[str]
    days: NotRequired[int]


@dataclass
class DatedData:
    messages: Annotated[list[Any], append] = field(default_factory=list)
    start: datetime | None = None
    due: datetime | None = None
    decision: str = ""
    days: int = 0


class DatedModel(BaseModel):
    messages: Annotated[list[Any], append] = []
    start: datetime | None = None
    due: datetime | None = None
    decision: str = ""
    days: int = 0


@pytest.mark.parametrize("schema", [DatedDict, DatedData, DatedModel])
def test_typed_state_values_survive_a_pause_and_resume(schema: Any) -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    graph = StateGraph(schema)
    graph.add_node("plan", lambda s: {"start": start})
    graph.add_node("stamp", lambda s: {"due": s["start"] + timedelta(days=9)})
    graph.add_node("approve", lambda s: {"decision": interrupt("approve?")})
    graph.add_node("count", lambda s: {"days": (s["due"] - s["start"]).days})
    graph.add_edge(START, "plan").add_edge("plan", "stamp").add_edge("plan", "approve")
    graph.add_edge(["stamp", "approve"], "count")
    runner = Runner(graph.compile(), store=MemoryStore())
    paused = runner.query_sync("q")
    assert paused.interrupts
    final = runner.resume_sync(paused.checkpoint_id, value="yes").raise_for_error().final_output
    assert (final["decision"], final["days"]) == ("yes", 9)
    assert final["start"] == start and final["start"].year == 2030


def test_sync_nodes_of_one_super_step_run_at_the_same_time_with_their_context() -> None:
    barrier = threading.Barrier(2, timeout=60)  # a bound: the two meet at once

    def meet(name: str) -> Any:
        def node(state: dict[str, Any]) -> dict[str, Any]:
            barrier.wait()
            return {"meta": {name: run_context().address}}

        return node

    graph = StateGraph(State)
    graph.add_node("left", meet("left")).add_node("right", meet("right"))
    graph.add_edge(START, "left").add_edge(START, "right")
    result = Runner(graph.compile(name="g")).query_sync("q")
    assert result.error is None
    assert result.final_output["meta"] == {
        "left": "agent:g;node:left",
        "right": "agent:g;node:right",
    }


async def test_the_event_loop_runs_on_while_a_sync_node_blocks() -> None:
    started, go = threading.Event(), threading.Event()

    def blocking(state: dict[str, Any]) -> dict[str, Any]:
        started.set()
        return {"decision": "released" if go.wait(5) else "timed out"}

    async def release() -> None:
        if await asyncio.to_thread(started.wait, 5):
            go.set()

    graph = StateGraph(State).add_node("block", blocking).add_edge(START, "block")
    async with asyncio.TaskGroup() as tg:
        tg.create_task(release())
        run = tg.create_task(Runner(graph.compile()).query("q").collect())
    assert run.result().final_output["decision"] == "released"


async def test_cancelling_a_run_does_not_wait_for_a_blocked_sync_node() -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def blocking(state: dict[str, Any]) -> dict[str, Any]:
        started.set()
        release.wait(5)
        finished.set()
        return {}

    graph = StateGraph(State).add_node("block", blocking).add_edge(START, "block")
    run = asyncio.ensure_future(Runner(graph.compile()).query("q").collect())
    try:
        assert await asyncio.to_thread(started.wait, 5)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert not finished.is_set()
    finally:
        release.set()


_STUCK_NODE = """
import asyncio, time
from typing import TypedDict
from plait import Runner, StateGraph, START

class S(TypedDict, total=False):
    n: int

def stuck(state):
    print("started", flush=True)
    time.sleep(120)
    return {"n": 1}

async def main():
    graph = StateGraph(S).add_node("stuck", stuck).add_edge(START, "stuck")
    stream = Runner(graph.compile(name="g")).query("q")
    consume = asyncio.ensure_future(stream.collect())
    await asyncio.sleep(0.5)
    consume.cancel()  # the caller gives up on the run
    try:
        await consume
    except asyncio.CancelledError:
        pass

asyncio.run(main())
print("returned", flush=True)
"""


def test_a_stuck_sync_node_does_not_hold_up_the_process_after_its_run_is_abandoned() -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _STUCK_NODE], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["started", "returned"]
