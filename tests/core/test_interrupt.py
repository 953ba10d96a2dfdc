"""Interrupt and resume across tools, agents as tools, transfers and workflows."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plait import (
    AgentEvent,
    AgentInput,
    AgentTool,
    ChatModelAgent,
    LoopAgent,
    Message,
    ParallelAgent,
    RunContext,
    Runner,
    SequentialAgent,
    Team,
    interrupt,
    interrupt_state,
    tool,
)
from plait.errors import (
    CheckpointCorrupt,
    CheckpointNotFound,
    ResumeError,
    SerializationError,
)
from plait.prebuilt import supervisor
from plait.stores import MemoryStore
from plait.testing import ScriptedModel, call, calls, reply
from tests.conftest import RACE_STORES, kinds, race_store

RUNS: dict[str, int] = {}


def _count(name: str) -> None:
    RUNS[name] = RUNS.get(name, 0) + 1


@pytest.fixture(autouse=True)
def _reset_counts() -> None:
    RUNS.clear()


@tool
def approve(item: str) -> str:
    """Ask a person to approve.

    Args:
        item: What to approve.
    """
    _count(f"approve:{item}")
    try:
        answer = interrupt({"approve": item}, state={"item": item})
    except Exception:  # a broad except in a tool cannot swallow the pause
        return "swallowed"
    return f"{item}: {answer} (state {interrupt_state()})"


@tool
async def lookup() -> str:
    """Look something up."""
    _count("lookup")
    return "looked up"


def _cashier(model: ScriptedModel, name: str = "Cashier") -> ChatModelAgent:
    return ChatModelAgent(name, model, tools=[approve, lookup])


def _tool_texts(events: tuple[AgentEvent, ...]) -> list[str]:
    return [
        e.message.message.content  # type: ignore[union-attr]
        for e in events
        if e.message is not None and e.message.role == "tool"
    ]


def test_a_tool_pauses_the_run_and_resumes_with_the_value() -> None:
    model = ScriptedModel([call("approve", {"item": "pay"}, id="c1"), reply("paid")])
    runner = Runner(_cashier(model))
    paused = runner.query_sync("pay the bill")
    assert paused.final_output is None and paused.error is None
    last = paused.events[-1]
    assert last.action is not None and last.action.interrupted is not None
    assert [e for e in paused.events if e.action and e.action.interrupted] == [last]
    (ctx,) = paused.interrupts
    assert ctx.address == "agent:Cashier;tool:approve:c1"
    assert ctx.info == {"approve": "pay"}
    assert paused.checkpoint_id == last.action.interrupted.checkpoint_id is not None
    resumed = runner.resume_sync(paused.checkpoint_id, value="yes")
    assert _tool_texts(resumed.events) == ["pay: yes (state {'item': 'pay'})"]
    assert resumed.final_output == "paid"
    assert RUNS["approve:pay"] == 2  # the interrupted tool runs again from its start
    assert len(model.requests) == 2


def test_targets_resume_one_of_two_parallel_interrupts_without_rerunning_finished_work() -> None:
    model = ScriptedModel(
        [
            calls(
                call("approve", {"item": "A"}, id="a"),
                call("approve", {"item": "B"}, id="b"),
                call("lookup", {}, id="l"),
            ),
            reply("both approved"),
        ]
    )
    runner = Runner(_cashier(model))
    paused = runner.query_sync("q")
    assert _tool_texts(paused.events) == ["looked up"]
    ids = {c.info["approve"]: c.id for c in paused.interrupts}
    assert set(ids) == {"A", "B"}
    first = runner.resume_sync(paused.checkpoint_id, {ids["A"]: "ok A"})
    assert _tool_texts(first.events) == ["A: ok A (state {'item': 'A'})"]
    (again,) = first.interrupts  # B pauses again with a fresh id
    assert again.info == {"approve": "B"} and again.id != ids["B"]
    assert first.checkpoint_id not in (None, paused.checkpoint_id)  # every pause: a new one
    second = runner.resume_sync(first.checkpoint_id, {again.id: "ok B"})
    assert _tool_texts(second.events) == ["B: ok B (state {'item': 'B'})"]
    assert second.final_output == "both approved"
    assert RUNS == {"approve:A": 2, "approve:B": 3, "lookup": 1}
    tool_ids = [m.tool_call_id for m in model.requests[1].messages if m.role == "tool"]
    assert tool_ids == ["a", "b", "l"]


def test_bad_resumes_are_rejected_and_leave_the_checkpoint_usable() -> None:
    model = ScriptedModel(
        [calls(call("approve", {"item": "A"}), call("approve", {"item": "B"})), reply("done")]
    )
    runner = Runner(_cashier(model))
    paused = runner.query_sync("q")
    assert paused.checkpoint_id is not None
    with pytest.raises(ResumeError, match="exactly one interrupt"):
        runner.resume_sync(paused.checkpoint_id, value="yes")
    with pytest.raises(ResumeError, match="no pending interrupt"):
        runner.resume_sync(paused.checkpoint_id, {"not-an-id": "yes"})
    with pytest.raises(CheckpointNotFound):
        runner.resume_sync("no-such-checkpoint", value=1)
    targets = {c.id: "fine" for c in paused.interrupts}
    assert runner.resume_sync(paused.checkpoint_id, targets).final_output == "done"
    with pytest.raises(ResumeError, match="already resumed"):
        runner.resume_sync(paused.checkpoint_id, targets)


def test_resume_without_targets_pauses_again_with_fresh_ids() -> None:
    model = ScriptedModel([call("approve", {"item": "A"}), reply("done")])
    runner = Runner(_cashier(model))
    paused = runner.query_sync("q")
    again = runner.resume_sync(paused.checkpoint_id)
    assert [c.address for c in again.interrupts] == [c.address for c in paused.interrupts]
    assert again.interrupts[0].id != paused.interrupts[0].id
    assert runner.resume_sync(again.checkpoint_id, value="y").final_output == "done"


@pytest.mark.parametrize("kind", RACE_STORES)
async def test_concurrent_resumes_of_one_checkpoint_have_one_winner(
    kind: str, tmp_path: Path
) -> None:
    model = ScriptedModel([call("approve", {"item": "A"}), reply("done"), reply("twice!")])
    async with race_store(kind, tmp_path) as store:
        runner = Runner(_cashier(model), store=store)
        paused = await runner.query("q").collect()
        assert paused.checkpoint_id is not None

        async def attempt() -> str:
            try:
                return str(
                    (await runner.resume(paused.checkpoint_id, value="y").collect()).final_output
                )
            except ResumeError:
                return "rejected"

        outcomes = await asyncio.gather(*(attempt() for _ in range(5)))
    assert sorted(outcomes) == ["done", "rejected", "rejected", "rejected", "rejected"]
    assert RUNS["approve:A"] == 2


def test_a_return_directly_result_waits_for_the_resumed_tool() -> None:
    model = ScriptedModel([calls(call("lookup", {}), call("approve", {"item": "A"}))])
    agent = ChatModelAgent("C", model, tools=[approve, lookup], return_directly=["lookup"])
    runner = Runner(agent)
    paused = runner.query_sync("q")
    assert _tool_texts(paused.events) == []  # held back
    resumed = runner.resume_sync(paused.checkpoint_id, value="y")
    assert kinds(resumed.events) == ["tool:approve", "tool:lookup"]
    assert resumed.final_output == "looked up"
    assert RUNS["lookup"] == 1


def test_an_interrupt_inside_an_agent_tool_inside_a_workflow() -> None:
    inner_model = ScriptedModel([call("approve", {"item": "deep"}, id="c7"), reply("inner done")])
    inner = ChatModelAgent("Inner", inner_model, description="asks", tools=[approve])
    outer_model = ScriptedModel([call("Inner", {"request": "go"}, id="c1"), reply("outer done")])
    outer = ChatModelAgent("Outer", outer_model, tools=[AgentTool(inner)])
    first_model = ScriptedModel([reply("R1")])
    flow = SequentialAgent("S", [ChatModelAgent("A1", first_model), outer])
    runner = Runner(flow)
    paused = runner.query_sync("q")
    (ctx,) = paused.interrupts
    assert ctx.address == "agent:S;agent:Outer;tool:Inner:c1;agent:Inner;tool:approve:c7"
    pause_events = [e for e in paused.events if e.action and e.action.interrupted]
    assert pause_events == [paused.events[-1]]
    resumed = runner.resume_sync(paused.checkpoint_id, value="granted")
    texts = [
        (e.agent_name, e.message.message.content)  # type: ignore[union-attr]
        for e in resumed.events
        if e.message is not None
    ]
    assert texts == [
        ("Inner", "deep: granted (state {'item': 'deep'})"),
        ("Inner", "inner done"),
        ("Outer", "inner done"),
        ("Outer", "outer done"),
    ]
    assert resumed.final_output == "outer done"
    assert len(first_model.requests) == 1  # the finished sibling is not re-run
    # Outer's second model call still sees A1's answer rewritten for context
    assert outer_model.requests[1].messages[1].content == "For context: [A1] said: R1."


class Asker:
    """A custom agent that pauses by itself (scenario 26 style)."""

    description = ""

    def __init__(self, name: str, state: Any = None) -> None:
        self.name = name
        self.state = state

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        _count(self.name)
        answer = ctx.interrupt(f"{self.name} asks", state=self.state)
        yield ctx.event(
            message=Message.assistant(f"{self.name} got {answer} with {ctx.interrupt_state()}")
        )


class Sayer:
    description = ""

    def __init__(self, name: str) -> None:
        self.name = name

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        _count(self.name)
        yield ctx.event(message=Message.assistant(f"{self.name} says hi"))


def test_a_sequence_resumes_at_the_paused_agent_and_runs_the_rest() -> None:
    flow = SequentialAgent("seq", [Asker("sa1"), Asker("sa2", "s2"), Sayer("sa3"), Sayer("sa4")])
    runner = Runner(flow)
    first = runner.query_sync("q")
    (c1,) = first.interrupts
    assert c1.address == "agent:seq;agent:sa1"
    assert first.events[-1].run_path == ("seq", "sa1")
    second = runner.resume_sync(first.checkpoint_id, {c1.id: "r1"})
    assert second.events[0].message.message.content == "sa1 got r1 with None"  # type: ignore[union-attr]
    (c2,) = second.interrupts
    assert c2.address == "agent:seq;agent:sa2"
    assert second.events[-1].run_path == ("seq", "sa1", "sa2")
    third = runner.resume_sync(second.checkpoint_id, {c2.id: "r2"})
    assert [e.message.message.content for e in third.events] == [  # type: ignore[union-attr]
        "sa2 got r2 with s2",
        "sa3 says hi",
        "sa4 says hi",
    ]
    assert RUNS == {"sa1": 2, "sa2": 2, "sa3": 1, "sa4": 1}


def test_a_parallel_workflow_pauses_once_and_does_not_rerun_finished_children() -> None:
    flow = ParallelAgent("par", [Asker("sa1"), Asker("sa2"), Sayer("sa3"), Sayer("sa4")])
    runner = Runner(flow)
    paused = runner.query_sync("q")
    assert sorted(e.agent_name for e in paused.events[:-1]) == ["sa3", "sa4"]
    last = paused.events[-1]
    assert (last.agent_name, last.run_path) == ("par", ("par",))
    assert len(paused.interrupts) == 2
    resumed = runner.resume_sync(paused.checkpoint_id, {c.id: "go" for c in paused.interrupts})
    assert sorted(e.message.message.content for e in resumed.events) == [  # type: ignore[union-attr]
        "sa1 got go with None",
        "sa2 got go with None",
    ]
    assert RUNS == {"sa1": 2, "sa2": 2, "sa3": 1, "sa4": 1}


def test_a_transfer_target_resumes_where_it_paused() -> None:
    b_model = ScriptedModel([call("approve", {"item": "refund"}, id="r1"), reply("refunded")])
    billing = ChatModelAgent("Billing", b_model, tools=[approve])
    d_model = ScriptedModel([call("transfer_to_agent", {"agent_name": "Billing"})])
    desk = ChatModelAgent("Desk", d_model, sub_agents=[billing])
    runner = Runner(desk)
    paused = runner.query_sync("refund me")
    assert paused.interrupts[0].address == "agent:Desk;agent:Billing;tool:approve:r1"
    resumed = runner.resume_sync(paused.checkpoint_id, value="ok")
    assert resumed.final_output == "refunded"
    assert [e.run_path for e in resumed.events] == [("Desk", "Billing")] * 2
    assert len(d_model.requests) == 1
    # Billing's second call sees Desk's transfer rewritten, then its own turn verbatim
    assert [m.role for m in b_model.requests[1].messages] == [
        "system",
        "user",
        "user",
        "user",
        "assistant",
        "tool",
    ]


def test_a_supervisor_worker_pauses_and_hands_back_after_resume() -> None:
    worker_model = ScriptedModel([call("approve", {"item": "deploy"}), reply("deployed")])
    worker = ChatModelAgent("Ops", worker_model, tools=[approve])
    boss_model = ScriptedModel(
        [call("transfer_to_agent", {"agent_name": "Ops"}), reply("all good")]
    )
    runner = Runner(supervisor(ChatModelAgent("Boss", boss_model), [worker]))
    paused = runner.query_sync("deploy")
    resumed = runner.resume_sync(paused.checkpoint_id, value="approved")
    assert resumed.final_output == "all good"
    assert "For context: [Ops] said: deployed." in [
        m.content for m in boss_model.requests[1].messages
    ]


async def test_streaming_mode_comes_from_the_checkpoint() -> None:
    store = MemoryStore()
    model = ScriptedModel([call("approve", {"item": "x"}), reply("streamed answer")])
    paused = await Runner(_cashier(model), store=store, enable_streaming=True).query("q").collect()
    plain_runner = Runner(_cashier(model), store=store)
    events = [e async for e in plain_runner.resume(paused.checkpoint_id, value="y")]
    assert [e.message.is_streaming for e in events] == [False, True]  # type: ignore[union-attr]


def test_a_caller_chosen_checkpoint_id_is_used() -> None:
    model = ScriptedModel([call("approve", {"item": "x"}), reply("ok")])
    runner = Runner(_cashier(model))
    paused = runner.query_sync("q", checkpoint_id="order-42")
    assert paused.checkpoint_id == "order-42"
    assert runner.resume_sync("order-42", value="y").final_output == "ok"


async def test_corrupt_or_foreign_checkpoint_bytes_are_refused() -> None:
    store = MemoryStore()
    runner = Runner(_cashier(ScriptedModel([])), store=store)
    for raw in (b"\x00\x01 not json", b'{"some": "other format"}', b"[1, 2]"):
        await store.put_checkpoint("bad", raw)
        with pytest.raises(CheckpointCorrupt):
            await runner.resume("bad", value=1).collect()
    model = ScriptedModel([call("approve", {"item": "x"})])
    paused = await Runner(_cashier(model), store=store).query("q").collect()
    record = await store.get_checkpoint(paused.checkpoint_id)  # type: ignore[arg-type]
    assert record is not None
    await store.put_checkpoint("cut", record.data[: len(record.data) // 2])
    with pytest.raises(CheckpointCorrupt, match="not JSON"):
        await runner.resume("cut", value=1).collect()


def test_an_unserializable_session_value_is_named_by_its_path() -> None:
    class Price:
        pass

    model = ScriptedModel([call("approve", {"item": "x"})])
    values = {"cart": [{"price": 1}, {"price": 2}, {"price": Price()}]}
    result = Runner(_cashier(model)).query_sync("q", session_values=values)
    assert isinstance(result.error, SerializationError)
    assert result.error.path == "session_values['cart'][2]['price']"
    assert result.checkpoint_id is None


def test_a_custom_root_agent_can_pause() -> None:
    runner = Runner(Asker("solo", state={"step": 1}))
    paused = runner.query_sync("q")
    assert paused.interrupts[0].address == "agent:solo"
    resumed = runner.resume_sync(paused.checkpoint_id, value=7)
    assert resumed.final_output == "solo got 7 with {'step': 1}"


class SaysAsksSays:
    """A custom agent that says something, asks, then says the answer (it keeps no record:
    on a resume it runs again from its start)."""

    description = ""

    def __init__(self, name: str) -> None:
        self.name = name
        self.inputs: list[list[str]] = []

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        self.inputs.append([m.content for m in input.messages])
        yield ctx.event(message=Message.assistant(f"{self.name} starts"))
        answer = ctx.interrupt(f"{self.name} asks")
        yield ctx.event(message=Message.assistant(f"{self.name} got {answer}"))


def _texts(result: Any) -> list[str]:
    return [e.message.message.content for e in result.events if e.message is not None]


async def _run_to_the_end(runner: Runner) -> list[list[str]]:
    """Run, then resume every pause (answering each interrupt with the resume's number)
    until the run ends; return the message texts of each run."""
    result = await runner.query("go", session_id="s").collect()
    runs = [_texts(result)]
    while result.checkpoint_id is not None:
        assert result.error is None
        answers = {c.id: str(len(runs)) for c in result.interrupts}
        result = await runner.resume(result.checkpoint_id, answers).collect()
        runs.append(_texts(result))
    assert result.error is None
    return runs


async def _session_texts(store: MemoryStore) -> list[tuple[str, str]]:
    import json

    saved = json.loads(await store.get_session("s") or b"{}")
    return [(author, m["content"]) for author, m in saved["messages"]]


async def test_custom_agents_resumed_in_a_sequence_emit_and_record_each_message_once() -> None:
    a, b = SaysAsksSays("a"), SaysAsksSays("b")
    store = MemoryStore()
    runs = await _run_to_the_end(Runner(SequentialAgent("S", [a, b]), store=store))
    assert runs == [["a starts"], ["a got 1", "b starts"], ["b got 2"]]
    assert await _session_texts(store) == [
        ("user", "go"),
        ("a", "a starts"),
        ("a", "a got 1"),
        ("b", "b starts"),
        ("b", "b got 2"),
    ]
    # b sees each of a's messages once; run again, also what it said before its pause
    context = ["go", "For context: [a] said: a starts.", "For context: [a] said: a got 1."]
    assert b.inputs == [context, [*context, "b starts"]]


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda a, b: a, [["a starts"], ["a got 1"]]),
        (
            lambda a, b: LoopAgent("L", [a], max_iterations=2),
            [["a starts"], ["a got 1", "a starts"], ["a got 2"]],
        ),
        (
            lambda a, b: ParallelAgent("P", [a, b]),
            [["a starts", "b starts"], ["a got 1", "b got 1"]],
        ),
        (lambda a, b: Team.swarm(a, [a]), [["a starts"], ["a got 1"]]),
    ],
    ids=["root", "loop", "parallel", "swarm"],
)
async def test_a_resumed_custom_agent_re_emits_nothing_it_emitted_before_the_pause(
    build: Any, expected: list[list[str]]
) -> None:
    store = MemoryStore()
    runs = await _run_to_the_end(Runner(build(SaysAsksSays("a"), SaysAsksSays("b")), store=store))
    assert [sorted(run) for run in runs] == expected
    said = [text for _, text in await _session_texts(store)]
    assert sorted(said) == sorted(["go", *(text for run in expected for text in run)])
