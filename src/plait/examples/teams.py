"""The team examples: a code-review team (coordinator and swarm), a three-level project team,
and a research graph with a team as one of its nodes.

The models are scripted (their replies are replayed), the reviewers' tools are small real
checks, and the teams, handoffs, budgets, depth filter and graph are the real ones.
Run it: `python -m plait.examples.teams`.
"""

from __future__ import annotations

import asyncio
import re
from typing import Annotated, Any, TypedDict

from plait import START, ChatModelAgent, Message, Runner, StateGraph, Team, tool
from plait.graph import append
from plait.graph.state_graph import CompiledGraph
from plait.testing import ScriptedModel, call, reply

__all__ = [
    "PR",
    "code_review_coordinator",
    "code_review_swarm",
    "project_team",
    "research_graph",
]

PR = 'query = "SELECT * FROM users WHERE name = \'" + name + "\'"\nfor u in users: db.get(u)'


@tool
def sql_injection_checker(code: str) -> str:
    """Look for SQL built by string concatenation.

    Args:
        code: The code to check.
    """
    hits = re.findall(r"SELECT .*\" \+ \w+", code)
    return f"possible SQL injection: {hits[0]!r}" if hits else "no SQL injection found"


@tool
def query_analyzer(code: str) -> str:
    """Look for a query inside a loop (N+1 queries).

    Args:
        code: The code to check.
    """
    return "N+1 query: db.get inside a loop" if re.search(r"for .*db\.get", code) else "ok"


@tool
def linter(code: str) -> str:
    """Check basic style.

    Args:
        code: The code to check.
    """
    long_lines = [n for n, line in enumerate(code.splitlines(), 1) if len(line) > 60]
    return f"lines over 60 characters: {long_lines}" if long_lines else "style ok"


def _reviewer(name: str, description: str, tool_: Any, script: list[Any]) -> ChatModelAgent:
    return ChatModelAgent(
        name,
        ScriptedModel(script),
        description=description,
        tools=[tool_],
        instruction=f"You are the {name.replace('_', ' ')}. Review only your area.",
    )


def _from_tool(prefix: str) -> Any:
    def step(messages: list[Message], tools: Any) -> Message:
        found = next(m.content for m in reversed(messages) if m.role == "tool")
        return Message.assistant(f"{prefix}: {found}")

    return step


def code_review_coordinator() -> Team:
    """A review manager delegating to security, performance and style reviewers."""
    security = _reviewer(
        "security_reviewer",
        "Security expert: SQL injection, XSS, auth. Input: code.",
        sql_injection_checker,
        [call("sql_injection_checker", {"code": PR}), _from_tool("security")],
    )
    perf = _reviewer(
        "perf_reviewer",
        "Performance expert: queries, memory. Input: code.",
        query_analyzer,
        [call("query_analyzer", {"code": PR}), _from_tool("performance")],
    )
    style = _reviewer(
        "style_reviewer",
        "Style reviewer: conventions only. Input: code.",
        linter,
        [call("linter", {"code": PR}), _from_tool("style")],
    )
    manager = ChatModelAgent(
        "review_manager",
        ScriptedModel(
            [
                call("security_reviewer", {"request": PR}),
                call("perf_reviewer", {"request": PR}),
                call("style_reviewer", {"request": PR}),
                _summary,
            ]
        ),
        instruction="You manage code review. Send the PR to the right reviewers, then sum up.",
    )
    return Team.coordinator(manager, [security, perf, style], name="code_review")


def _summary(messages: list[Message], tools: Any) -> Message:
    findings = [m.content for m in messages if m.role == "tool"]
    return Message.assistant("Review: " + "; ".join(findings))


def _handoff(to: str, message: str) -> Message:
    return call("transfer_to_agent", {"agent_name": to, "message": message})


def code_review_swarm() -> Team:
    """The same review as a swarm: security hands to performance, performance to style."""
    security = _reviewer(
        "security_reviewer",
        "Security expert.",
        sql_injection_checker,
        [call("sql_injection_checker", {"code": PR}), _handoff("perf_reviewer", "security noted")],
    )
    perf = _reviewer(
        "perf_reviewer",
        "Performance expert.",
        query_analyzer,
        [call("query_analyzer", {"code": PR}), _handoff("style_reviewer", "N+1 noted")],
    )
    style = _reviewer(
        "style_reviewer",
        "Style reviewer; writes the final summary.",
        linter,
        [
            call("linter", {"code": PR}),
            reply("Review complete: SQL injection, N+1 query, style ok."),
        ],
    )
    return Team.swarm(
        "security_reviewer", [security, perf, style], name="review_swarm", max_handoffs=5
    )


def _worker(name: str, answer: str) -> ChatModelAgent:
    return ChatModelAgent(name, ScriptedModel([reply(answer)]), description=f"{name} work")


def _dev_team() -> Team:
    return Team.coordinator(
        ChatModelAgent(
            "dev_lead",
            ScriptedModel(
                [
                    call("backend_coder", {"request": "write the sign-up API"}),
                    call("db_designer", {"request": "design the users table"}),
                    reply("development done"),
                ]
            ),
        ),
        [
            _worker("frontend_coder", "form built"),
            _worker("backend_coder", "API done"),
            _worker("db_designer", "table designed"),
        ],
        name="dev_team",
        description="development: frontend, backend, database",
    )


def project_team() -> Team:
    """Three levels: a project manager over dev, QA and design teams over their members."""
    dev = _dev_team()
    qa = Team.coordinator(
        ChatModelAgent(
            "qa_lead",
            ScriptedModel(
                [call("security_auditor", {"request": "audit sign-up"}), reply("QA passed")]
            ),
        ),
        [_worker("security_auditor", "no issues"), _worker("perf_tester", "fast enough")],
        name="qa_team",
        description="quality: security audit, performance tests",
    )
    design = Team.swarm(
        "ui_designer",
        [
            ChatModelAgent(
                "ui_designer",
                ScriptedModel([_handoff("tech_writer", "document it")]),
                description="UI design",
            ),
            _worker("tech_writer", "docs written"),
        ],
        name="design_team",
        description="design: UI, then documentation",
    )
    manager = ChatModelAgent(
        "project_manager",
        ScriptedModel(
            [
                call("dev_team", {"request": "implement user sign-up"}),
                call("qa_team", {"request": "test sign-up"}),
                call("design_team", {"request": "design and document sign-up"}),
                reply("Sign-up shipped: built, tested and documented."),
            ]
        ),
        instruction="You are the project manager of dev_team, qa_team and design_team.",
    )
    return Team.coordinator(
        manager,
        [dev, qa, design],
        name="project",
        max_depth=3,
        total_max_steps=50,
        total_token_budget=100_000,
        event_filter=lambda event: event.depth <= 1,
    )


class ResearchState(TypedDict, total=False):
    messages: Annotated[list[Any], append]
    requirements: str
    report: str


def research_graph() -> CompiledGraph:
    """collect_requirements → research team (searcher, analyzer) → generate_report."""
    lead = ChatModelAgent(
        "research_lead",
        ScriptedModel(
            [
                call("searcher", {"request": "find sources on agent frameworks"}),
                call("analyzer", {"request": "compare them"}),
                reply("Findings: teams and durable pauses are what users miss most."),
            ]
        ),
    )
    team = Team.coordinator(
        lead,
        [_worker("searcher", "5 sources found"), _worker("analyzer", "compared")],
        name="research_team",
    )

    def collect_requirements(state: dict[str, Any]) -> dict[str, Any]:
        return {"requirements": f"topic: {state['messages'][0].content}"}

    def generate_report(state: dict[str, Any]) -> dict[str, Any]:
        return {"report": f"{state['requirements']}\n{state['messages'][-1].content}"}

    graph = StateGraph(ResearchState)
    graph.add_node("collect_requirements", collect_requirements)
    graph.add_node("research", team).add_node("generate_report", generate_report)
    graph.add_edge(START, "collect_requirements").add_edge("collect_requirements", "research")
    graph.add_edge("research", "generate_report")
    return graph.compile(name="research_graph")


async def main() -> None:
    """Run every example and print what it produced."""
    review = await Runner(code_review_coordinator()).query(f"Review this PR:\n{PR}").collect()
    print("coordinator review:", review.final_output)
    swarm = await Runner(code_review_swarm()).query(f"Review this PR:\n{PR}").collect()
    print("swarm review:", swarm.final_output)
    for log in swarm.handoffs:
        print("  ", log.render())
    project = await Runner(project_team()).query("Ship user sign-up").collect()
    print("project:", project.final_output, f"({len(project.events)} events at depth <= 1)")
    research = await Runner(research_graph()).query("agent frameworks").collect()
    print("research report:", research.final_output["report"])


if __name__ == "__main__":
    asyncio.run(main())
