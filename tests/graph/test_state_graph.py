"""StateGraph: routing, fan-out and joins, reducers, limits, agents and teams as nodes, pauses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

import pytest

from plait import END, START, ChatModelAgent, Runner, StateGraph, Team, interrupt
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
