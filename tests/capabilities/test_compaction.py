"""Context compaction: over `max_tokens`, a ChatModelAgent's older messages become one summary
written by a model; tool calls and their results stay together; the run sees an event with
the token counts, counts the summary's usage, and keeps the compacted history across a pause."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import plait
from plait import (
    ChatModelAgent,
    Compaction,
    Hooks,
    Message,
    RunContext,
    Runner,
    RunOption,
    RunResult,
    Usage,
    tool,
)
from plait.errors import ModelError, UsageError
from plait.stores import SqliteStore
from plait.testing import FunctionModel, ScriptedModel, call, calls, reply

ROOT = Path(__file__).resolve().parent.parent.parent
PREFIX = "Summary of the earlier conversation:\n"
SYSTEM = "You help."


@pytest.fixture(params=[False, True], ids=["generate", "stream"])
def streaming(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _tokens(messages: Sequence[Message]) -> int:
    """Characters of contents, tool names and arguments, divided by 4, rounded up."""
    chars = sum(
        len(m.content) + sum(len(c.name) + len(c.arguments) for c in m.tool_calls) for m in messages
    )
    return math.ceil(chars / 4)


def _conversation(turns: int, size: int = 40) -> list[Message]:
    """Return `turns` user/assistant messages of `size` characters, ending with a user one."""
    messages = []
    for i in range(turns):
        make = Message.user if (turns - i) % 2 else Message.assistant
        messages.append(make(f"{i}".ljust(size, "x")))
    return messages


def _compactions(result: RunResult) -> list[Any]:
    return [
        e.output.custom["compaction"]
        for e in result.events
        if e.output is not None and isinstance(e.output.custom, dict)
    ]


@tool
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return "r" * 100


@tool
def approve(item: str, ctx: RunContext) -> str:
    """Ask a person to approve.

    Args:
        item: What to approve.
    """
    answer = ctx.interrupt({"approve": item})  # type: ignore[attr-defined]
    return f"{item}: {answer}"


def test_compaction_is_public() -> None:
    assert plait.Compaction is Compaction
    assert isinstance(Compaction(100), Hooks)


def test_under_the_limit_nothing_changes(streaming: bool) -> None:
    model = ScriptedModel([reply("done")])
    history = _conversation(5)
    agent = ChatModelAgent("A", model, instruction=SYSTEM, compaction=Compaction(1000))
    result = Runner(agent, enable_streaming=streaming).run_sync(history)
    assert result.error is None and result.final_output == "done"
    assert list(model.requests[0].messages) == [Message.system(SYSTEM), *history]
    assert _compactions(result) == []
    assert len(model.requests) == 1  # no summary call


def test_over_the_limit_older_messages_become_one_summary(streaming: bool) -> None:
    model = ScriptedModel([reply("the summary"), reply("done")])
    history = _conversation(8)
    prompt = [Message.system(SYSTEM), *history]
    assert _tokens(prompt) > 50
    agent = ChatModelAgent("A", model, instruction=SYSTEM, compaction=Compaction(50, keep_last=2))
    result = Runner(agent, enable_streaming=streaming).run_sync(history)
    assert result.error is None and result.final_output == "done"
    summary_call, answer_call = model.requests
    # the summary call: no tools, the dropped messages, not the kept ones
    assert summary_call.tools == ()
    told = "\n".join(m.content for m in summary_call.messages)
    assert all(m.content in told for m in history[:6])
    assert not any(m.content in told for m in history[6:])
    assert "summary" in summary_call.messages[0].content.lower()
    # the model's next request: system + summary + the last two messages
    sent = list(answer_call.messages)
    assert sent == [Message.system(SYSTEM), Message.user(PREFIX + "the summary"), *history[6:]]
    # the event, before the reply, with the estimated tokens before and after
    assert _compactions(result) == [{"before": _tokens(prompt), "after": _tokens(sent)}]
    events = [e for e in result.events if e.output is not None]
    assert events[0].output is not None and events[0].output.custom is not None
    assert events[0].agent_name == "A" and events[0].run_path == ("A",)
    assert events[-1].message is not None


def test_the_compacted_history_is_what_the_agent_goes_on_with() -> None:
    model = ScriptedModel([reply("S"), call("lookup", {"query": "q"}), reply("done")])
    history = _conversation(8)
    agent = ChatModelAgent(
        "A",
        model,
        instruction=SYSTEM,
        tools=[lookup],
        compaction=Compaction(70, keep_last=2),
    )
    result = Runner(agent).run_sync(history)
    assert result.error is None
    # the third request (after the tool) is under the limit: built on the compacted history
    last = list(model.requests[2].messages)
    assert last[:4] == [Message.system(SYSTEM), Message.user(PREFIX + "S"), *history[6:]]
    assert [m.role for m in last[4:]] == ["assistant", "tool"]
    assert len(_compactions(result)) == 1


def test_a_tool_call_and_its_results_are_never_split() -> None:
    model = ScriptedModel(
        [calls(call("lookup", {"query": "a"}), call("lookup", {"query": "b"})), "S", "done"]
    )
    question = Message.user("q" * 100)
    agent = ChatModelAgent(
        "A",
        model,
        instruction=SYSTEM,
        tools=[lookup],
        compaction=Compaction(60, keep_last=2),  # two messages: would start at a result
    )
    result = Runner(agent).run_sync([question])
    assert result.error is None
    assert _tokens(model.requests[0].messages) <= 60  # the first call was not compacted
    told = model.requests[1].messages[-1].content
    assert question.content in told and "r" * 100 not in told  # only the question dropped
    sent = model.requests[2].messages
    assert [m.role for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert sent[1].content == PREFIX + "S"
    assert [c.name for c in sent[2].tool_calls] == ["lookup", "lookup"]
    assert [m.tool_call_id for m in sent[3:]] == [c.id for c in sent[2].tool_calls]


def test_tool_calls_and_results_are_shown_to_the_summary_model() -> None:
    summarizer = ScriptedModel(["S"])
    model = ScriptedModel([call("lookup", {"query": "abc"}), "done"])
    agent = ChatModelAgent(
        "A",
        model,
        tools=[lookup],
        compaction=Compaction(30, keep_last=0, model=summarizer),
    )
    result = Runner(agent).run_sync([Message.user("find abc")])
    assert result.error is None
    told = summarizer.requests[0].messages[-1].content
    assert "find abc" in told and 'lookup({"query": "abc"})' in told and "r" * 100 in told
    # keep_last=0 keeps only the system message (none here) and the summary
    assert list(model.requests[1].messages) == [Message.user(PREFIX + "S")]


def test_a_separate_summary_model_writes_the_summary() -> None:
    summarizer = ScriptedModel([reply("short")])
    model = ScriptedModel([reply("done")])
    history = _conversation(8)
    agent = ChatModelAgent(
        "A",
        model,
        instruction=SYSTEM,
        compaction=Compaction(50, keep_last=2, model=summarizer),
    )
    result = Runner(agent).run_sync(history)
    assert result.error is None
    assert len(summarizer.requests) == 1 and len(model.requests) == 1
    assert summarizer.requests[0].tools == ()
    assert model.requests[0].messages[1] == Message.user(PREFIX + "short")


def test_without_a_model_the_summary_is_written_by_the_model_the_run_gives_the_agent() -> None:
    own = ScriptedModel([])
    given = ScriptedModel(["S", "done"])
    agent = ChatModelAgent("A", own, compaction=Compaction(50, keep_last=2))
    result = Runner(agent).run_sync(_conversation(8), options=[RunOption(model=given)])
    assert result.error is None and result.final_output == "done"
    assert own.requests == []
    assert given.requests[1].messages[0] == Message.user(PREFIX + "S")


def test_the_summary_calls_usage_counts_in_the_run() -> None:
    summarizer = ScriptedModel([reply("short", usage=Usage(input_tokens=100, output_tokens=7))])
    model = ScriptedModel([reply("done", usage=Usage(input_tokens=10, output_tokens=2))])
    agent = ChatModelAgent("A", model, compaction=Compaction(50, keep_last=2, model=summarizer))
    result = Runner(agent).run_sync(_conversation(8))
    assert result.error is None
    assert result.usage == Usage(input_tokens=110, output_tokens=9)


def test_a_failing_summary_call_ends_the_run_with_a_model_error() -> None:
    def broken(messages: list[Message], tools: list[Any]) -> str:
        raise RuntimeError("summary service down")

    model = ScriptedModel([reply("never")])
    agent = ChatModelAgent(
        "A", model, compaction=Compaction(50, keep_last=2, model=FunctionModel(broken))
    )
    result = Runner(agent).run_sync(_conversation(8))
    assert isinstance(result.error, ModelError)
    assert "summary service down" in str(result.error)
    assert model.requests == []


def test_a_tail_too_big_on_its_own_is_sent_as_it_is_after_compaction() -> None:
    model = ScriptedModel(["S", "done"])
    history = _conversation(6, size=200)
    agent = ChatModelAgent("A", model, compaction=Compaction(60, keep_last=3))
    result = Runner(agent).run_sync(history)
    assert result.error is None and result.final_output == "done"
    sent = list(model.requests[1].messages)
    assert sent == [Message.user(PREFIX + "S"), *history[3:]]
    [numbers] = _compactions(result)
    assert numbers["after"] == _tokens(sent) > 60


def test_with_nothing_older_than_the_tail_there_is_no_summary() -> None:
    model = ScriptedModel(["done"])
    history = _conversation(3, size=400)
    agent = ChatModelAgent("A", model, instruction=SYSTEM, compaction=Compaction(10))
    result = Runner(agent).run_sync(history)
    assert result.error is None
    assert list(model.requests[0].messages) == [Message.system(SYSTEM), *history]
    assert _compactions(result) == []


class _Counting(ScriptedModel):
    def count_tokens(self, messages: Sequence[Message]) -> Any:
        return 1000 * len(messages)


class _CountingAsync(ScriptedModel):
    async def count_tokens(self, messages: Sequence[Message]) -> int:
        return 1000 * len(messages)


@pytest.mark.parametrize("kind", [_Counting, _CountingAsync], ids=["sync", "async"])
def test_a_model_that_counts_tokens_is_asked_instead_of_the_estimate(
    kind: type[ScriptedModel],
) -> None:
    model = kind(["S", "done"])
    history = [Message.user("a"), Message.assistant("b"), Message.user("c")]
    agent = ChatModelAgent("A", model, compaction=Compaction(2500, keep_last=1))
    result = Runner(agent).run_sync(history)
    assert result.error is None
    assert _compactions(result) == [{"before": 3000, "after": 2000}]
    assert list(model.requests[1].messages) == [Message.user(PREFIX + "S"), history[-1]]


def test_a_count_that_is_not_an_int_ends_the_run_with_a_model_error() -> None:
    class Wrong(ScriptedModel):
        def count_tokens(self, messages: Sequence[Message]) -> Any:
            return "many"

    model = Wrong(["done"])
    result = Runner(ChatModelAgent("A", model, compaction=Compaction(10))).query_sync("hi")
    assert isinstance(result.error, ModelError)
    assert "count_tokens() returned str" in str(result.error)
    assert model.requests == []


async def test_compaction_survives_a_pause_and_resume(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    history = _conversation(8)

    def agent(model: ScriptedModel) -> ChatModelAgent:
        return ChatModelAgent(
            "A",
            model,
            instruction=SYSTEM,
            tools=[approve],
            compaction=Compaction(60, keep_last=2),
        )

    first = ScriptedModel(["the summary", call("approve", {"item": "x"})])
    async with SqliteStore(db) as store:
        paused = await Runner(agent(first), store=store).run(history).collect()
    assert paused.error is None and paused.checkpoint_id is not None
    assert len(_compactions(paused)) == 1

    second = ScriptedModel(["done"])
    async with SqliteStore(db) as store:  # another store object: the checkpoint is on disk
        runner = Runner(agent(second), store=store)
        resumed = await runner.resume(paused.checkpoint_id, value="yes").collect()
    assert resumed.error is None and resumed.final_output == "done"
    sent = list(second.requests[0].messages)
    assert sent[:4] == [Message.system(SYSTEM), Message.user(PREFIX + "the summary"), *history[6:]]
    assert [m.role for m in sent[4:]] == ["assistant", "tool"]
    assert sent[-1].content == "x: yes"
    assert _compactions(resumed) == []  # under the limit: not compacted again


@pytest.mark.parametrize(
    ("args", "kwargs", "wrong"),
    [
        ((0,), {}, "max_tokens"),
        ((-5,), {}, "max_tokens"),
        ((True,), {}, "max_tokens"),
        (("100",), {}, "max_tokens"),
        ((100,), {"keep_last": -1}, "keep_last"),
        ((100,), {"keep_last": 1.5}, "keep_last"),
        ((100,), {"model": object()}, "Compaction"),
    ],
)
def test_bad_settings_are_a_usage_error(
    args: tuple[Any, ...], kwargs: dict[str, Any], wrong: str
) -> None:
    with pytest.raises(UsageError, match=wrong):
        Compaction(*args, **kwargs)


def test_an_agent_refuses_a_compaction_that_is_not_one() -> None:
    with pytest.raises(UsageError, match="compaction"):
        ChatModelAgent("A", ScriptedModel([]), compaction=100)  # type: ignore[arg-type]


def _docs_example() -> tuple[str, dict[str, Any]]:
    """Run the example of docs/capabilities/compaction.md; return its code and
    what it defines."""
    page = (ROOT / "docs" / "capabilities" / "compaction.md").read_text()
    section = page.split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    namespace: dict[str, Any] = {"__name__": "compaction_example"}
    exec(
        compile(block.group(1), "docs/capabilities/compaction.md", "exec", dont_inherit=True),
        namespace,
    )
    return block.group(1), namespace


def test_the_docs_example_runs_and_prints_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    code, namespace = _docs_example()
    result = namespace["result"]
    assert result.error is None
    assert _compactions(result) == [namespace["compaction"]]
    assert result.events[-1].message is not None
    printed = capsys.readouterr().out.splitlines()
    for line in printed[:4]:  # the numbers, the roles and the summary, as the comments say
        assert f"# {line}" in code, line


def test_as_a_plain_hook_without_a_model_it_says_to_give_it_to_the_agent() -> None:
    model = ScriptedModel(["done"])
    result = Runner(ChatModelAgent("A", model, hooks=[Compaction(10)])).query_sync("hi")
    assert isinstance(result.error, UsageError)
    assert "ChatModelAgent(..., compaction=" in str(result.error)
    assert model.requests == []
