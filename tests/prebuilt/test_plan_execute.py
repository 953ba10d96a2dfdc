"""Plan-Execute-Replan (Eino scenarios 44-45)."""

from __future__ import annotations

import asyncio

import pytest

from plait import Runner, tool
from plait.errors import ModelError, UsageError
from plait.models import OpenAIModel
from plait.prebuilt import executor, plan_execute, planner, replanner
from plait.prebuilt.plan_execute import EXECUTED_STEPS, PLAN
from plait.testing import ScriptedModel, call, reply


@tool
def search(query: str) -> str:
    """Search the web.

    Args:
        query: What to look for.
    """
    return f"found: {query}"


def _build(
    plan_model: ScriptedModel, exec_model: ScriptedModel, replan_model: ScriptedModel
) -> Runner:
    agent = plan_execute(
        planner(plan_model), executor(exec_model, [search]), replanner(replan_model)
    )
    return Runner(agent)


def test_plan_execute_replan_finishes_on_respond() -> None:
    plan_model = ScriptedModel([call("plan", {"steps": ["look up A", "look up B", "sum"]})])
    exec_model = ScriptedModel([call("search", {"query": "A"}), reply("A is 1"), reply("B is 2")])
    replan_model = ScriptedModel(
        [
            call("plan", {"steps": ["look up B", "sum"]}),
            call("respond", {"response": "A + B = 3"}),
        ]
    )
    runner = _build(plan_model, exec_model, replan_model)

    async def main() -> tuple[object, dict[str, object]]:
        stream = runner.query("What is A + B?")
        result = await stream.collect()
        return result, stream.context.session_values

    result, values = asyncio.run(main())
    assert result.error is None  # type: ignore[attr-defined]
    assert result.final_output == "A + B = 3"  # type: ignore[attr-defined]
    assert values[PLAN] == {"steps": ["look up B", "sum"]}
    assert values[EXECUTED_STEPS] == [
        {"step": "look up A", "result": "A is 1"},
        {"step": "look up B", "result": "B is 2"},
    ]
    # the executor is told the current step; the second time it is the revised plan's first
    assert exec_model.requests[0].messages[-1].content.endswith("Do this step now: look up A")
    assert exec_model.requests[2].messages[-1].content.endswith("Do this step now: look up B")
    assert "Step: look up A\nResult: A is 1" in replan_model.requests[1].messages[-1].content
    last = result.events[-1]  # type: ignore[attr-defined]
    assert last.action.break_loop.done and last.action.break_loop.from_agent == "replanner"
    assert last.output is None  # an action-only event


def test_an_unexpected_tool_call_from_the_replanner_is_an_error() -> None:
    runner = _build(
        ScriptedModel([call("plan", {"steps": ["one"]})]),
        ScriptedModel([reply("did one")]),
        ScriptedModel([call("foo", {})]),
    )
    result = runner.query_sync("q")
    assert isinstance(result.error, ModelError)
    assert "unexpected tool call: foo" in str(result.error)


def test_a_planner_that_does_not_plan_is_an_error() -> None:
    runner = _build(ScriptedModel([reply("no plan")]), ScriptedModel([]), ScriptedModel([]))
    result = runner.query_sync("q")
    assert isinstance(result.error, ModelError)
    assert "did not call ['plan']" in str(result.error)


def test_the_loop_is_bounded_by_max_iterations() -> None:
    replans = [call("plan", {"steps": ["again"]}) for _ in range(3)]
    agent = plan_execute(
        planner(ScriptedModel([call("plan", {"steps": ["again"]})])),
        executor(ScriptedModel([reply("did it")] * 3)),
        replanner(ScriptedModel(replans)),
        max_iterations=3,
    )
    result = Runner(agent).query_sync("q")
    assert result.error is None
    assert len([e for e in result.events if e.agent_name == "executor"]) == 3


def test_each_builder_takes_a_spec_string(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")
    for agent in (planner("openai:gpt-4o-mini"), replanner("openai:gpt-4o-mini")):
        assert isinstance(agent.model, OpenAIModel)  # type: ignore[attr-defined]
    assert isinstance(executor("openai:gpt-4o-mini").model, OpenAIModel)


def test_what_is_not_a_model_names_the_agent() -> None:
    with pytest.raises(UsageError, match=r"^agent 'planner' needs a model"):
        planner(object())  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"^agent 'checker' needs a model"):
        replanner(1.5, name="checker")  # type: ignore[arg-type]
