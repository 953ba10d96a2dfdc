"""The team examples from the seed run and produce what they describe."""

from __future__ import annotations

from plait import Runner
from plait.examples.teams import (
    PR,
    code_review_coordinator,
    code_review_swarm,
    project_team,
    research_graph,
)


def test_the_coordinator_review_uses_every_reviewer() -> None:
    result = Runner(code_review_coordinator()).query_sync(f"Review:\n{PR}")
    assert result.error is None
    assert "possible SQL injection" in result.final_output
    assert "N+1 query" in result.final_output
    reviewers = {e.agent_name for e in result.events if e.depth == 1}
    assert reviewers == {"security_reviewer", "perf_reviewer", "style_reviewer"}


def test_the_swarm_review_hands_off_down_the_line() -> None:
    result = Runner(code_review_swarm()).query_sync(f"Review:\n{PR}")
    assert result.final_output == "Review complete: SQL injection, N+1 query, style ok."
    assert [(h.from_agent, h.to_agent) for h in result.handoffs] == [
        ("security_reviewer", "perf_reviewer"),
        ("perf_reviewer", "style_reviewer"),
        ("style_reviewer", "END"),
    ]
    assert result.handoffs[-1].message == result.final_output
    assert all(h.step_count == 2 for h in result.handoffs)


def test_the_project_team_filters_events_below_depth_one() -> None:
    result = Runner(project_team()).query_sync("Ship user sign-up")
    assert result.final_output == "Sign-up shipped: built, tested and documented."
    assert {e.depth for e in result.events} == {0, 1}
    assert "dev_lead" in {e.agent_name for e in result.events}
    assert "backend_coder" not in {e.agent_name for e in result.events}


def test_the_research_graph_runs_the_team_as_a_node() -> None:
    result = Runner(research_graph()).query_sync("agent frameworks")
    report = result.final_output["report"]
    assert report.startswith("topic: agent frameworks\nFindings:")
