"""Per-run options: RunOption for every ChatModelAgent or one by name, merged field by field,
never changing the agents, kept across pauses and resumes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from plait import (
    ChatModelAgent,
    Message,
    Runner,
    RunOption,
    SequentialAgent,
    interrupt,
    tool,
)
from plait.errors import MaxIterationsExceeded, ResumeError, UsageError
from plait.stores import MemoryStore
from plait.testing import FunctionModel, ScriptedModel, call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def mul(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


@tool
def ask() -> str:
    """Ask a person."""
    return str(interrupt("ok?"))


def _system(model: ScriptedModel | FunctionModel, request: int = 0) -> str:
    first = model.requests[request].messages[0]
    assert first.role == "system"
    return first.content


def test_an_option_for_every_agent_and_one_by_name_merge_field_by_field() -> None:
    a_model, b_model = ScriptedModel(["a"]), ScriptedModel(["b"])
    a = ChatModelAgent("A", a_model, instruction="A's own")
    b = ChatModelAgent("B", b_model, instruction="B's own", model_options={"top_p": 1})
    options = [
        RunOption(agent="B", instruction="B by name, {tone}"),  # named: wins though earlier
        RunOption(instruction="Everyone, {tone}", model_options={"temperature": 0}),
        RunOption(agent="B", model_options={"temperature": 1}),  # later: wins over earlier
    ]
    result = Runner(SequentialAgent("S", [a, b])).run_sync(
        [Message.user("q")], session_values={"tone": "briefly"}, options=options
    )
    assert result.error is None
    assert _system(a_model) == "Everyone, briefly"
    assert a_model.requests[0].options == {"temperature": 0}
    assert _system(b_model) == "B by name, briefly"
    assert b_model.requests[0].options == {"top_p": 1, "temperature": 1}


def test_an_option_changes_the_model_the_limit_and_the_tools() -> None:
    own = ScriptedModel([])
    other = ScriptedModel([call("mul", {"a": 2, "b": 3}), reply("6")])
    agent = ChatModelAgent("A", own, tools=[add], exit_tool=True)
    runner = Runner(agent)
    result = runner.query_sync("2*3?", options=[RunOption(model=other, tools=[mul])])
    assert result.final_output == "6" and own.requests == []
    assert [t.name for t in other.requests[0].tools] == ["mul", "exit"]
    assert other.requests[1].messages[-1].content == "6"
    looping = ScriptedModel([call("add", {"a": 1, "b": 1})] * 3)
    limited = runner.query_sync("q", options=[RunOption(model=looping, max_iterations=2)])
    assert isinstance(limited.error, MaxIterationsExceeded)
    assert len(looping.requests) == 2


def test_extra_tools_are_offered_besides_the_agents_tools_and_add_up() -> None:
    def halve(n: int) -> float:
        """Halve a number."""
        return n / 2

    model = ScriptedModel([call("mul", {"a": 2, "b": 3}), call("halve", {"n": 6}), reply("3")])
    agent = ChatModelAgent("A", model, tools=[add], exit_tool=True)
    options = [
        RunOption(agent="A", extra_tools=[halve]),  # named: after those for every agent
        RunOption(extra_tools=[mul]),
    ]
    result = Runner(agent).query_sync("(2*3)/2?", options=options)
    assert result.error is None and result.final_output == "3"
    assert [t.name for t in model.requests[0].tools] == ["add", "mul", "halve", "exit"]
    assert [m.content for m in model.requests[2].messages if m.role == "tool"] == ["6", "3.0"]
    assert [t.name for t in agent.tools] == ["add", "exit"]  # the agent is as it was built
    replaced = ScriptedModel([reply("ok")])
    Runner(agent).query_sync(
        "q", options=[RunOption(model=replaced, tools=[mul], extra_tools=[add])]
    )
    assert [t.name for t in replaced.requests[0].tools] == ["mul", "add", "exit"]


@pytest.mark.parametrize("name", ["add", "exit"])
def test_an_extra_tool_named_like_a_tool_of_the_agent_ends_the_run(name: str) -> None:
    model = ScriptedModel([reply("never asked")])
    agent = ChatModelAgent("A", model, tools=[add], exit_tool=True)
    clash = tool(name=name)(lambda: "x")
    result = Runner(agent).query_sync("q", options=[RunOption(extra_tools=[clash])])
    assert isinstance(result.error, UsageError)
    assert f"agent 'A': the run's extra tool '{name}'" in str(result.error)
    assert model.requests == []


async def test_extra_tools_are_not_saved_a_resume_gives_them_again() -> None:
    model = ScriptedModel([call("ask", {}), reply("asked")])
    runner = Runner(ChatModelAgent("A", model), store=MemoryStore())
    paused = await runner.query("q", options=[RunOption(extra_tools=[ask])]).collect()
    assert paused.interrupts and paused.checkpoint_id is not None
    assert (await runner.read_checkpoint(paused.checkpoint_id)).run_options == []
    again = [RunOption(extra_tools=[ask])]
    done = await runner.resume(paused.checkpoint_id, value="yes", options=again).collect()
    assert done.error is None and done.final_output == "asked"
    assert model.requests[1].messages[-1].content == "yes"


def test_an_option_naming_another_agent_leaves_this_one_alone() -> None:
    model = ScriptedModel(["hi"])
    agent = ChatModelAgent("A", model, instruction="own")
    Runner(agent).query_sync("q", options=[RunOption(agent="B", instruction="not yours")])
    assert _system(model) == "own"


async def test_options_never_change_the_agent_even_while_it_runs_elsewhere() -> None:
    both_called = asyncio.Event()
    calls = 0

    async def answer(messages: list[Message], tools: list[Any]) -> str:
        nonlocal calls
        calls += 1
        if calls == 2:
            both_called.set()
        await both_called.wait()  # both runs are inside the agent at once
        return "done"

    model = FunctionModel(answer)
    agent = ChatModelAgent("A", model, instruction="own", tools=[add])
    with_options = Runner(agent).query(
        "first", options=[RunOption(instruction="changed", tools=[mul], max_iterations=1)]
    )
    plain = Runner(agent).query("second")
    await asyncio.gather(with_options.collect(), plain.collect())
    seen = {r.messages[-1].content: r for r in model.requests}
    assert seen["first"].messages[0].content == "changed"
    assert [t.name for t in seen["first"].tools] == ["mul"]
    assert seen["second"].messages[0].content == "own"
    assert [t.name for t in seen["second"].tools] == ["add"]
    assert (agent.instruction, agent.max_iterations, agent.model) == ("own", 20, model)
    assert [t.name for t in agent.tools] == ["add"]


async def test_saved_options_hold_across_a_pause_and_a_resume_adds_the_rest() -> None:
    a_model = ScriptedModel([call("ask", {}), reply("asked")])
    b_model = ScriptedModel(["b done"])
    a = ChatModelAgent("A", ScriptedModel([]), instruction="A's own")
    b = ChatModelAgent("B", b_model, instruction="B's own")
    store = MemoryStore()
    runner = Runner(SequentialAgent("S", [a, b]), store=store)
    options = [
        RunOption(instruction="From the run", model_options={"temperature": 0}),
        RunOption(agent="A", model=a_model, tools=[ask], max_iterations=5),
        RunOption(agent="B", model="local"),
    ]
    paused = await runner.query("q", options=options).collect()
    assert paused.interrupts and paused.checkpoint_id is not None
    saved = (await runner.read_checkpoint(paused.checkpoint_id)).run_options
    assert [(o["agent"], o["instruction"], o["model"]) for o in saved] == [
        (None, "From the run", None),
        ("A", None, None),  # its model object and tools are not saved
        ("B", None, "local"),
    ]
    assert saved[0]["model_options"] == {"temperature": 0} and saved[1]["max_iterations"] == 5
    again = [RunOption(agent="A", model=a_model, tools=[ask]), RunOption(agent="B", model=b_model)]
    done = await runner.resume(paused.checkpoint_id, value="yes", options=again).collect()
    assert done.final_output == "b done"
    assert a_model.requests[1].options == {"temperature": 0}
    assert a_model.requests[1].messages[-1].content == "yes"
    assert _system(b_model) == "From the run"
    assert b_model.requests[0].options == {"temperature": 0}


@pytest.mark.parametrize("scope", [None, "A"], ids=["every-agent", "by-name"])
async def test_a_resume_without_the_model_object_the_run_had_is_refused_and_stays_paused(
    scope: str | None,
) -> None:
    own = ScriptedModel([])  # the agent's own model must not be called
    agent = ChatModelAgent("A", own, tools=[ask])
    runner = Runner(agent, store=MemoryStore())
    given = ScriptedModel([call("ask", {})])
    paused = await runner.query("q", options=[RunOption(agent=scope, model=given)]).collect()
    assert paused.interrupts and paused.checkpoint_id is not None
    checkpoint_id = paused.checkpoint_id
    whose = "every agent" if scope is None else "agent 'A'"
    with pytest.raises(ResumeError, match=f"model object .* for {whose}") as refused:
        await runner.resume(checkpoint_id, value="yes").collect()
    assert "resume(..., options=[RunOption(" in str(refused.value)
    assert refused.value.agent_name == scope
    named_b = [RunOption(agent="B", model=ScriptedModel([]))]  # another agent's: not enough
    with pytest.raises(ResumeError, match="model object"):
        await runner.resume(checkpoint_id, value="yes", options=named_b).collect()
    assert own.requests == []
    again = ScriptedModel([call("ask", {}), reply("asked twice")])
    second = await runner.resume(
        checkpoint_id, value="yes", options=[RunOption(agent=scope, model=again)]
    ).collect()  # still paused: resumable with the model given again
    assert second.interrupts and second.checkpoint_id is not None
    with pytest.raises(ResumeError, match="model object"):  # a new pause asks for it again
        await runner.resume(second.checkpoint_id, value="yes").collect()
    done = await runner.resume(
        second.checkpoint_id, value="yes", options=[RunOption(model=again)]
    ).collect()
    assert done.error is None and done.final_output == "asked twice"
    assert own.requests == []


async def test_only_a_model_object_the_run_used_is_asked_for_again() -> None:
    asker = ChatModelAgent("A", ScriptedModel([call("ask", {}), reply("asked")]), tools=[ask])
    b_model = ScriptedModel(["b done"])
    runner = Runner(
        SequentialAgent("S", [asker, ChatModelAgent("B", b_model)]), store=MemoryStore()
    )
    options = [
        RunOption(agent="B", model=ScriptedModel([])),  # replaced by the next one for B
        RunOption(agent="B", model="local"),
        RunOption(instruction="From the run"),
    ]
    paused = await runner.query("q", options=options).collect()
    assert paused.checkpoint_id is not None
    saved = (await runner.read_checkpoint(paused.checkpoint_id)).run_options
    assert [(o["agent"], o["model"], o["model_object"]) for o in saved] == [
        ("B", "local", False),
        (None, None, False),
    ]
    again = [RunOption(agent="B", model=b_model)]  # not needed: given so "local" is not run
    done = await runner.resume(paused.checkpoint_id, value="yes", options=again).collect()
    assert done.error is None and done.final_output == "b done"
    assert _system(b_model) == "From the run"


def test_bad_options_are_refused_at_the_call() -> None:
    runner = Runner(ChatModelAgent("A", ScriptedModel([])))
    with pytest.raises(UsageError, match="max_iterations"):
        RunOption(max_iterations=0)
    with pytest.raises(UsageError, match="extra_tools must be a list"):
        RunOption(extra_tools="add")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="needs a model"):
        RunOption(model=42)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="list of RunOption"):
        runner.query("q", options=RunOption(instruction="x"))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="unknown model provider"):
        runner.query("q", options=[RunOption(model="nope:x")])
    with pytest.raises(UsageError, match=r"options\[0\]"):
        runner.resume("c1", options=["x"])  # type: ignore[list-item]


def test_an_option_gives_one_agent_a_structured_output_for_this_run_only() -> None:
    from pydantic import BaseModel

    class Weather(BaseModel):
        city: str
        degrees: int

    model = ScriptedModel(
        [
            '{"city": "Oslo"}',  # invalid: told to the model, which answers again
            '{"city": "Oslo", "degrees": 4}',
            "plain text again",
        ],
        supports_output_schema=True,
    )
    agent = ChatModelAgent("A", model, output_retries=1)
    runner = Runner(agent)
    result = runner.query_sync("weather?", options=[RunOption(agent="A", output_type=Weather)])
    assert result.error is None
    assert result.final_output == Weather(city="Oslo", degrees=4)
    assert model.requests[0].options["output_schema"].name == "Weather"
    assert "degrees" in model.requests[1].messages[-1].content  # the retry said what was wrong
    plain = runner.query_sync("weather?")
    assert plain.final_output == "plain text again"  # the agent itself is left as it was
    assert "output_schema" not in model.requests[2].options
    with pytest.raises(UsageError, match="output_type"):
        RunOption(output_type=int)
