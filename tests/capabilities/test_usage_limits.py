"""`Runner(limits=UsageLimits(...))`: requests, tokens and tool calls of a whole run, at
every depth and across pauses; the pre-call estimate of a prompt; the error it ends with."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import plait
from plait import (
    AgentTool,
    ChatModelAgent,
    Compaction,
    Message,
    RunContext,
    Runner,
    Team,
    Tool,
    ToolInfo,
    Usage,
    UsageLimits,
    tool,
)
from plait.capabilities.limits import estimate_tokens
from plait.core.checkpoint import Checkpoint
from plait.errors import LimitExceeded, PlaitError, UsageError, UsageLimitExceeded
from plait.stores import SqliteStore
from plait.testing import FunctionModel, ScriptedModel, call, calls, reply

RAN: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


@tool
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    RAN.append(query)
    return f"found {query}"


@tool
def approve(item: str) -> str:
    """Ask a person to approve.

    Args:
        item: What to approve.
    """
    answer = plait.interrupt({"approve": item})
    RAN.append(f"approve {item}")
    return f"{item}: {answer}"


class Counted(ScriptedModel):
    """A scripted model that reports a token count of 0 for any prompt (so only the
    replies' usage counts)."""

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return 0


@pytest.fixture(params=[False, True], ids=["generate", "stream"])
def streaming(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _lookups(n: int, answer: str = "done", usage: Usage | None = None) -> list[Message]:
    return [*(call("lookup", {"query": f"q{i}"}, usage=usage) for i in range(n)), reply(answer)]


def _run(
    model: ScriptedModel, limits: UsageLimits, *, streaming: bool = False, text: str = "go"
) -> plait.RunResult:
    agent = ChatModelAgent("a", model, tools=[lookup, approve])
    return Runner(agent, limits=limits, enable_streaming=streaming).query_sync(text)


# --- requests -----------------------------------------------------------------------------


def test_max_requests_equal_to_the_calls_made_passes(streaming: bool) -> None:
    model = ScriptedModel(_lookups(1))
    result = _run(model, UsageLimits(max_requests=2), streaming=streaming)
    assert result.error is None and result.final_output == "done"
    assert len(model.requests) == 2


def test_one_request_more_is_never_sent(streaming: bool) -> None:
    model = ScriptedModel(_lookups(2))
    result = _run(model, UsageLimits(max_requests=2), streaming=streaming)
    assert isinstance(result.error, UsageLimitExceeded)
    assert len(model.requests) == 2  # the third call was refused before it was sent
    assert RAN == ["q0", "q1"]
    assert result.error.limit_name == "max_requests"


def test_max_requests_zero_sends_nothing() -> None:
    model = ScriptedModel([reply("hi")])
    result = _run(model, UsageLimits(max_requests=0))
    assert isinstance(result.error, UsageLimitExceeded)
    assert model.requests == []


# --- tool calls ---------------------------------------------------------------------------


def test_max_tool_calls_equal_to_the_calls_made_passes(streaming: bool) -> None:
    result = _run(ScriptedModel(_lookups(2)), UsageLimits(max_tool_calls=2), streaming=streaming)
    assert result.error is None and RAN == ["q0", "q1"]


def test_one_tool_call_more_does_not_run(streaming: bool) -> None:
    model = ScriptedModel(_lookups(3))
    result = _run(model, UsageLimits(max_tool_calls=2), streaming=streaming)
    assert isinstance(result.error, UsageLimitExceeded)
    assert result.error.limit_name == "max_tool_calls" and result.error.limit == 2
    assert RAN == ["q0", "q1"]  # the third call never ran
    assert len(model.requests) == 3  # and the model was not called after it


def test_parallel_tool_calls_past_the_limit_do_not_run() -> None:
    batch = calls(*(call("lookup", {"query": f"p{i}"}) for i in range(3)))
    result = _run(ScriptedModel([batch, reply("done")]), UsageLimits(max_tool_calls=2))
    assert isinstance(result.error, UsageLimitExceeded)
    assert "p2" not in RAN  # refused; the run ends, so the others may be cut short too
    assert result.error.count == 3


# --- tokens -------------------------------------------------------------------------------


def test_input_tokens_equal_to_the_limit_pass(streaming: bool) -> None:
    model = Counted(_lookups(1, usage=Usage(input_tokens=10)))
    model.script[-1] = reply("done", Usage(input_tokens=10))
    result = _run(model, UsageLimits(max_input_tokens=20), streaming=streaming)
    assert result.error is None and result.final_output == "done"


def test_input_tokens_past_the_limit_end_the_run_after_the_reply(streaming: bool) -> None:
    model = Counted(_lookups(2, usage=Usage(input_tokens=10)))
    result = _run(model, UsageLimits(max_input_tokens=19), streaming=streaming)
    assert isinstance(result.error, UsageLimitExceeded)
    assert result.error.limit_name == "max_input_tokens"
    assert result.error.count == 20
    assert len(model.requests) == 2  # checked after the second reply
    assert RAN == ["q0"]  # whose tool call did not run


def test_output_tokens_equal_to_the_limit_pass_and_one_more_fails(streaming: bool) -> None:
    script = _lookups(1, usage=Usage(output_tokens=5))
    script[-1] = reply("done", Usage(output_tokens=5))
    result = _run(Counted(script), UsageLimits(max_output_tokens=10), streaming=streaming)
    assert result.error is None

    script[-1] = reply("done", Usage(output_tokens=6))
    result = _run(Counted(script), UsageLimits(max_output_tokens=10), streaming=streaming)
    assert isinstance(result.error, UsageLimitExceeded)
    assert result.error.limit_name == "max_output_tokens" and result.error.count == 11
    assert "max_output_tokens=10" in str(result.error)


# --- the estimate before each call --------------------------------------------------------


def test_a_huge_prompt_is_never_sent() -> None:
    model = ScriptedModel([reply("hi")])
    result = _run(model, UsageLimits(max_input_tokens=100), text="x" * 4000)
    assert isinstance(result.error, UsageLimitExceeded)
    assert result.error.limit_name == "max_input_tokens"
    assert result.error.count == 1000
    assert "estimated" in str(result.error)
    assert model.requests == []


def test_the_estimate_is_characters_over_four_with_an_equal_one_passing() -> None:
    model = ScriptedModel([reply("hi")])
    assert _run(model, UsageLimits(max_input_tokens=100), text="x" * 400).error is None
    assert len(model.requests) == 1
    refused = ScriptedModel([reply("hi")])
    result = _run(refused, UsageLimits(max_input_tokens=99), text="x" * 400)
    assert isinstance(result.error, UsageLimitExceeded) and refused.requests == []


def test_the_estimate_adds_the_tokens_the_run_spent_already() -> None:
    # 40 reported by the first reply, then a prompt of 29 characters ("go", the call
    # lookup {"query": "q"}, "found q"): about 8 tokens, 48 in all
    def script() -> ScriptedModel:
        first = call("lookup", {"query": "q"}, usage=Usage(input_tokens=40))
        return ScriptedModel([first, "done"])

    assert _run(script(), UsageLimits(max_input_tokens=48)).error is None
    model = script()
    result = _run(model, UsageLimits(max_input_tokens=47))
    assert isinstance(result.error, UsageLimitExceeded) and result.error.count == 48
    assert len(model.requests) == 1


async def test_estimate_tokens_counts_contents_and_tool_call_arguments() -> None:
    messages = [
        Message.user("a" * 10),
        call("lookup", {"query": "b"}, id="c1"),  # name 6 + '{"query": "b"}' 14
        Message.tool("c" * 6, "c1"),
    ]
    assert await estimate_tokens(messages) == 9  # ceil(36 / 4)
    assert await estimate_tokens([]) == 0


def test_a_model_that_counts_is_asked_instead(streaming: bool) -> None:
    class Counting(ScriptedModel):
        def __init__(self, script: list[Any], tokens: int) -> None:
            super().__init__(script)
            self.tokens = tokens
            self.counted: list[int] = []

        async def count_tokens(self, messages: Sequence[Message]) -> int:
            self.counted.append(len(messages))
            return self.tokens

    small = Counting([reply("hi")], tokens=500)
    result = _run(small, UsageLimits(max_input_tokens=499), streaming=streaming)
    assert isinstance(result.error, UsageLimitExceeded) and small.requests == []
    assert small.counted == [1]

    huge = Counting([reply("hi")], tokens=3)
    assert _run(huge, UsageLimits(max_input_tokens=3), text="x" * 4000).error is None


def test_a_bad_count_from_the_model_is_a_usage_error() -> None:
    class Bad(ScriptedModel):
        def count_tokens(self, messages: Sequence[Message]) -> Any:
            return "many"

    result = _run(Bad([reply("hi")]), UsageLimits(max_input_tokens=10))
    assert isinstance(result.error, UsageError) and "count_tokens" in str(result.error)


# --- every nesting level ------------------------------------------------------------------


def test_a_limit_reached_inside_an_agent_tool_ends_the_whole_run(streaming: bool) -> None:
    inner_model = ScriptedModel(_lookups(3, "inner done"))
    inner = ChatModelAgent("inner", inner_model, tools=[lookup], description="Looks up.")
    outer_model = ScriptedModel(
        [call("lookup", {"query": "outer"}), call("inner", {"request": "go"}), reply("all done")]
    )
    outer = ChatModelAgent("outer", outer_model, tools=[lookup, AgentTool(inner)])
    runner = Runner(outer, limits=UsageLimits(max_tool_calls=3), enable_streaming=streaming)
    result = runner.query_sync("go")
    # outer's lookup (1), the agent tool (2), inner's first lookup (3); the 4th is refused
    assert isinstance(result.error, UsageLimitExceeded)
    assert RAN == ["outer", "q0"]
    assert len(outer_model.requests) == 2  # outer never saw the agent tool's result
    assert result.final_output is None


def test_requests_of_a_coordinator_team_member_count_for_the_run() -> None:
    member_model = ScriptedModel(_lookups(2, "member done"))
    member = ChatModelAgent("helper", member_model, tools=[lookup], description="Helps.")
    lead_model = ScriptedModel([call("helper", {"request": "go"}), reply("team done")])
    lead = ChatModelAgent("lead", lead_model)
    team = Team.coordinator(name="team", description="A team.", coordinator=lead, members=[member])

    done = Runner(team, limits=UsageLimits(max_requests=5)).query_sync("go")
    assert done.error is None and done.final_output == "team done"

    member_model = ScriptedModel(_lookups(2, "member done"))
    member = ChatModelAgent("helper", member_model, tools=[lookup], description="Helps.")
    lead_model = ScriptedModel([call("helper", {"request": "go"}), reply("team done")])
    lead = ChatModelAgent("lead", lead_model)
    team = Team.coordinator(name="team", description="A team.", coordinator=lead, members=[member])
    result = Runner(team, limits=UsageLimits(max_requests=4)).query_sync("go")
    # lead 1, member 3 would be 4 ... the lead's second call is the 5th
    assert isinstance(result.error, UsageLimitExceeded)
    assert result.error.limit_name == "max_requests" and result.error.count == 5
    assert len(lead_model.requests) == 1 and len(member_model.requests) == 3


@pytest.mark.parametrize("streaming", [False, True])
def test_a_request_past_the_limit_inside_an_agent_tool_is_never_sent(streaming: bool) -> None:
    inner_model = ScriptedModel(_lookups(5, "inner done"))
    inner = ChatModelAgent("inner", inner_model, tools=[lookup], description="Looks up.")
    outer_model = ScriptedModel([call("inner", {"request": "go"}), reply("all done")])
    outer = ChatModelAgent("outer", outer_model, tools=[AgentTool(inner)])
    runner = Runner(outer, limits=UsageLimits(max_requests=3), enable_streaming=streaming)
    result = runner.query_sync("go")
    # outer 1, inner 2 and 3; inner's next request would be the 4th: refused, not sent
    assert isinstance(result.error, UsageLimitExceeded)
    assert result.error.limit_name == "max_requests" and result.error.count == 4
    assert len(outer_model.requests) == 1 and len(inner_model.requests) == 2


def test_a_request_past_the_limit_inside_a_team_member_is_never_sent() -> None:
    member_model = ScriptedModel(_lookups(5, "member done"))
    member = ChatModelAgent("helper", member_model, tools=[lookup], description="Helps.")
    lead_model = ScriptedModel([call("helper", {"request": "go"}), reply("team done")])
    lead = ChatModelAgent("lead", lead_model)
    team = Team.coordinator(name="team", description="A team.", coordinator=lead, members=[member])
    result = Runner(team, limits=UsageLimits(max_requests=2)).query_sync("go")
    assert isinstance(result.error, UsageLimitExceeded)
    assert result.error.count == 3
    assert len(lead_model.requests) == 1 and len(member_model.requests) == 1


# --- across pauses --------------------------------------------------------------------------


async def test_counts_hold_across_a_pause_and_a_resume(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "runs.db") as store:
        model = ScriptedModel(
            [
                call("lookup", {"query": "before"}),
                call("approve", {"item": "x"}),
                call("lookup", {"query": "after"}),
                reply("done"),
            ]
        )
        agent = ChatModelAgent("a", model, tools=[lookup, approve])
        first = Runner(agent, store=store, limits=UsageLimits(max_tool_calls=3))
        paused = await first.run([Message.user("go")]).collect()
        assert paused.interrupts and paused.error is None and paused.checkpoint_id is not None
        assert RAN == ["before"]

        # another runner (another process, say) resumes with the same limits: lookup (1)
        # and approve (2) ran; the second lookup is the third call and is allowed
        second = Runner(agent, store=store, limits=UsageLimits(max_tool_calls=2))
        result = await second.resume(paused.checkpoint_id, value="yes").collect()
        assert isinstance(result.error, UsageLimitExceeded)
        assert result.error.limit_name == "max_tool_calls" and result.error.count == 3
        assert RAN == ["before", "approve x"]  # the paused call counted once, when it ran


async def test_requests_hold_across_a_resume_and_the_resuming_runners_limits_apply(
    tmp_path: Path,
) -> None:
    async with SqliteStore(tmp_path / "runs.db") as store:
        model = ScriptedModel([call("approve", {"item": "x"}), reply("done")])
        agent = ChatModelAgent("a", model, tools=[approve])
        paused = await Runner(agent, store=store).run([Message.user("go")]).collect()
        assert paused.checkpoint_id is not None
        checkpoint = await Runner(agent, store=store).read_checkpoint(paused.checkpoint_id)
        assert checkpoint.snapshot().requests == 1

        limited = Runner(agent, store=store, limits=UsageLimits(max_requests=1))
        result = await limited.resume(paused.checkpoint_id, value="yes").collect()
        assert isinstance(result.error, UsageLimitExceeded)
        assert len(model.requests) == 1  # the call after the resume was the run's second


async def test_a_checkpoint_written_without_the_counts_still_reads() -> None:
    model = ScriptedModel(
        [call("lookup", {"query": "q"}), call("approve", {"item": "x"}), reply("done")]
    )
    runner = Runner(ChatModelAgent("a", model, tools=[lookup, approve]))
    paused = await runner.run([Message.user("go")]).collect()
    assert paused.checkpoint_id is not None
    record = await runner.store.get_checkpoint(paused.checkpoint_id)
    assert record is not None
    data = json.loads(record.data)
    assert (data["requests"], data["tool_calls"], data["model_calls"]) == (2, 1, 2)
    del data["requests"], data["tool_calls"]
    snapshot = Checkpoint.decode(json.dumps(data).encode(), "old").snapshot()
    assert (snapshot.requests, snapshot.tool_calls) == (2, 0)  # requests: the model calls


# --- the error, the settings ----------------------------------------------------------------


def test_the_error_names_the_limit_and_has_its_name_value_and_count() -> None:
    result = _run(ScriptedModel(_lookups(2)), UsageLimits(max_requests=2))
    error = result.error
    assert isinstance(error, UsageLimitExceeded) and isinstance(error, LimitExceeded)
    assert "max_requests=2" in str(error)
    assert re.search(r"model call 3\b", str(error))
    assert (error.limit_name, error.limit, error.count) == ("max_requests", 2, 3)
    assert error.details() == {"limit_name": "max_requests", "limit": 2, "count": 3}
    assert plait.errors.UsageLimitExceeded is UsageLimitExceeded


def test_the_error_survives_json() -> None:
    from pydantic import TypeAdapter

    error = UsageLimitExceeded("over", limit_name="max_tool_calls", limit=1, count=2)
    adapter = TypeAdapter(PlaitError)
    back = adapter.validate_python(adapter.dump_python(error))
    assert isinstance(back, UsageLimitExceeded) and back == error
    assert (back.limit_name, back.limit, back.count) == ("max_tool_calls", 1, 2)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_requests": -1},
        {"max_tool_calls": 1.5},
        {"max_input_tokens": True},
        {"max_output_tokens": "9"},
    ],
)
def test_bad_limits_are_a_usage_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError, match=next(iter(kwargs))):
        UsageLimits(**kwargs)


def test_limits_must_be_usage_limits() -> None:
    agent = ChatModelAgent("a", ScriptedModel([]))
    with pytest.raises(UsageError, match="UsageLimits"):
        Runner(agent, limits={"max_requests": 1})  # type: ignore[arg-type]


def test_no_limits_add_nothing_and_limits_are_a_hook_last_in_the_chain() -> None:
    agent = ChatModelAgent("a", ScriptedModel([]))
    assert Runner(agent, limits=UsageLimits())._hooks.empty
    assert Runner(agent)._hooks.empty

    class Mine(plait.Hooks):
        async def before_tool(self, ctx: RunContext, call: Any) -> None:
            return None

    chain = Runner(agent, hooks=[Mine()], limits=UsageLimits(max_tool_calls=1))._hooks
    owners = [type(fn.__self__).__name__ for fn in chain.before_tool]  # type: ignore[attr-defined]
    assert owners == [
        "Mine",
        "_LimitHooks",
    ]
    assert plait.UsageLimits is UsageLimits
    assert isinstance(UsageLimits(max_requests=1).hooks(), plait.Hooks)


def test_tools_are_offered_as_before() -> None:
    seen: list[tuple[ToolInfo, ...]] = []

    class Spy(ScriptedModel):
        async def generate(self, messages: Any, *, tools: Any = (), **options: Any) -> Message:
            seen.append(tuple(tools))
            return await super().generate(messages, tools=tools, **options)

    assert _run(Spy([reply("hi")]), UsageLimits(max_requests=1)).error is None
    assert [t.name for t in seen[0]] == ["lookup", "approve"]


def _docs_example(name: str) -> dict[str, Any]:
    """Run the first example of the page docs/capabilities/`name`.md."""
    page = (
        Path(__file__).resolve().parents[2] / "docs" / "capabilities" / f"{name}.md"
    ).read_text()
    section = page.split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    namespace: dict[str, Any] = {"__name__": "production_example"}
    exec(
        compile(block.group(1), f"docs/capabilities/{name}.md", "exec", dont_inherit=True),
        namespace,
    )
    return namespace


def test_the_documented_example_runs() -> None:
    namespace = _docs_example("usage-limits")
    assert isinstance(namespace["result"].error, UsageLimitExceeded)


@pytest.fixture(params=[False, True], ids=["untraced", "traced"])
def traced(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Run the test as it is, and with tracing on (its hook wraps the runner's)."""
    if not request.param:
        yield False
        return
    from opentelemetry.sdk.trace import TracerProvider

    from plait import tracing

    tracing.instrument(TracerProvider())
    try:
        yield True
    finally:
        tracing.uninstrument()


async def test_the_input_estimate_sees_the_request_an_agents_compaction_leaves(
    traced: bool,
) -> None:
    """The limits run innermost: an agent's compaction shrinks the prompt before the
    estimate, so a call that fits once compacted is sent; without compaction it is not
    (with tracing on too, whose hook wraps every runner's)."""
    conversation = [
        (Message.user if i % 2 == 0 else Message.assistant)(f"{i}".ljust(400, "x"))
        for i in range(9)
    ]  # about 900 tokens, over the limit of 300
    summaries: list[str] = []

    def answer(messages: list[Message], tools: list[object]) -> str:
        if not tools and len(messages) == 2 and messages[0].role == "system":
            summaries.append(messages[1].content)  # the summary call
            return "They talked."
        return "done"

    limits = UsageLimits(max_input_tokens=300)
    compacted = ChatModelAgent(
        "a",
        model=FunctionModel(answer),
        tools=[_noop_tool()],
        compaction=Compaction(max_tokens=200, keep_last=1),
    )
    result = await Runner(compacted, limits=limits).run(conversation).collect()
    assert result.error is None and result.final_output == "done"
    assert len(summaries) == 1

    plain = ChatModelAgent("a", model=FunctionModel(answer), tools=[_noop_tool()])
    refused = await Runner(plain, limits=limits).run(conversation).collect()
    assert isinstance(refused.error, UsageLimitExceeded)
    assert refused.error.limit_name == "max_input_tokens"


def _noop_tool() -> Tool:
    @tool
    def noop() -> str:
        """Do nothing."""
        return ""

    return noop
