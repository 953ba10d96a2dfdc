"""`ChatModelAgent(loop_guard=LoopGuard(...))`: the same tool call asked for again and
again, and turns that bring nothing new, told to the model, paused for a person, or stopped."""

from __future__ import annotations

import re
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import pytest

import plait
from plait import AgentTool, ChatModelAgent, LoopGuard, Message, Runner, RunResult, tool
from plait.errors import LimitExceeded, LoopDetected, UsageError
from plait.stores import SqliteStore
from plait.testing import ScriptedModel, call, calls, reply

# What the tools ran, per test: a sync tool's thread that a stopped run abandoned may still
# append after its test ended, to that test's list, never to the next one's.
_RAN: ContextVar[list[str]] = ContextVar("ran")


def ran() -> list[str]:
    """Return what the tools ran in this test."""
    return _RAN.get()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    _RAN.set([])


@tool
def search(q: str) -> str:
    """Search.

    Args:
        q: What to search for.
    """
    ran().append(q)
    return f"results for {q}"


@tool
def find(q: str) -> str:
    """Find, always in vain.

    Args:
        q: What to find.
    """
    ran().append(q)
    return "nothing found"


@pytest.fixture(params=[False, True], ids=["generate", "stream"])
def streaming(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _same(n: int = 15) -> ScriptedModel:
    """A model that asks for search('same') n times, then answers."""
    return ScriptedModel([*(call("search", {"q": "same"}) for _ in range(n)), reply("done")])


def _agent(model: ScriptedModel, guard: LoopGuard, **kwargs: Any) -> ChatModelAgent:
    return ChatModelAgent("a", model, tools=[search, find], loop_guard=guard, **kwargs)


def _tool_texts(result: RunResult) -> list[str]:
    return [
        e.message.message.content
        for e in result.events
        if e.message is not None and e.message.message is not None and e.message.role == "tool"
    ]


# --- repeats ----------------------------------------------------------------------------


def test_stop_ends_the_run_at_the_third_same_call_before_it_runs(streaming: bool) -> None:
    model = _same()
    agent = _agent(model, LoopGuard(on="stop"), max_iterations=30)
    result = Runner(agent, enable_streaming=streaming).query_sync("go")
    error = result.error
    assert isinstance(error, LoopDetected) and isinstance(error, LimitExceeded)
    assert ran() == ["same", "same"]  # the third did not run
    assert len(model.requests) == 3  # and the model was not called again
    assert "'search'" in str(error) and "3 times in a row" in str(error)
    assert (error.tool_name, error.arguments, error.count, error.reason) == (
        "search",
        {"q": "same"},
        3,
        "repeat",
    )
    assert error.agent_name == "a"


def test_tell_runs_every_call_and_notes_the_third_once(streaming: bool) -> None:
    model = _same()
    agent = _agent(model, LoopGuard(), max_iterations=30)
    result = Runner(agent, enable_streaming=streaming).query_sync("go")
    assert result.error is None and result.final_output == "done"
    assert ran() == ["same"] * 15
    texts = _tool_texts(result)
    noted = [i for i, text in enumerate(texts) if "Note:" in text]
    assert noted == [2]  # once, on the third
    assert texts[2].startswith("results for same\n\nNote:")
    assert "'search'" in texts[2] and "repeating yourself" in texts[2]
    # the model read it: the note is in its history from the fourth call on
    assert "Note:" in model.requests[3].messages[-1].content


def test_pause_interrupts_before_the_third_call_with_the_loop_info(streaming: bool) -> None:
    model = _same()
    agent = _agent(model, LoopGuard(on="pause"), max_iterations=30)
    result = Runner(agent, enable_streaming=streaming).query_sync("go")
    assert result.error is None
    (pending,) = result.interrupts
    assert pending.info == {"loop": {"tool": "search", "arguments": {"q": "same"}, "count": 3}}
    assert pending.address.startswith("agent:a;tool:search:")
    assert ran() == ["same", "same"]
    assert len(model.requests) == 3


def test_different_arguments_or_tools_do_not_count() -> None:
    script: list[Message | str] = [
        call("search", {"q": "a"}),
        call("search", {"q": "b"}),
        call("search", {"q": "a"}),
        call("find", {"q": "a"}),
        call("search", {"q": "a"}),
        call("search", {"q": "a"}),
        call("find", {"q": "a"}),
        call("search", {"q": "a"}),
        call("search", {"q": "a"}),
        call("search", '{"q":  "a"}'),  # the same arguments, written otherwise: the third
        reply("done"),
    ]
    model = ScriptedModel(script)
    result = Runner(_agent(model, LoopGuard(on="stop"))).query_sync("go")
    assert isinstance(result.error, LoopDetected)
    assert len(ran()) == 9 and len(model.requests) == 10


def test_a_user_message_starts_the_count_again() -> None:
    model = ScriptedModel([call("search", {"q": "same"}), reply("done")])
    history = [
        Message.user("first"),
        call("search", {"q": "same"}, id="old1"),
        Message.tool("results for same", "old1"),
        call("search", {"q": "same"}, id="old2"),
        Message.tool("results for same", "old2"),
        Message.assistant("done before"),
        Message.user("again"),
    ]
    result = Runner(_agent(model, LoopGuard(max_repeats=2, on="stop"))).run_sync(history)
    assert result.error is None and ran() == ["same"]


def test_same_calls_in_one_reply_count_in_order() -> None:
    batch = calls(*(call("search", {"q": "same"}) for _ in range(3)))
    model = ScriptedModel([batch, reply("done")])
    result = Runner(_agent(model, LoopGuard(on="stop"))).query_sync("go")
    assert isinstance(result.error, LoopDetected) and result.error.count == 3
    assert len(ran()) <= 2  # the third of the reply never ran


def test_tell_notes_each_new_row_of_same_calls() -> None:
    script = [
        *(call("search", {"q": "x"}) for _ in range(4)),
        call("find", {"q": "y"}),
        *(call("search", {"q": "x"}) for _ in range(3)),
        reply("done"),
    ]
    result = Runner(_agent(ScriptedModel(script), LoopGuard())).query_sync("go")
    texts = _tool_texts(result)
    assert [i for i, text in enumerate(texts) if "Note:" in text] == [2, 7]


async def test_pause_resumed_true_runs_the_call_and_counts_from_zero(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "runs.db") as store:
        model = _same()
        agent = _agent(model, LoopGuard(on="pause"), max_iterations=30)
        paused = await Runner(agent, store=store).run([Message.user("go")]).collect()
        assert ran() == ["same"] * 2 and paused.checkpoint_id is not None

        runner = Runner(agent, store=store)  # another runner on the same store
        again = await runner.resume(paused.checkpoint_id, value=True).collect()
        # the approved third call ran; the 4th and 5th are the 1st and 2nd of a new row,
        # and the 6th pauses again
        assert ran() == ["same"] * 5
        (pending,) = again.interrupts
        assert pending.info["loop"]["count"] == 3
        assert len(model.requests) == 6
        assert again.checkpoint_id is not None

        stopped = await runner.resume(again.checkpoint_id, value=False).collect()
        assert isinstance(stopped.error, LoopDetected)
        assert stopped.error.tool_name == "search" and stopped.error.count == 3
        assert ran() == ["same"] * 5  # the refused call never ran
        assert len(model.requests) == 6


def test_pause_resumed_false_ends_the_run() -> None:
    runner = Runner(_agent(_same(), LoopGuard(on="pause")))
    paused = runner.query_sync("go")
    assert paused.checkpoint_id is not None
    result = runner.resume_sync(paused.checkpoint_id, value=False)
    assert isinstance(result.error, LoopDetected) and ran() == ["same", "same"]


def test_a_guard_inside_an_agent_tool_pauses_and_resumes_the_whole_run() -> None:
    inner_model = ScriptedModel([*(call("search", {"q": "s"}) for _ in range(3)), "inner done"])
    inner = ChatModelAgent(
        "inner", inner_model, tools=[search], loop_guard=LoopGuard(on="pause"), description="I."
    )
    outer_model = ScriptedModel([call("inner", {"request": "go"}), reply("outer done")])
    runner = Runner(ChatModelAgent("outer", outer_model, tools=[AgentTool(inner)]))
    paused = runner.query_sync("go")
    (pending,) = paused.interrupts
    assert pending.info["loop"]["tool"] == "search" and ran() == ["s", "s"]
    assert paused.checkpoint_id is not None
    done = runner.resume_sync(paused.checkpoint_id, value=True)
    assert done.error is None and done.final_output == "outer done"
    assert ran() == ["s", "s", "s"]


def test_stop_inside_an_agent_tool_ends_the_whole_run() -> None:
    inner_model = ScriptedModel([*(call("search", {"q": "s"}) for _ in range(3)), "inner done"])
    inner = ChatModelAgent(
        "inner", inner_model, tools=[search], loop_guard=LoopGuard(on="stop"), description="I."
    )
    outer_model = ScriptedModel([call("inner", {"request": "go"}), reply("outer done")])
    result = Runner(ChatModelAgent("outer", outer_model, tools=[AgentTool(inner)])).query_sync("x")
    assert isinstance(result.error, LoopDetected) and len(outer_model.requests) == 1


# --- idle turns ---------------------------------------------------------------------------


def _vain(n: int) -> ScriptedModel:
    """A model that asks find(q0), find(q1), ... — different calls, the same result."""
    return ScriptedModel([*(call("find", {"q": f"q{i}"}) for i in range(n)), reply("done")])


def test_idle_turns_stop_the_run_before_the_next_model_call(streaming: bool) -> None:
    model = _vain(10)
    guard = LoopGuard(max_idle_turns=2, on="stop")
    result = Runner(_agent(model, guard), enable_streaming=streaming).query_sync("go")
    # turn 1 is new, turns 2 and 3 are idle: the 4th model call is not made
    assert isinstance(result.error, LoopDetected)
    assert len(model.requests) == 3 and ran() == ["q0", "q1", "q2"]
    assert result.error.reason == "idle" and result.error.count == 2
    assert result.error.tool_name == "find" and result.error.arguments == {"q": "q2"}
    assert "2 turns in a row without a new tool result" in str(result.error)


def test_a_new_result_starts_the_idle_count_again() -> None:
    script = [
        call("find", {"q": "a"}),
        call("find", {"q": "b"}),  # idle 1
        call("search", {"q": "c"}),  # new
        call("find", {"q": "d"}),  # idle 1
        call("search", {"q": "e"}),  # new
        reply("done"),
    ]
    result = Runner(_agent(ScriptedModel(script), LoopGuard(max_idle_turns=2, on="stop")))
    assert result.query_sync("go").error is None


def test_idle_turns_tell_the_model_once() -> None:
    model = _vain(6)
    result = Runner(_agent(model, LoopGuard(max_idle_turns=2))).query_sync("go")
    assert result.error is None and len(ran()) == 6
    noted = [
        i
        for i, request in enumerate(model.requests)
        if "no new results" in request.messages[-1].content
    ]
    assert noted == [3]  # before the 4th call; the later calls do not get it again
    assert "Note: your last 2 turns" in model.requests[5].messages[6].content


async def test_idle_turns_pause_and_resume(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "runs.db") as store:
        model = _vain(10)
        agent = _agent(model, LoopGuard(max_idle_turns=2, on="pause"), max_iterations=30)
        runner = Runner(agent, store=store)
        paused = await runner.run([Message.user("go")]).collect()
        (pending,) = paused.interrupts
        assert pending.info == {
            "loop": {"tool": "find", "arguments": {"q": "q2"}, "count": 2, "reason": "idle"}
        }
        assert len(model.requests) == 3
        assert paused.checkpoint_id is not None

        again = await Runner(agent, store=store).resume(paused.checkpoint_id, value=True).collect()
        # the 4th call is made; turns 4 and 5 are idle again, so it pauses before the 6th
        assert len(model.requests) == 5 and again.interrupts
        assert again.checkpoint_id is not None

        stopped = await runner.resume(again.checkpoint_id, value=False).collect()
        assert isinstance(stopped.error, LoopDetected) and stopped.error.reason == "idle"
        assert len(model.requests) == 5


def test_a_new_run_of_the_agent_starts_fresh() -> None:
    model = ScriptedModel(
        [
            *(call("search", {"q": "s"}) for _ in range(2)),
            reply("one"),
            call("search", {"q": "s"}),
            reply("two"),
        ]
    )
    runner = Runner(_agent(model, LoopGuard(max_repeats=3, on="stop")))
    assert runner.query_sync("go", session_id="s1").final_output == "one"
    assert runner.query_sync("again", session_id="s1").final_output == "two"


# --- settings -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_repeats": 1}, "max_repeats"),
        ({"max_repeats": 0}, "max_repeats"),
        ({"max_repeats": 2.5}, "max_repeats"),
        ({"on": "warn"}, "on must be"),
        ({"max_idle_turns": 0}, "max_idle_turns"),
    ],
)
def test_bad_settings_are_a_usage_error(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        LoopGuard(**kwargs)


def test_loop_guard_must_be_a_loop_guard() -> None:
    with pytest.raises(UsageError, match="loop_guard"):
        ChatModelAgent("a", ScriptedModel([]), loop_guard={"on": "stop"})  # type: ignore[arg-type]


def test_the_names_are_public() -> None:
    assert plait.LoopGuard is LoopGuard
    assert plait.errors.LoopDetected is LoopDetected
    guard = LoopGuard()
    assert (guard.max_repeats, guard.max_idle_turns, guard.on) == (3, None, "tell")
    assert isinstance(guard.hooks(), plait.Hooks)


def test_the_documented_example_runs() -> None:
    page = (
        Path(__file__).resolve().parents[2] / "docs" / "capabilities" / "loop-guard.md"
    ).read_text()
    section = page.split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    namespace: dict[str, Any] = {"__name__": "production_example"}
    exec(
        compile(block.group(1), "docs/capabilities/loop-guard.md", "exec", dont_inherit=True),
        namespace,
    )
    assert isinstance(namespace["stopped"].error, LoopDetected)
    assert namespace["told"].final_output == "ok"
