"""Record and replay: a cassette records every model and tool call of a run as JSON lines,
replays them without calling a model or running a tool, names the step where a run diverges,
forks at a step, and turns into an eval case."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from plait import (
    AgentContext,
    AgentEvent,
    AgentTool,
    Approval,
    ChatModelAgent,
    Compaction,
    Hooks,
    Message,
    ParallelAgent,
    Runner,
    RunOption,
    RunResult,
    ToolCall,
    Usage,
    interrupt,
    tool,
)
from plait.cassette import Cassette, Mode
from plait.errors import CassetteCorrupt, CassetteDivergence, ModelError, PlaitError, UsageError
from plait.testing import FunctionModel, ScriptedModel, call, calls, reply

ROOT = Path(__file__).resolve().parents[2]


class Counter:
    """Tools that count how often they really ran."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    def tools(self) -> list[Any]:
        @tool
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            self.runs.append("add")
            return a + b

        @tool
        def weather(city: str) -> str:
            """Tell the weather in a city."""
            self.runs.append("weather")
            return f"sunny in {city}"

        return [add, weather]


def no_model(messages: list[Message], tools: list[Any]) -> Message:
    raise AssertionError("a replayed run must not call its model")


def silent() -> FunctionModel:
    return FunctionModel(no_model)


def shape(result: RunResult) -> list[tuple[Any, ...]]:
    """Summarise a run's events: who, where, what message, what error."""

    async def each() -> list[tuple[Any, ...]]:
        return [await _one(event) for event in result.events]

    return asyncio.run(each())


async def _one(event: AgentEvent) -> tuple[Any, ...]:
    message = None if event.message is None else await event.message.get_message()
    said = None
    if message is not None:
        said = (
            message.role,
            message.content,
            tuple((c.id, c.name, c.arguments) for c in message.tool_calls),
            message.tool_call_id,
            message.usage,
        )
    error = None if event.error is None else (type(event.error).__name__, str(event.error))
    action = None
    if event.action is not None:
        transfer = event.action.transfer_to_agent
        action = (event.action.exit, None if transfer is None else transfer.dest_agent_name)
    return (event.agent_name, event.run_path, event.depth, said, error, action)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def two_steps() -> ScriptedModel:
    return ScriptedModel(
        [
            call("add", {"a": 2, "b": 3}, usage=Usage(input_tokens=10, output_tokens=2)),
            reply("2 + 3 = 5", usage=Usage(input_tokens=20, output_tokens=4)),
        ]
    )


def record_sum(path: Path) -> tuple[RunResult, Counter]:
    counter = Counter()
    agent = ChatModelAgent("calc", two_steps(), instruction="You add.", tools=counter.tools())
    result = Runner(agent, cassette=Cassette(path, mode="record")).query_sync("What is 2 + 3?")
    assert result.error is None
    return result, counter


# --- record and replay ------------------------------------------------------------------------


def test_recording_writes_one_json_line_per_step_in_run_order(tmp_path: Path) -> None:
    path = tmp_path / "sum.jsonl"
    record_sum(path)
    steps = lines(path)
    assert [(s["step"], s["kind"]) for s in steps] == [(1, "model"), (2, "tool"), (3, "model")]
    first, used, last = steps
    assert first["agent"] == "calc"
    assert [m["content"] for m in first["request"]["messages"]] == ["You add.", "What is 2 + 3?"]
    assert [t["name"] for t in first["request"]["tools"]] == ["add", "weather"]
    assert first["request"]["options"] == {}
    assert first["reply"]["tool_calls"][0]["name"] == "add"
    assert first["reply"]["usage"] == {"input_tokens": 10, "output_tokens": 2}
    assert first["input"] == [{"role": "user", "content": "What is 2 + 3?", "tool_calls": []}]
    assert (used["name"], json.loads(used["arguments"]), used["result"]) == (
        "add",
        {"a": 2, "b": 3},
        "5",
    )
    assert used["call_id"] == first["reply"]["tool_calls"][0]["id"]
    assert last["reply"]["content"] == "2 + 3 = 5"
    assert last["reply"]["usage"] == {"input_tokens": 20, "output_tokens": 4}


def test_replay_gives_the_same_events_without_calling_the_model_or_the_tools(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sum.jsonl"
    recorded, _ = record_sum(path)
    before = path.read_bytes()
    counter = Counter()
    agent = ChatModelAgent("calc", silent(), instruction="You add.", tools=counter.tools())
    replayed = Runner(agent, cassette=Cassette(path, mode="replay")).query_sync("What is 2 + 3?")
    assert replayed.error is None
    assert shape(replayed) == shape(recorded)
    assert (replayed.final_output, replayed.usage) == (recorded.final_output, recorded.usage)
    assert counter.runs == []
    assert path.read_bytes() == before  # replaying writes nothing


def test_auto_records_when_the_file_is_missing_and_replays_when_it_exists(
    tmp_path: Path,
) -> None:
    path = tmp_path / "auto.jsonl"
    counter = Counter()
    first = ChatModelAgent("calc", two_steps(), tools=counter.tools())
    cassette = Cassette(path, mode="auto")
    assert not cassette.replaying
    recorded = Runner(first, cassette=cassette).query_sync("What is 2 + 3?")
    assert path.exists() and counter.runs == ["add"]
    again = Cassette(path)  # "auto" is the default
    assert again.replaying
    second = ChatModelAgent("calc", silent(), tools=counter.tools())
    replayed = Runner(second, cassette=again).query_sync("What is 2 + 3?")
    assert shape(replayed) == shape(recorded)
    assert counter.runs == ["add"]


def test_record_starts_the_file_afresh_then_appends_every_run(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text("old content\n")
    model = ScriptedModel([reply("one"), reply("two")])
    runner = Runner(ChatModelAgent("bot", model), cassette=Cassette(path, mode="record"))
    runner.query_sync("first")
    runner.query_sync("second")
    steps = lines(path)
    assert [s["step"] for s in steps] == [1, 2]
    assert [s["input"][0]["content"] for s in steps] == ["first", "second"]
    replay = Runner(ChatModelAgent("bot", silent()), cassette=Cassette(path, mode="replay"))
    assert replay.query_sync("first").final_output == "one"
    assert replay.query_sync("second").final_output == "two"


def test_streaming_records_the_merged_reply_and_replays_it(tmp_path: Path) -> None:
    path = tmp_path / "stream.jsonl"
    counter = Counter()
    model = ScriptedModel([call("weather", {"city": "Paris"}), reply("It is sunny in Paris.")])
    agent = ChatModelAgent("w", model, tools=counter.tools())
    recorded = Runner(
        agent, enable_streaming=True, cassette=Cassette(path, mode="record")
    ).query_sync("Weather?")
    assert recorded.error is None
    assert lines(path)[2]["reply"]["content"] == "It is sunny in Paris."
    replay_agent = ChatModelAgent("w", silent(), tools=counter.tools())
    replayed = Runner(
        replay_agent, enable_streaming=True, cassette=Cassette(path, mode="replay")
    ).query_sync("Weather?")
    assert replayed.error is None
    assert all(
        e.message.is_streaming
        for e in replayed.events
        if e.message and e.depth == 0 and e.message.role == "assistant"
    )
    assert shape(replayed) == shape(recorded)
    assert counter.runs == ["weather"]


def test_model_errors_are_recorded_and_replayed_as_the_same_error(tmp_path: Path) -> None:
    path = tmp_path / "error.jsonl"

    def down(messages: list[Message], tools: list[Any]) -> Message:
        raise ModelError("provider down", agent_name="bot", status_code=503)

    recorded = Runner(
        ChatModelAgent("bot", FunctionModel(down)), cassette=Cassette(path, "record")
    ).query_sync("hi")
    assert isinstance(recorded.error, ModelError)
    assert lines(path)[0]["error"]["type"] == "ModelError"
    replayed = Runner(
        ChatModelAgent("bot", silent()), cassette=Cassette(path, "replay")
    ).query_sync("hi")
    assert replayed.error == recorded.error
    assert isinstance(replayed.error, ModelError) and replayed.error.status_code == 503


def test_a_tool_that_raised_is_replayed_with_the_same_text_for_the_model(
    tmp_path: Path,
) -> None:
    path = tmp_path / "raised.jsonl"
    ran: list[str] = []

    def make_tool() -> Any:
        @tool
        def fetch(url: str) -> str:
            """Fetch a page."""
            ran.append(url)
            raise ValueError("no route to host")

        return fetch

    model = ScriptedModel([call("fetch", {"url": "x"}), reply("it failed")])
    recorded = Runner(
        ChatModelAgent("bot", model, tools=[make_tool()]), cassette=Cassette(path, "record")
    ).query_sync("fetch x")
    told = (shape(recorded))[1][3][1]
    assert told == "Error: tool 'fetch' raised ValueError: no route to host"
    replayed = Runner(
        ChatModelAgent("bot", silent(), tools=[make_tool()]), cassette=Cassette(path, "replay")
    ).query_sync("fetch x")
    assert shape(replayed) == shape(recorded)
    assert ran == ["x"]


# A conversation long enough that a Compaction(40, keep_last=1) summarizes all but the last
# message before the first model call.
LONG = [Message.user("a" * 80), Message.assistant("b" * 80), Message.user("What now?")]


def compacting(model: Any, summarizer: Any = None) -> ChatModelAgent:
    compaction = Compaction(40, keep_last=1, model=summarizer)
    return ChatModelAgent("talk", model, instruction="You help.", compaction=compaction)


@pytest.mark.parametrize("own", [True, False], ids=["agent-model", "summarizer"])
def test_a_compaction_summary_is_recorded_and_replayed_without_a_model(
    tmp_path: Path, own: bool
) -> None:
    path = tmp_path / "compact.jsonl"
    summary = reply("They spoke of a and b.", usage=Usage(input_tokens=50, output_tokens=6))
    answer = reply("Now rest.", usage=Usage(input_tokens=12, output_tokens=3))
    if own:
        agent = compacting(ScriptedModel([summary, answer]))
    else:
        agent = compacting(ScriptedModel([answer]), ScriptedModel([summary]))
    recorded = Runner(agent, cassette=Cassette(path, mode="record")).run_sync(LONG)
    assert recorded.error is None
    steps = lines(path)
    assert [(s["step"], s["kind"], s["agent"]) for s in steps] == [
        (1, "model", "talk"),
        (2, "model", "talk"),
    ]
    assert steps[0]["request"]["messages"][0]["content"].startswith("Summarize")
    assert steps[0]["reply"]["content"] == "They spoke of a and b."
    before = path.read_bytes()
    offline = compacting(silent(), None if own else silent())
    replayed = Runner(offline, cassette=Cassette(path, mode="replay")).run_sync(LONG)
    assert replayed.error is None
    assert shape(replayed) == shape(recorded)
    assert (replayed.final_output, replayed.usage) == ("Now rest.", recorded.usage)
    assert path.read_bytes() == before


def test_a_changed_conversation_diverges_at_the_compaction_summary(tmp_path: Path) -> None:
    path = tmp_path / "compact.jsonl"
    model = ScriptedModel([reply("They spoke of a and b."), reply("Now rest.")])
    Runner(compacting(model), cassette=Cassette(path, mode="record")).run_sync(LONG)
    changed = [Message.user("c" * 80), *LONG[1:]]
    result = Runner(compacting(silent()), cassette=Cassette(path, "replay")).run_sync(changed)
    error = result.error
    assert isinstance(error, CassetteDivergence)
    assert error.step == 1
    assert "messages[1].content" in str(error)
    assert "a" * 40 in str(error.recorded) and "c" * 40 in str(error.new)


# --- divergence -------------------------------------------------------------------------------


def test_changed_messages_end_the_run_naming_the_step_and_both_values(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sum.jsonl"
    record_sum(path)
    agent = ChatModelAgent("calc", silent(), instruction="You add.", tools=Counter().tools())
    result = Runner(agent, cassette=Cassette(path, "replay")).query_sync("What is 2 + 4?")
    error = result.error
    assert isinstance(error, CassetteDivergence)
    assert (error.step, error.recorded, error.new) == (1, "What is 2 + 3?", "What is 2 + 4?")
    assert "step 1" in str(error) and "messages[1].content" in str(error)
    assert '"What is 2 + 3?"' in str(error) and '"What is 2 + 4?"' in str(error)


def test_changed_tools_end_the_run_naming_the_step(tmp_path: Path) -> None:
    path = tmp_path / "sum.jsonl"
    record_sum(path)
    add = Counter().tools()[0]
    agent = ChatModelAgent("calc", silent(), instruction="You add.", tools=[add])
    result = Runner(agent, cassette=Cassette(path, "replay")).query_sync("What is 2 + 3?")
    error = result.error
    assert isinstance(error, CassetteDivergence)
    assert error.step == 1
    assert "tools[1]" in str(error)
    assert error.recorded["name"] == "weather" and error.new is None


def test_changed_tool_arguments_end_the_run_naming_the_tool_step(tmp_path: Path) -> None:
    path = tmp_path / "sum.jsonl"
    record_sum(path)

    class Double(Hooks):
        async def before_tool(self, ctx: AgentContext, call: ToolCall) -> ToolCall | None:
            return ToolCall(id=call.id, name=call.name, arguments='{"a": 4, "b": 3}')

    counter = Counter()
    agent = ChatModelAgent("calc", silent(), instruction="You add.", tools=counter.tools())
    result = Runner(agent, hooks=[Double()], cassette=Cassette(path, "replay")).query_sync(
        "What is 2 + 3?"
    )
    error = result.error
    assert isinstance(error, CassetteDivergence)
    assert (error.step, error.recorded, error.new) == (2, 2, 4)
    assert "arguments.a" in str(error)
    assert counter.runs == []


def test_a_call_the_cassette_does_not_have_is_a_divergence(tmp_path: Path) -> None:
    path = tmp_path / "sum.jsonl"
    record_sum(path)
    path.write_text(path.read_text().splitlines()[0] + "\n")  # only the first step
    counter = Counter()
    agent = ChatModelAgent("calc", silent(), instruction="You add.", tools=counter.tools())
    result = Runner(agent, cassette=Cassette(path, "replay")).query_sync("What is 2 + 3?")
    error = result.error
    assert isinstance(error, CassetteDivergence)
    assert error.step == 2 and error.recorded is None
    assert error.new == {"name": "add", "arguments": {"a": 2, "b": 3}}
    assert "no such call" in str(error)
    assert counter.runs == []


def test_a_divergence_inside_an_agent_tool_ends_the_whole_run(tmp_path: Path) -> None:
    path = tmp_path / "nested.jsonl"
    inner = ChatModelAgent("inner", ScriptedModel([reply("inner answer")]), instruction="Old.")
    outer_model = ScriptedModel([call("inner", {"request": "go"}), reply("done")])
    outer = ChatModelAgent("outer", outer_model, tools=[AgentTool(inner)])
    Runner(outer, cassette=Cassette(path, "record")).query_sync("start")
    changed = ChatModelAgent("inner", silent(), instruction="New.")
    again = ChatModelAgent("outer", silent(), tools=[AgentTool(changed)])
    result = Runner(again, cassette=Cassette(path, "replay")).query_sync("start")
    assert isinstance(result.error, CassetteDivergence)  # not told to outer's model
    assert (result.error.step, result.error.recorded, result.error.new) == (2, "Old.", "New.")


# --- nested agents, parallel calls, pauses ----------------------------------------------------


def nested_team(counter: Counter, outer_model: Any, inner_model: Any) -> ChatModelAgent:
    inner = ChatModelAgent(
        "researcher", inner_model, description="Finds facts.", tools=counter.tools()
    )
    return ChatModelAgent("lead", outer_model, tools=[AgentTool(inner)])


def test_nested_agents_record_their_steps_in_run_order_and_replay(tmp_path: Path) -> None:
    path = tmp_path / "nested.jsonl"
    counter = Counter()
    outer_model = ScriptedModel(
        [call("researcher", {"request": "weather in Oslo"}), reply("Sunny.")]
    )
    inner_model = ScriptedModel([call("weather", {"city": "Oslo"}), reply("sunny in Oslo")])
    recorded = Runner(
        nested_team(counter, outer_model, inner_model), cassette=Cassette(path, "record")
    ).query_sync("Weather in Oslo?")
    assert recorded.error is None
    steps = [(s["step"], s["kind"], s["agent"], s.get("name")) for s in lines(path)]
    assert steps == [
        (1, "model", "lead", None),
        (2, "model", "researcher", None),
        (3, "tool", "researcher", "weather"),
        (4, "model", "researcher", None),
        (5, "tool", "lead", "researcher"),
        (6, "model", "lead", None),
    ]
    replayed = Runner(
        nested_team(counter, silent(), silent()), cassette=Cassette(path, "replay")
    ).query_sync("Weather in Oslo?")
    assert replayed.error is None
    assert shape(replayed) == shape(recorded)
    assert any(e.depth == 1 for e in replayed.events)  # the researcher's events came again
    assert counter.runs == ["weather"]


def test_transfers_are_recorded_across_agents_and_replayed(tmp_path: Path) -> None:
    path = tmp_path / "transfer.jsonl"

    def desk(billing_model: Any, desk_model: Any) -> ChatModelAgent:
        billing = ChatModelAgent("billing", billing_model, description="Bills.")
        return ChatModelAgent("desk", desk_model, sub_agents=[billing])

    recorded = Runner(
        desk(
            ScriptedModel([reply("Your bill is 10.")]),
            ScriptedModel([call("transfer_to_agent", {"agent_name": "billing"})]),
        ),
        cassette=Cassette(path, "record"),
    ).query_sync("My bill?")
    assert recorded.final_output == "Your bill is 10."
    assert [(s["kind"], s["agent"]) for s in lines(path)] == [
        ("model", "desk"),
        ("tool", "desk"),
        ("model", "billing"),
    ]
    replayed = Runner(desk(silent(), silent()), cassette=Cassette(path, "replay")).query_sync(
        "My bill?"
    )
    assert shape(replayed) == shape(recorded)
    assert replayed.final_output == "Your bill is 10."


def test_parallel_tool_calls_are_matched_by_call_whatever_order_they_finish(
    tmp_path: Path,
) -> None:
    path = tmp_path / "parallel.jsonl"
    first_done = asyncio.Event()

    @tool
    async def slow(x: str) -> str:
        """Wait for the fast one."""
        await first_done.wait()
        return f"slow {x}"

    @tool
    async def fast(x: str) -> str:
        """Answer at once."""
        first_done.set()
        return f"fast {x}"

    model = ScriptedModel([calls(call("slow", {"x": "a"}), call("fast", {"x": "b"})), reply("ok")])
    recorded = Runner(
        ChatModelAgent("p", model, tools=[slow, fast]), cassette=Cassette(path, "record")
    ).query_sync("go")
    assert [s.get("name") for s in lines(path)] == [None, "fast", "slow", None]  # finish order
    replayed = Runner(
        ChatModelAgent("p", silent(), tools=[slow, fast]), cassette=Cassette(path, "replay")
    ).query_sync("go")
    assert replayed.error is None
    tool_results = [(m[3][1], m[3][3]) for m in shape(replayed) if m[3][0] == "tool"]
    assert sorted(tool_results) == sorted(
        (m[3][1], m[3][3]) for m in shape(recorded) if m[3][0] == "tool"
    )


def test_parallel_agents_find_their_own_steps(tmp_path: Path) -> None:
    path = tmp_path / "parallel_agents.jsonl"
    counter = Counter()

    def both(north: Any, south: Any) -> ParallelAgent:
        return ParallelAgent(
            "both",
            [
                ChatModelAgent("north", north, tools=counter.tools()),
                ChatModelAgent("south", south, tools=counter.tools()),
            ],
        )

    recorded = Runner(
        both(
            ScriptedModel([call("weather", {"city": "Oslo"}), reply("Oslo: sunny")]),
            ScriptedModel([call("weather", {"city": "Rome"}), reply("Rome: sunny")]),
        ),
        cassette=Cassette(path, "record"),
    ).query_sync("Weather?")
    assert recorded.error is None and len(lines(path)) == 6
    replayed = Runner(both(silent(), silent()), cassette=Cassette(path, "replay")).query_sync(
        "Weather?"
    )
    assert replayed.error is None
    assert sorted(shape(replayed), key=repr) == sorted(shape(recorded), key=repr)
    assert sorted(counter.runs) == ["weather", "weather"]


def test_a_paused_run_goes_on_recording_when_it_is_resumed(tmp_path: Path) -> None:
    path = tmp_path / "pause.jsonl"
    ran: list[str] = []

    def make_tool() -> Any:
        @tool
        def ask(question: str) -> str:
            """Ask a person."""
            ran.append(question)
            return f"the person said {interrupt({'question': question})}"

        return ask

    model = ScriptedModel([call("ask", {"question": "colour?"}), reply("They like blue.")])
    runner = Runner(
        ChatModelAgent("bot", model, tools=[make_tool()]), cassette=Cassette(path, "record")
    )
    paused = runner.query_sync("Ask them.")
    assert paused.interrupts and [s["kind"] for s in lines(path)] == ["model"]
    done = runner.resume_sync(paused.checkpoint_id or "", value="blue")
    assert done.final_output == "They like blue."
    steps = lines(path)
    assert [(s["step"], s["kind"]) for s in steps] == [(1, "model"), (2, "tool"), (3, "model")]
    assert steps[1]["result"] == "the person said blue"
    # on replay the tool is answered from the cassette: it does not pause again
    replayed = Runner(
        ChatModelAgent("bot", silent(), tools=[make_tool()]), cassette=Cassette(path, "replay")
    ).query_sync("Ask them.")
    assert (replayed.error, replayed.interrupts, replayed.final_output) == (
        None,
        (),
        "They like blue.",
    )
    assert ran == ["colour?", "colour?"]  # the recording's call and its resume, not the replay


class Approve(Hooks):
    """Pause before every tool call until a person answers."""

    async def before_tool(self, ctx: AgentContext, call: ToolCall) -> ToolCall | None:
        interrupt({"approve": call.name})
        return None


def test_a_replayed_run_pauses_where_a_hook_paused_and_resumes_from_the_cassette(
    tmp_path: Path,
) -> None:
    path = tmp_path / "approve.jsonl"
    counter = Counter()
    runner = Runner(
        ChatModelAgent("calc", two_steps(), tools=counter.tools()),
        hooks=[Approve()],
        cassette=Cassette(path, "record"),
    )
    paused = runner.query_sync("What is 2 + 3?")
    recorded = runner.resume_sync(paused.checkpoint_id or "", value=True)
    assert recorded.final_output == "2 + 3 = 5"
    replayer = Runner(
        ChatModelAgent("calc", silent(), tools=counter.tools()),
        hooks=[Approve()],
        cassette=Cassette(path, "replay"),
    )
    again = replayer.query_sync("What is 2 + 3?")
    assert again.interrupts and again.error is None
    finished = replayer.resume_sync(again.checkpoint_id or "", value=True)
    assert (finished.error, finished.final_output) == (None, "2 + 3 = 5")
    assert shape(finished) == shape(recorded)
    assert counter.runs == ["add"]


def test_a_tools_approval_is_asked_again_on_replay_and_the_answer_comes_from_the_file(
    tmp_path: Path,
) -> None:
    """The cassette stands innermost: the gate of a tool with an approval is outside it, so
    a replay asks the approval as the recorded run did, and then answers the call from the
    file."""
    path = tmp_path / "approval.jsonl"
    ran: list[int] = []

    @tool(approval=Approval())
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(amount)
        return f"paid {amount}"

    def run(model: Any, mode: Mode) -> RunResult:
        runner = Runner(ChatModelAgent("shop", model, tools=[pay]), cassette=Cassette(path, mode))
        paused = runner.query_sync("Pay 5.")
        (question,) = paused.interrupts
        answer = {"approved": True, "fingerprint": question.info["approval"]["fingerprint"]}
        return runner.resume_sync(paused.checkpoint_id or "", value=answer)

    recorded = run(ScriptedModel([call("pay", {"amount": 5}), reply("Paid.")]), "record")
    replayed = run(silent(), "replay")
    assert (replayed.error, replayed.final_output) == (None, "Paid.")
    assert shape(replayed) == shape(recorded)
    assert ran == [5]  # the recording's call only


def test_an_agents_own_wrap_model_hook_sees_the_replayed_reply(tmp_path: Path) -> None:
    path = tmp_path / "wrapped.jsonl"
    seen: list[str] = []

    class Look(Hooks):
        async def wrap_model(self, ctx: Any, request: Any, call_next: Any) -> Message:
            answer: Message = await call_next(request)
            seen.append(answer.content)
            return answer

    def agent(model: Any) -> ChatModelAgent:
        return ChatModelAgent("calc", model, tools=Counter().tools(), hooks=[Look()])

    Runner(agent(two_steps()), cassette=Cassette(path, "record")).query_sync("What is 2 + 3?")
    replayed = Runner(agent(silent()), cassette=Cassette(path, "replay")).query_sync(
        "What is 2 + 3?"
    )
    assert replayed.final_output == "2 + 3 = 5"
    assert seen == ["", "2 + 3 = 5"] * 2  # recorded, then replayed: inside the agent's hook


# --- fork -------------------------------------------------------------------------------------


def four_steps() -> ScriptedModel:
    return ScriptedModel(
        [call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4}), reply("3 and 7")]
    )


def test_fork_replays_up_to_the_step_and_runs_live_after_it(tmp_path: Path) -> None:
    original, forked_path = tmp_path / "original.jsonl", tmp_path / "fork.jsonl"
    counter = Counter()
    Runner(
        ChatModelAgent("calc", four_steps(), tools=counter.tools()),
        cassette=Cassette(original, "record"),
    ).query_sync("Add.")
    assert len(lines(original)) == 5
    before = original.read_bytes()
    counter.runs.clear()
    other = ScriptedModel([reply("a different ending")])
    agent = ChatModelAgent("calc", silent(), tools=counter.tools())
    cassette = Cassette(original).fork(3, path=forked_path)
    assert (cassette.path, cassette.live_after) == (forked_path, 3)
    result = Runner(agent, cassette=cassette).query_sync("Add.", options=[RunOption(model=other)])
    assert (result.error, result.final_output) == (None, "a different ending")
    assert counter.runs == ["add"]  # step 4, the second add, ran live; step 2 was replayed
    assert len(other.requests) == 1  # only step 5 called the new model
    assert other.requests[0].messages[-1].content == "7"
    assert original.read_bytes() == before
    steps = lines(forked_path)
    assert [(s["step"], s["kind"]) for s in steps] == [
        (1, "model"),
        (2, "tool"),
        (3, "model"),
        (4, "tool"),
        (5, "model"),
    ]
    assert steps[4]["reply"]["content"] == "a different ending"
    # the fork's file replays on its own
    counter.runs.clear()
    again = Runner(
        ChatModelAgent("calc", silent(), tools=counter.tools()),
        cassette=Cassette(forked_path, "replay"),
    ).query_sync("Add.")
    assert (again.error, again.final_output) == (None, "a different ending")
    assert counter.runs == []


def test_fork_with_another_instruction_changes_what_follows(tmp_path: Path) -> None:
    original, forked_path = tmp_path / "original.jsonl", tmp_path / "fork.jsonl"
    counter = Counter()
    outer_model = ScriptedModel([call("researcher", {"request": "Oslo?"}), reply("Sunny.")])
    inner_model = ScriptedModel([call("weather", {"city": "Oslo"}), reply("sunny in Oslo")])
    Runner(
        nested_team(counter, outer_model, inner_model), cassette=Cassette(original, "record")
    ).query_sync("Oslo?")
    new_inner = ScriptedModel([reply("Rain, briefly.")])
    new_outer = ScriptedModel([reply("Rain.")])
    team = nested_team(counter, silent(), silent())
    result = Runner(team, cassette=Cassette(original).fork(1, path=forked_path)).query_sync(
        "Oslo?",
        options=[
            RunOption(agent="researcher", instruction="Be brief.", model=new_inner),
            RunOption(agent="lead", model=new_outer),
        ],
    )
    assert (result.error, result.final_output) == (None, "Rain.")
    assert new_inner.requests[0].messages[0] == Message.system("Be brief.")
    assert [(s["kind"], s["agent"]) for s in lines(forked_path)] == [
        ("model", "lead"),
        ("model", "researcher"),
        ("tool", "lead"),
        ("model", "lead"),
    ]


def test_fork_refuses_a_step_out_of_range_or_its_own_file(tmp_path: Path) -> None:
    path = tmp_path / "sum.jsonl"
    record_sum(path)
    with pytest.raises(UsageError, match="from 0 to 3"):
        Cassette(path).fork(4, path=tmp_path / "x.jsonl")
    with pytest.raises(UsageError, match="from 0 to 3"):
        Cassette(path).fork(-1, path=tmp_path / "x.jsonl")
    with pytest.raises(UsageError, match="new file"):
        Cassette(path).fork(1, path=path)


# --- bad files and bad use ----------------------------------------------------------------------


def test_a_corrupt_line_ends_the_run_with_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "sum.jsonl"
    record_sum(path)
    first, second, third = path.read_text().splitlines()
    path.write_text("\n".join([first, second[:40], third]) + "\n")
    agent = ChatModelAgent("calc", silent(), tools=Counter().tools())
    result = Runner(agent, cassette=Cassette(path, "replay")).query_sync("What is 2 + 3?")
    error = result.error
    assert isinstance(error, CassetteCorrupt) and isinstance(error, PlaitError)
    assert (error.path, error.line) == (str(path), 2)
    assert "line 2" in str(error)
    with pytest.raises(CassetteCorrupt, match="line 2"):
        Cassette(path).fork(1, path=tmp_path / "fork.jsonl")
    path.write_text("\n".join([first, third]) + "\n")  # a step missing
    with pytest.raises(CassetteCorrupt, match="line 2 is step 3, expected step 2"):
        Cassette(path).as_eval_case()


def test_bad_use_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="mode"):
        Cassette(tmp_path / "x.jsonl", mode="play")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="no cassette file"):
        Cassette(tmp_path / "missing.jsonl", mode="replay")
    with pytest.raises(UsageError, match="tools_only"):
        Cassette(tmp_path / "missing.jsonl", mode="record", tools_only=True)
    with pytest.raises(UsageError, match="cassette must be"):
        Runner(ChatModelAgent("a", silent()), cassette="x.jsonl")  # type: ignore[arg-type]


# --- eval cases ---------------------------------------------------------------------------------


def test_as_eval_case_gives_the_case_and_its_tools_replay_with_a_live_model(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sum.jsonl"
    record_sum(path)
    case = Cassette(path).as_eval_case()
    assert case == {
        "id": "sum",
        "input": "What is 2 + 3?",
        "expected_tools": [{"name": "add", "args": {"a": 2, "b": 3}}],
        "expected_response": "2 + 3 = 5",
        "cassette": str(path.resolve()),
    }
    assert Cassette(path).as_eval_case(id="sum-1")["id"] == "sum-1"
    # the evaluator's run: tools answered from the cassette, the model live
    counter = Counter()
    live = ScriptedModel([call("add", {"b": 3, "a": 2}), reply("five")])
    agent = ChatModelAgent("calc", live, tools=counter.tools())
    mocked = Cassette(case["cassette"], mode="replay", tools_only=True)
    result = Runner(agent, cassette=mocked).query_sync(case["input"])
    assert (result.error, result.final_output) == (None, "five")
    assert counter.runs == [] and live.remaining == 0
    assert live.requests[1].messages[-1].content == "5"  # the recorded result
    # a call the recording does not have ends the run, showing what was recorded
    other = ScriptedModel([call("add", {"a": 9, "b": 9}), reply("?")])
    agent = ChatModelAgent("calc", other, tools=counter.tools())
    bad = Runner(agent, cassette=Cassette(path, "replay", tools_only=True)).query_sync("x")
    assert isinstance(bad.error, CassetteDivergence)
    assert bad.error.recorded == {"name": "add", "arguments": {"a": 2, "b": 3}}
    assert bad.error.new == {"name": "add", "arguments": {"a": 9, "b": 9}}
    assert counter.runs == []


def test_as_eval_case_keeps_a_conversation_as_message_objects(tmp_path: Path) -> None:
    path = tmp_path / "talk.jsonl"
    runner = Runner(
        ChatModelAgent("bot", ScriptedModel([reply("fine")])), cassette=Cassette(path, "record")
    )
    runner.run_sync([Message.user("hi"), Message.assistant("hello"), Message.user("how are you?")])
    case = Cassette(path).as_eval_case()
    assert case["conversation"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "how are you?"},
    ]
    assert "input" not in case and case["expected_tools"] == []
    assert case["expected_response"] == "fine"


# --- the docs -----------------------------------------------------------------------------------


def test_the_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    page = (ROOT / "docs" / "capabilities" / "record-and-replay.md").read_text()
    section = page.split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    namespace: dict[str, Any] = {"__name__": "cassette_example"}
    exec(
        compile(
            block.group(1), "docs/capabilities/record-and-replay.md", "exec", dont_inherit=True
        ),
        namespace,
    )
    assert namespace["replayed"].final_output == namespace["recorded"].final_output
    assert namespace["forked"].final_output == "Tomorrow: rain."
    assert namespace["changed"].error.step == 1
