"""The offline examples answer every run: three different ones in a row, two at once, any
question, and on a session's later turns; `plait serve` of one answers HTTP runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from plait import Runner
from plait.examples.router import QUERIES, UNSUPPORTED
from plait.examples.teams import (
    PR,
    code_review_coordinator,
    code_review_swarm,
    offline_router,
    project_team,
    research_graph,
)
from plait.stores import from_url

CLEAN = "def add(a, b):\n    return a + b"
SLOW = "for u in users: db.get(u)"

# Each example with three different requests and what its answer must hold for each.
CASES: dict[str, tuple[Callable[[], Any], list[tuple[str, str]]]] = {
    "coordinator": (
        code_review_coordinator,
        [
            (f"Review:\n{PR}", "possible SQL injection"),
            (f"Review:\n{CLEAN}", "security: no SQL injection found; performance: ok"),
            (f"Review:\n{SLOW}", "performance: N+1 query"),
        ],
    ),
    "swarm": (
        code_review_swarm,
        [
            (f"Review:\n{PR}", "Review complete: SQL injection, N+1 query, style ok."),
            (f"Review:\n{CLEAN}", "Review complete: no SQL injection, no N+1 query, style ok."),
            (f"Review:\n{SLOW}", "Review complete: no SQL injection, N+1 query, style ok."),
        ],
    ),
    "project": (
        project_team,
        [
            ("Ship user sign-up", "Sign-up shipped: built, tested and documented."),
            ("Add a search box", "Done (Add a search box): built, tested and documented."),
            ("Export to CSV.", "Done (Export to CSV): built, tested and documented."),
        ],
    ),
    "router": (
        offline_router,
        [
            (QUERIES[0], "It is cloudy in Tokyo, 18°C."),
            (QUERIES[1], "156 * 789 + 234 = 123318"),
            ("What is 2 times 21?", "2 * 21 = 42"),
        ],
    ),
}


def _output(result: Any) -> str:
    assert result.error is None, result.error
    output = result.final_output
    return output["report"] if isinstance(output, dict) else str(output)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_example_answers_three_different_runs_in_a_row(name: str) -> None:
    factory, cases = CASES[name]
    runner = Runner(factory())
    for question, expected in cases:
        assert expected in _output(runner.query_sync(question))


@pytest.mark.parametrize("name", sorted(CASES))
async def test_each_example_answers_two_concurrent_runs(name: str) -> None:
    factory, cases = CASES[name]
    runner = Runner(factory())
    (q1, e1), (q2, e2) = cases[:2]
    first, second = await asyncio.gather(runner.query(q1).collect(), runner.query(q2).collect())
    assert e1 in _output(first) and e2 in _output(second)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_example_answers_every_turn_of_a_session(name: str) -> None:
    factory, cases = CASES[name]
    runner = Runner(factory(), store=from_url("memory://"))
    for question, expected in cases:
        assert expected in _output(runner.query_sync(question, session_id="s1"))


def test_the_research_graph_answers_again_and_again() -> None:
    runner = Runner(research_graph())
    for topic in ("agents", "durable runs", "teams"):
        assert _output(runner.query_sync(topic)).startswith(f"topic: {topic}\nFindings:")


@pytest.mark.parametrize(
    ("question", "answer", "path"),
    [
        ("What's the weather in New York?", "I have no weather report for New York.", "Weather"),
        ("Is it raining?", "Which city?", "Weather"),
        ("What is 10 / 0?", "I could not calculate 10 / 0:", "Math"),
        ("Please calculate something", "Give me the arithmetic to do", "Math"),
        ("What's the capital of France?", UNSUPPORTED, ""),
    ],
)
def test_the_offline_router_has_an_answer_for_any_question(
    question: str, answer: str, path: str
) -> None:
    result = Runner(offline_router()).query_sync(question)
    assert _output(result).startswith(answer)
    expected = ("Router", f"{path}Agent") if path else ("Router",)
    assert result.events[-1].run_path == expected


def test_the_offline_router_states_what_its_tools_returned() -> None:
    result = Runner(offline_router()).query_sync("Paris weather, please")
    results = [e.output.message.message for e in result.events if e.output and e.output.message]
    (weather,) = [m.content for m in results if m and m.role == "tool" and m.name == "get_weather"]
    assert json.loads(weather) == {
        "city": "Paris",
        "temperature": "15°C",
        "condition": "Light rain",
    }
    assert result.final_output == "It is light rain in Paris, 15°C."
