"""The run kernel: context per agent, one checkpoint per pause, run-wide budgets, leases,
checkpoint validation before a claim, and the runner's input checks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plait import (
    AgentEvent,
    AgentInput,
    ChatModelAgent,
    Message,
    ParallelAgent,
    RunContext,
    Runner,
    Team,
    interrupt,
    run_context,
    tool,
)
from plait.errors import (
    CheckpointAlreadyResumed,
    CheckpointCorrupt,
    CheckpointVersionError,
    MaxHandoffsExceeded,
    MaxStepsExceeded,
    ResumeError,
    UsageError,
)
from plait.stores import MemoryStore
from plait.testing import FunctionModel, ScriptedModel, call, calls, reply
from tests.conftest import RACE_STORES, race_store

APPROVED: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    APPROVED.clear()


@tool
def approve(item: str) -> str:
    """Ask a person to approve.

    Args:
        item: What to approve.
    """
    answer = interrupt({"approve": item})
    APPROVED.append(f"{item}={answer}")
    return f"{item}: {answer}"


@tool
def lookup() -> str:
    """Look something up."""
    return "looked up"


class Asks:
    """A custom agent that asks through the module-level API."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.description = name

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        here = run_context()
        answer = interrupt(f"question from {self.name}")
        yield here.event(message=Message.assistant(f"{self.name} at {here.address}: {answer}"))


def test_interrupt_and_run_context_in_custom_agents_under_a_composite_see_their_own() -> None:
    runner = Runner(ParallelAgent("par", [Asks("a"), Asks("b")]))
    paused = runner.query_sync("q")
    by_address = {c.address: c for c in paused.interrupts}
    assert set(by_address) == {"agent:par;agent:a", "agent:par;agent:b"}
    targets = {c.id: f"answer for {c.info[-1]}" for c in paused.interrupts}
    done = runner.resume_sync(paused.checkpoint_id, targets)  # type: ignore[arg-type]
    texts = sorted(e.message.message.content for e in done.events if e.message)  # type: ignore[union-attr]
    assert texts == [
        "a at agent:par;agent:a: answer for a",
        "b at agent:par;agent:b: answer for b",
    ]


def test_every_pause_is_a_new_checkpoint_and_a_retried_resume_answers_nothing_new() -> None:
    model = ScriptedModel(
        [call("approve", {"item": "10"}), call("approve", {"item": "5000"}), reply("sent")]
    )
    runner = Runner(ChatModelAgent("Bank", model, tools=[approve]))
    first = runner.query_sync("send money")
    second = runner.resume_sync(first.checkpoint_id, value="yes")  # type: ignore[arg-type]
    assert second.interrupts[0].info == {"approve": "5000"}
    assert second.checkpoint_id not in (None, first.checkpoint_id)
    with pytest.raises(CheckpointAlreadyResumed):  # the same request, sent again
        runner.resume_sync(first.checkpoint_id, value="yes")  # type: ignore[arg-type]
    assert APPROVED == ["10=yes"]
    assert runner.resume_sync(second.checkpoint_id, value="no").final_output == "sent"  # type: ignore[arg-type]
    assert APPROVED == ["10=yes", "5000=no"]


@pytest.mark.parametrize("kind", RACE_STORES)
async def test_two_concurrent_value_resumes_have_one_winner(kind: str, tmp_path: Path) -> None:
    model = ScriptedModel([call("approve", {"item": "x"}), reply("done"), reply("twice")])
    async with race_store(kind, tmp_path) as store:
        runner = Runner(ChatModelAgent("A", model, tools=[approve]), store=store)
        paused = await runner.query("q").collect()

        async def attempt() -> str:
            try:
                result = await runner.resume(paused.checkpoint_id, value=1).collect()  # type: ignore[arg-type]
            except ResumeError:
                return "rejected"
            return str(result.final_output)

        assert sorted(await asyncio.gather(attempt(), attempt())) == ["done", "rejected"]
    assert APPROVED == ["x=1"]


def _coordinator(model: ScriptedModel, **limits: Any) -> Team:
    lead = ChatModelAgent("lead", model, tools=[approve, lookup])
    helper = ChatModelAgent("helper", ScriptedModel([]), description="helps")
    return Team.coordinator(lead, [helper], **limits)


def test_a_team_budget_holds_across_pauses_and_resumes() -> None:
    script = [call("approve", {"item": str(n)}) for n in range(8)] + [reply("done")]
    model = ScriptedModel(script)
    runner = Runner(_coordinator(model, total_max_steps=3))
    result = runner.query_sync("go")
    for _ in range(8):
        if result.checkpoint_id is None:
            break
        result = runner.resume_sync(result.checkpoint_id, value="ok")
    assert isinstance(result.error, MaxStepsExceeded)
    assert len(model.requests) == 3


def test_a_team_budget_holds_with_step_durability() -> None:
    model = ScriptedModel([call("lookup", {}) for _ in range(50)] + [reply("done")])
    runner = Runner(_coordinator(model, total_max_steps=5), durability="step")
    result = runner.query_sync("go")
    assert isinstance(result.error, MaxStepsExceeded)
    assert len(model.requests) == 5


def test_step_durability_enters_the_agent_once() -> None:
    entered: list[str] = []

    class Counting(ChatModelAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            entered.append(self.name)
            async for event in super().run(input, ctx):
                yield event

    model = ScriptedModel([call("lookup", {}) for _ in range(3)] + [reply("done")])
    agent = Counting("A", model, tools=[lookup])
    result = Runner(agent, durability="step").query_sync("go")
    assert result.final_output == "done" and entered == ["A"]


def test_plain_transfers_are_bounded_by_max_transfers() -> None:
    def always_transfer(messages: list[Message], tools: list[Any]) -> Message:
        system = messages[0].content if messages and messages[0].role == "system" else ""
        target = "child" if "child" in system.split("Agent name:")[-1] else "parent"
        return Message.assistant(
            "",
            (
                call("transfer_to_agent", {"agent_name": target}).tool_calls[0],  # type: ignore[union-attr]
            ),
        )

    model = FunctionModel(always_transfer)
    child = ChatModelAgent("child", model, description="the child")
    parent = ChatModelAgent("parent", model, description="the parent", sub_agents=[child])
    result = Runner(parent, max_transfers=5).query_sync("ping")
    assert isinstance(result.error, MaxHandoffsExceeded)
    assert "max_transfers=5" in str(result.error)
    assert len(model.requests) == 6


def test_a_session_keeps_the_handoffs_made_before_a_pause() -> None:
    store = MemoryStore()
    a = ChatModelAgent(
        "a",
        ScriptedModel([call("transfer_to_agent", {"agent_name": "b", "message": "pay"})]),
        description="triage",
    )
    b = ChatModelAgent(
        "b",
        ScriptedModel([call("approve", {"item": "refund"}), reply("refunded")]),
        description="billing",
        tools=[approve],
    )
    runner = Runner(Team.swarm("a", [a, b], name="desk"), store=store)
    paused = runner.query_sync("refund me", session_id="s1")
    done = runner.resume_sync(paused.checkpoint_id, value="yes")  # type: ignore[arg-type]
    assert done.final_output == "refunded"
    saved = json.loads(asyncio.run(store.get_session("s1")) or b"{}")
    handoffs = [(h["from_agent"], h["to_agent"]) for h in saved["handoffs"]]
    assert handoffs == [("a", "b"), ("b", "END")]


def test_a_pending_checkpoint_id_cannot_be_reused_by_a_new_run() -> None:
    model = ScriptedModel([call("approve", {"item": "first"}), reply("one"), reply("two")])
    runner = Runner(ChatModelAgent("A", model, tools=[approve]))
    first = runner.query_sync("q", checkpoint_id="order-1")
    second = runner.query_sync("q", checkpoint_id="order-1")
    assert isinstance(second.error, UsageError) and "order-1" in str(second.error)
    assert runner.resume_sync(first.checkpoint_id, value="y").final_output == "one"  # type: ignore[arg-type]


def test_the_sync_methods_take_a_session() -> None:
    model = ScriptedModel([reply("hello"), reply("again")])
    runner = Runner(ChatModelAgent("A", model))
    runner.query_sync("hi", session_id="s")
    runner.run_sync([Message.user("and?")], session_id="s")
    assert [m.content for m in model.requests[1].messages] == ["hi", "hello", "and?"]


def test_run_refuses_what_is_not_a_message() -> None:
    runner = Runner(ChatModelAgent("A", ScriptedModel([])))
    with pytest.raises(UsageError, match="item 0 is 'hello'"):
        runner.run(["hello"])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="takes a text"):
        runner.query(None)  # type: ignore[arg-type]


def test_two_calls_with_one_id_keep_the_approval_on_resume() -> None:
    model = ScriptedModel(
        [
            calls(call("approve", {"item": "x"}, id="dup"), call("lookup", {}, id="dup")),
            reply("done"),
        ]
    )
    runner = Runner(ChatModelAgent("A", model, tools=[approve, lookup]))
    paused = runner.query_sync("q")
    done = runner.resume_sync(paused.checkpoint_id, value="yes")  # type: ignore[arg-type]
    assert done.final_output == "done"
    assert APPROVED == ["x=yes"]
    tools = [m.content for m in model.requests[1].messages if m.role == "tool"]
    assert tools == ["x: yes", "looked up"]


async def test_a_live_runs_step_checkpoint_is_held_until_the_run_ends() -> None:
    gate = asyncio.Event()
    reached = asyncio.Event()

    @tool
    async def work(n: int) -> str:
        """Work.

        Args:
            n: The step.
        """
        if n == 2:
            reached.set()
            await gate.wait()
        return f"step {n}"

    store = MemoryStore()
    model = ScriptedModel([call("work", {"n": 1}), call("work", {"n": 2}), reply("done")])
    agent = ChatModelAgent("A", model, tools=[work])
    stream = Runner(agent, store=store, durability="step").query("go", checkpoint_id="job")
    task = asyncio.create_task(stream.collect())
    await reached.wait()
    other = Runner(ChatModelAgent("A", ScriptedModel([reply("stolen")]), tools=[work]), store=store)
    with pytest.raises(ResumeError, match="still going"):
        await other.resume("job").collect()
    gate.set()
    assert (await task).final_output == "done"
    with pytest.raises(CheckpointAlreadyResumed):
        await other.resume("job").collect()


async def _paused_document() -> tuple[MemoryStore, Runner, dict[str, Any]]:
    """Pause a run on an approval; return its store, runner and checkpoint as JSON."""
    store = MemoryStore()
    model = ScriptedModel([call("approve", {"item": "x"}), reply("done")])
    runner = Runner(ChatModelAgent("A", model, tools=[approve]), store=store)
    paused = await runner.query("q").collect()
    record = await store.get_checkpoint(paused.checkpoint_id)  # type: ignore[arg-type]
    assert record is not None
    return store, runner, json.loads(record.data)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d.update(session_values=5), "session_values"),
        (lambda d: d.pop("answers"), "answers"),
        (lambda d: d.update(root_input="hello"), "root_input"),
        (lambda d: d["records"][0]["record"].update(messages="hi"), "records.0.record"),
        (
            lambda d: d["records"][0]["record"].update(done=[{"index": 99, "content": "x"}]),
            "records.0.record.*tool call 99 is not one of the round's 1 calls",
        ),
        (
            lambda d: d["records"][0]["record"].update(
                done=[{"index": 0, "content": "x"}, {"index": 0, "content": "y"}]
            ),
            "records.0.record.*finished twice",
        ),
    ],
)
async def test_a_damaged_checkpoint_is_refused_before_it_is_claimed(
    change: Any, where: str
) -> None:
    store, runner, data = await _paused_document()
    change(data)
    await store.put_checkpoint("bad", json.dumps(data).encode())
    with pytest.raises(CheckpointCorrupt, match=where):
        await runner.resume("bad", value=1).collect()
    bad = await store.get_checkpoint("bad")
    assert bad is not None and bad.status == "pending"


@pytest.mark.parametrize("version", [3, 99])
async def test_a_checkpoint_of_a_newer_format_is_a_version_error(version: int) -> None:
    store, runner, data = await _paused_document()
    data["version"] = version
    await store.put_checkpoint("newer", json.dumps(data).encode())
    with pytest.raises(CheckpointVersionError, match=f"format {version}, this plait reads up to 2"):
        await runner.resume("newer", value=1).collect()
    for bad in ("2", None, 0, True):
        data["version"] = bad
        await store.put_checkpoint("odd", json.dumps(data).encode())
        with pytest.raises(CheckpointCorrupt, match="format version") as caught:
            await runner.resume("odd", value=1).collect()
        assert not isinstance(caught.value, CheckpointVersionError)
    newer = await store.get_checkpoint("newer")
    assert newer is not None and newer.status == "pending"


async def test_a_checkpoint_nested_too_deeply_is_refused() -> None:
    store = MemoryStore()
    await store.put_checkpoint("deep", b"[" * 100_000 + b"]" * 100_000)
    runner = Runner(ChatModelAgent("A", ScriptedModel([])), store=store)
    with pytest.raises(CheckpointCorrupt):
        await runner.resume("deep", value=1).collect()


@pytest.mark.parametrize("kind", RACE_STORES)
async def test_two_concurrent_turns_on_one_session_are_both_kept(kind: str, tmp_path: Path) -> None:
    both_asked = asyncio.Barrier(2)

    async def answer(messages: list[Message], tools: list[Any]) -> Message:
        await both_asked.wait()  # each turn has read the session before either is saved
        return Message.assistant(f"re: {messages[-1].content}")

    async with race_store(kind, tmp_path) as store:
        runner = Runner(ChatModelAgent("A", FunctionModel(answer)), store=store)
        results = await asyncio.gather(
            runner.query("one", session_id="s").collect(),
            runner.query("two", session_id="s").collect(),
        )
        assert [r.error for r in results] == [None, None]
        saved = json.loads(await store.get_session("s") or b"{}")
    texts = sorted(m["content"] for _, m in saved["messages"])
    assert texts == ["one", "re: one", "re: two", "two"]


def test_a_team_member_sees_its_own_earlier_answer_verbatim_on_the_next_turn() -> None:
    model_a = ScriptedModel([reply("first answer"), reply("second answer")])
    a = ChatModelAgent("a", model_a, description="answers")
    b = ChatModelAgent("b", ScriptedModel([]), description="other")
    runner = Runner(Team.swarm("a", [a, b], name="desk"))
    runner.query_sync("question one", session_id="s")
    assert runner.query_sync("question two", session_id="s").final_output == "second answer"
    seen = [(m.role, m.content) for m in model_a.requests[1].messages if m.role != "system"]
    assert seen == [
        ("user", "question one"),
        ("assistant", "first answer"),
        ("user", "question two"),
    ]


async def test_a_store_down_while_the_session_is_read_is_the_runs_error() -> None:
    from plait.errors import StoreError

    class Down(MemoryStore):
        async def get_session_record(self, session_id: str) -> Any:
            raise ConnectionError("connection refused")

        async def get_session(self, session_id: str) -> bytes | None:
            raise ConnectionError("connection refused")

    runner = Runner(ChatModelAgent("A", ScriptedModel([reply("hi")])), store=Down())
    result = await runner.query("hello", session_id="s").collect()
    assert isinstance(result.error, StoreError)
    assert "reading a session" in str(result.error)


async def test_node_timeout_counts_the_time_before_a_pause_and_not_the_pause() -> None:
    from plait.errors import NodeTimeout

    started: list[str] = []

    @tool
    async def slow(label: str) -> str:
        """Work for a while.

        Args:
            label: Which piece of work.
        """
        started.append(label)
        await asyncio.sleep(0.3)
        return label

    script = [
        call("slow", {"label": "before"}),
        call("approve", {"item": "go on?"}),
        call("slow", {"label": "after"}),
        reply("done"),
    ]
    worker = ChatModelAgent("worker", ScriptedModel(script), tools=[slow, approve])
    other = ChatModelAgent("other", ScriptedModel([]), description="other")
    runner = Runner(Team.swarm("worker", [worker, other], node_timeout=0.5))
    paused = await runner.query("q").collect()
    assert paused.interrupts and paused.error is None  # 0.3 s of its 0.5 s spent
    await asyncio.sleep(0.6)  # longer than node_timeout, but paused: it does not count
    resumed = await runner.resume(paused.checkpoint_id, value="yes").collect()  # type: ignore[arg-type]
    assert isinstance(resumed.error, NodeTimeout)
    assert started == ["before", "after"]  # it ran out during the second piece of work


async def test_step_snapshots_can_be_kept_as_history() -> None:
    store = MemoryStore()
    model = ScriptedModel([call("lookup", {}), call("lookup", {}), reply("done")])
    runner = Runner(
        ChatModelAgent("A", model, tools=[lookup]),
        store=store,
        durability="step",
        keep_steps=True,
    )
    result = await runner.query("go", checkpoint_id="job").collect()
    assert result.final_output == "done"
    running = [(await runner.read_checkpoint(f"job.step-{n}")).running for n in (1, 2)]
    assert running == [True, True]
    first = await store.get_checkpoint("job.step-1")
    second = await store.get_checkpoint("job.step-2")
    assert first is not None and second is not None and first.data != second.data
    assert first.status == second.status == "done"  # history, not something to resume
    assert await store.get_checkpoint("job.step-3") is None
    with pytest.raises(CheckpointAlreadyResumed):
        await runner.resume("job.step-1").collect()


def test_the_seams_of_a_run_are_reported_to_its_hooks() -> None:
    from plait import Hooks

    seen: list[str] = []

    class Recorder(Hooks):
        async def before_agent(self, ctx: RunContext, input: Any) -> None:
            seen.append(f"enter {ctx.agent_name}")

        async def after_agent(self, ctx: RunContext, error: Any) -> None:
            seen.append(f"exit {ctx.agent_name}")

        async def after_model(self, ctx: RunContext, request: Any, reply: Any) -> None:
            seen.append("model")

        async def after_tool(self, ctx: RunContext, call: Any, result: str) -> None:
            seen.append(f"tool {ctx.tool_name}")

        async def on_pause(self, ctx: RunContext, interrupts: Any, checkpoint_id: str) -> None:
            seen.append("paused")

        async def on_resume(self, ctx: RunContext, checkpoint_id: str) -> None:
            seen.append("resumed")

        async def on_step_saved(self, ctx: RunContext, checkpoint_id: str) -> None:
            seen.append("step saved")

    model = ScriptedModel([call("lookup", {}), call("approve", {"item": "x"}), reply("done")])
    agent = ChatModelAgent("A", model, tools=[lookup, approve])
    runner = Runner(agent, durability="step", hooks=[Recorder()])
    paused = runner.query_sync("go")
    assert seen == [
        "enter A",
        "model",
        "tool lookup",
        "step saved",
        "model",
        "paused",
        "exit A",
    ]
    seen.clear()
    runner.resume_sync(paused.checkpoint_id, value="y")  # type: ignore[arg-type]
    assert seen == [
        "resumed",
        "enter A",
        "tool approve",
        "step saved",
        "model",
        "exit A",
    ]


def test_ids_and_times_come_from_one_replaceable_source() -> None:
    from datetime import UTC, datetime

    from plait.core.context import IdSource

    class Counting(IdSource):
        def __init__(self) -> None:
            self.n = 0

        def new_id(self) -> str:
            self.n += 1
            return f"id-{self.n}"

        def now(self) -> datetime:
            return datetime(2030, 1, 1, tzinfo=UTC)

    a = ChatModelAgent(
        "a", ScriptedModel([call("transfer_to_agent", {"agent_name": "b"})]), description="a"
    )
    b = ChatModelAgent(
        "b", ScriptedModel([call("approve", {"item": "x"})]), description="b", tools=[approve]
    )
    runner = Runner(Team.swarm("a", [a, b], name="desk"), ids=Counting())
    paused = runner.query_sync("q")
    assert paused.handoffs[0].timestamp == datetime(2030, 1, 1, tzinfo=UTC)
    assert [c.id for c in paused.interrupts] == ["id-1"]
    assert paused.checkpoint_id == "id-2"


class OnlyTheLastRequest:
    """A custom agent that hands a composite only the user's last message."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = "filter"
        self.description = "keeps the last request"

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        last = [m for m in input.messages if m.role == "user"][-1:]
        async for event in self.inner.run(AgentInput(messages=last), ctx):
            yield event


def test_a_composite_runs_its_children_on_the_input_it_is_given() -> None:
    from plait import SequentialAgent

    first = ScriptedModel([reply("first done")])
    second = ScriptedModel([reply("second done")])
    seq = SequentialAgent("seq", [ChatModelAgent("one", first), ChatModelAgent("two", second)])
    history = [Message.user("old request"), Message.assistant("old answer")]
    result = Runner(OnlyTheLastRequest(seq)).run_sync([*history, Message.user("new request")])
    assert result.final_output == "second done"
    assert [m.content for m in first.requests[0].messages] == ["new request"]
    assert [(m.role, m.content) for m in second.requests[0].messages] == [
        ("user", "new request"),
        ("user", "For context: [one] said: first done."),
    ]


def test_a_team_runs_its_members_on_the_input_it_is_given() -> None:
    member_model = ScriptedModel([reply("handled")])
    member = ChatModelAgent("member", member_model, description="handles")
    other = ChatModelAgent("other", ScriptedModel([]), description="other")
    team = Team.swarm("member", [member, other], name="desk")
    history = [Message.user("old request"), Message.assistant("old answer")]
    Runner(OnlyTheLastRequest(team)).run_sync([*history, Message.user("new request")])
    seen = [m.content for m in member_model.requests[0].messages if m.role != "system"]
    assert seen == ["new request"]


async def test_run_metadata_is_saved_with_the_checkpoint_and_restored() -> None:
    seen: list[Any] = []

    @tool
    def traced() -> str:
        """Pause once, remembering the trace."""
        seen.append(dict(run_context().metadata))
        return str(interrupt("ok?"))

    store = MemoryStore()
    model = ScriptedModel([call("traced", {}), reply("done")])
    agent = ChatModelAgent("A", model, tools=[traced])
    runner = Runner(agent, store=store, metadata={"trace_id": "abc123"})
    paused = await runner.query("q").collect()
    checkpoint = await runner.read_checkpoint(paused.checkpoint_id)  # type: ignore[arg-type]
    assert checkpoint.metadata == {"trace_id": "abc123"}
    resumer = Runner(agent, store=store)  # built without metadata: it sees the run's
    await resumer.resume(paused.checkpoint_id, value="y").collect()  # type: ignore[arg-type]
    assert seen == [{"trace_id": "abc123"}, {"trace_id": "abc123"}]


def test_the_tests_validate_every_checkpoint_as_it_is_written() -> None:
    from plait.core.checkpoint import VALIDATE_WRITES, Checkpoint, ReactRecord
    from plait.core.run_state import RunSnapshot

    assert VALIDATE_WRITES
    bad = ReactRecord.model_construct(
        messages=[Message.user("q")], calls_made=1, phase="tools", done=[]
    )
    bad.done.append(plait_done_call(index=3))
    snapshot = RunSnapshot(records={("agent:A", "react"): bad})
    with pytest.raises(CheckpointCorrupt, match="tool call 3"):
        Checkpoint.encode(snapshot, (), agent_name="A", session_id=None)


def plait_done_call(index: int) -> Any:
    from plait.core.checkpoint import DoneCall

    return DoneCall.model_construct(index=index, content="x", action=None)


def test_a_checkpoint_encodes_its_records_as_its_schema_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from plait.core import checkpoint
    from plait.core.checkpoint import Checkpoint, CustomRecord, ReactRecord
    from plait.core.run_state import RunSnapshot
    from plait.errors import SerializationError

    react = ReactRecord(
        messages=[Message.user("q"), Message.assistant("a")], calls_made=1, phase="model"
    )
    custom = CustomRecord(values={"n": [1, "é"]})
    records = {("agent:A", "react"): react, ("run", "custom"): custom}
    snapshot = RunSnapshot(records=records, root_input=(Message.user("q"),))
    data = Checkpoint.encode(snapshot, (), agent_name="A", session_id=None)
    assert Checkpoint.decode(data, "c")._doc.model_dump_json().encode() == data
    monkeypatch.setattr(checkpoint, "VALIDATE_WRITES", False)
    wrong = ReactRecord.model_construct(messages=[], calls_made="one", phase="model", done=[])
    snapshot = RunSnapshot(records={("agent:A", "react"): wrong})
    with pytest.warns(UserWarning, match="calls_made"), pytest.raises(SerializationError):
        Checkpoint.encode(snapshot, (), agent_name="A", session_id=None)
