"""Plan-Execute-Replan (Eino scenarios 44-45)."""

from __future__ import annotations

import asyncio

import pytest

from plait import Runner, interrupt, tool
from plait.errors import LimitExceeded, MaxStepsExceeded, ModelError, UsageError
from plait.models import OpenAIModel
from plait.prebuilt import executor, plan_execute, planner, replanner
from plait.prebuilt.plan_execute import EXECUTED_STEPS, PLAN
from plait.stores import MemoryStore
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
    assert "unexpected tool call: 'foo'" in str(result.error)


def test_a_planner_that_does_not_plan_is_an_error() -> None:
    runner = _build(ScriptedModel([reply("no plan")]), ScriptedModel([]), ScriptedModel([]))
    result = runner.query_sync("q")
    assert isinstance(result.error, ModelError)
    assert "did not call ['plan']" in str(result.error)


def test_a_plan_not_finished_within_max_iterations_is_a_limit_error() -> None:
    replans = [call("plan", {"steps": ["again"]}) for _ in range(3)]
    agent = plan_execute(
        planner(ScriptedModel([call("plan", {"steps": ["again"]})])),
        executor(ScriptedModel([reply("did it")] * 3)),
        replanner(ScriptedModel(replans)),
        max_iterations=3,
        name="pe",
    )
    result = asyncio.run(Runner(agent).query("q").collect())
    assert isinstance(result.error, MaxStepsExceeded)
    assert isinstance(result.error, LimitExceeded)
    assert str(result.error) == (
        "plan_execute 'pe': the plan was not finished within 3 iterations of execute and replan"
    )
    assert result.error.limit == 3  # type: ignore[attr-defined]
    assert result.error.agent_name == "pe"  # type: ignore[attr-defined]
    assert len([e for e in result.events if e.agent_name == "executor"]) == 3
    assert result.events[-1].error == result.error


def test_a_response_in_the_last_iteration_is_not_an_error() -> None:
    agent = plan_execute(
        planner(ScriptedModel([call("plan", {"steps": ["one", "two"]})])),
        executor(ScriptedModel([reply("did one"), reply("did two")])),
        replanner(
            ScriptedModel(
                [call("plan", {"steps": ["two"]}), call("respond", {"response": "all done"})]
            )
        ),
        max_iterations=2,
    )
    result = asyncio.run(Runner(agent).query("q").collect())
    assert result.error is None
    assert result.final_output == "all done"


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


@pytest.mark.parametrize(
    ("role", "given", "shown"),
    [
        ("planner", None, "None"),
        ("executor", "executor", "'executor'"),
        ("replanner", search, "FunctionTool('search')"),
    ],
)
def test_what_is_not_an_agent_is_refused_when_plan_execute_is_built(
    role: str, given: object, shown: str
) -> None:
    parts: dict[str, object] = {
        "planner": planner(ScriptedModel([])),
        "executor": executor(ScriptedModel([])),
        "replanner": replanner(ScriptedModel([])),
    }
    parts[role] = given
    with pytest.raises(UsageError) as raised:
        plan_execute(**parts, name="pe")  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"plan_execute 'pe': {role} is {shown}, not an Agent (needs name, description and run)"
    )


def test_plan_execute_refuses_two_parts_with_one_name() -> None:
    with pytest.raises(UsageError, match=r"^plan_execute 'pe' has several agents named 'worker'"):
        plan_execute(
            planner(ScriptedModel([])),
            executor(ScriptedModel([]), name="worker"),
            replanner(ScriptedModel([]), name="worker"),
            name="pe",
        )


def test_a_pause_is_not_the_end_of_the_rounds_and_the_limit_holds_after_resuming() -> None:
    @tool
    def approve() -> str:
        """Ask a person."""
        return f"approved: {interrupt('ok?')}"

    agent = plan_execute(
        planner(ScriptedModel([call("plan", {"steps": ["ask", "again"]})])),
        executor(ScriptedModel([call("approve", {}), reply("asked"), reply("did it")]), [approve]),
        replanner(ScriptedModel([call("plan", {"steps": ["again"]})] * 2)),
        max_iterations=2,
    )
    runner = Runner(agent, store=MemoryStore())
    paused = runner.query_sync("q")
    assert paused.error is None and len(paused.interrupts) == 1
    assert paused.checkpoint_id is not None
    resumed = runner.resume_sync(paused.checkpoint_id, value="yes")
    assert isinstance(resumed.error, MaxStepsExceeded)
    assert "not finished within 2 iterations" in str(resumed.error)
