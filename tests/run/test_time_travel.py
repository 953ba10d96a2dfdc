"""Time travel: `Runner.history` lists a run's kept steps, `Runner.fork` starts a new run from
one of them, leaving the original as it was."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path
from typing import Any

import pytest

from plait import (
    AgentContext,
    AgentEvent,
    ChatModelAgent,
    Message,
    Runner,
    StepSnapshot,
    Team,
    ToolInfo,
    tool,
)
from plait.errors import CheckpointNotFound, ResumeError, UsageError
from plait.events import AgentOutput, MessageVariant
from plait.run import time_travel
from plait.stores import MemoryStore
from plait.testing import FunctionModel, call, reply

ROOT = Path(__file__).resolve().parents[2]


@tool
def add(ctx: AgentContext, a: int, b: int) -> str:
    """Add two numbers, in the session's unit."""
    unit = ctx.session_values.get("unit", "")
    return f"{a + b}{unit}"


def _counting(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
    """Call `add` three times (the n-th call adds n and 1), then sum up the results."""
    results = [m.content for m in messages if m.role == "tool"]
    if len(results) < 3:
        n = len(results)
        return call("add", {"a": n, "b": 1}, id=f"call-{n}")
    return "results: " + ", ".join(results)


def _runner(store: MemoryStore | None = None, **kw: Any) -> Runner:
    agent = ChatModelAgent("calc", FunctionModel(_counting), tools=[add])
    return Runner(agent, store=store or MemoryStore(), durability="step", **kw)


def _text(event: AgentEvent | None) -> str:
    """The text of an event's whole message."""
    assert event is not None and event.message is not None and event.message.message
    return event.message.message.content


def _shown(events: tuple[AgentEvent, ...] | list[AgentEvent]) -> list[str]:
    return [event.to_json() for event in events]


def _records(store: MemoryStore, checkpoint_id: str) -> dict[str, Any]:
    """The raw records (bytes, version, status, expiry) of the run `checkpoint_id`: its
    checkpoint, its history and its step snapshots."""
    return {
        k: v
        for k, v in store._checkpoints.items()
        if k == checkpoint_id or k.startswith(f"{checkpoint_id}.")
    }


async def test_a_react_run_with_tools_keeps_one_snapshot_per_step() -> None:
    runner = _runner()
    result = await runner.query("go", checkpoint_id="job", session_values={"unit": "m"}).collect()
    assert result.final_output == "results: 1m, 2m, 3m"
    steps = await runner.history("job")
    assert [s.step for s in steps] == [1, 2, 3]
    assert all(isinstance(s, StepSnapshot) and s.agent == "calc" for s in steps)
    # the last event before each step is the tool result of its round
    assert [_text(s.event) for s in steps] == ["1m", "2m", "3m"]
    assert [s.session_values for s in steps] == [{"unit": "m"}] * 3
    # the snapshots outlive the finished run (until the checkpoint's ttl)
    assert (await runner.read_checkpoint("job.step-2")).running


class _CountingStore(MemoryStore):
    """A memory store that counts the checkpoint reads and writes made to it, by method."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[str] = collections.Counter()

    async def get_checkpoint(self, checkpoint_id: str) -> Any:
        self.calls["get_checkpoint"] += 1
        return await super().get_checkpoint(checkpoint_id)

    async def put_checkpoint(
        self, checkpoint_id: str, data: bytes, *, status: Any = "pending", ttl: Any = None
    ) -> int:
        self.calls["put_checkpoint"] += 1
        return await super().put_checkpoint(checkpoint_id, data, status=status, ttl=ttl)

    async def put_checkpoints(
        self, writes: Any, *, ttl: float | None = None, flush: bool = True
    ) -> list[int]:
        self.calls["put_checkpoints"] += 1
        assert not flush  # a step save, or its retire
        return await super().put_checkpoints(writes, ttl=ttl, flush=flush)


async def test_each_step_is_one_write_and_the_end_of_the_run_one_more_with_no_read() -> None:
    store = _CountingStore()
    runner = _runner(store)
    result = await runner.query("go", checkpoint_id="job").collect()
    assert result.final_output == "results: 1, 2, 3"
    # a read before it starts (its id is free); each step's checkpoint, snapshot and
    # history in one write; the retire, with no read
    assert store.calls == {"get_checkpoint": 1, "put_checkpoints": 4}
    found = await store.get_checkpoint("job")
    assert found is not None and found.status == "done"
    assert [s.step for s in await runner.history("job")] == [1, 2, 3]


async def test_a_team_run_names_the_member_that_took_each_step() -> None:
    def triage(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
        return call("transfer_to_agent", {"agent_name": "billing"}, id="t1")

    def billing(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
        if messages[-1].role == "tool" and messages[-1].name == "add":
            return reply("the bill is " + messages[-1].content)
        return call("add", {"a": 4, "b": 6}, id="b1")

    team = Team.swarm(
        "triage",
        [
            ChatModelAgent("triage", FunctionModel(triage), description="routes"),
            ChatModelAgent("billing", FunctionModel(billing), description="bills", tools=[add]),
        ],
        name="desk",
    )
    runner = Runner(team, durability="step")
    result = await runner.query("bill?", checkpoint_id="t").collect()
    assert result.final_output == "the bill is 10"
    steps = await runner.history("t")
    assert [s.step for s in steps] == list(range(1, len(steps) + 1))
    assert [s.agent for s in steps][-1] == "billing"
    assert steps[-1].event is not None and steps[-1].event.agent_name == "billing"
    forked = await runner.fork("t", steps[-1].step).collect()
    assert forked.final_output == "the bill is 10"


@pytest.mark.parametrize("step", [1, 2, 3])
async def test_a_fork_continues_as_the_original_did_after_its_step(step: int) -> None:
    store = MemoryStore()
    runner = _runner(store)
    original = await runner.query("go", checkpoint_id="job").collect()
    kept = await runner.history("job")
    before = _records(store, "job")
    stream = runner.fork("job", step)
    forked = await stream.collect()
    assert forked.error is None and forked.final_output == original.final_output == (
        "results: 1, 2, 3"
    )
    # the same events the original emitted after that step: from the one after its last
    last = kept[step - 1].event
    assert last is not None
    after = _shown(original.events)
    tail = after[after.index(last.to_json()) + 1 :]
    assert _shown(forked.events) == tail
    # the original is untouched, byte for byte; the fork has its own id and history
    assert _records(store, "job") == before
    assert stream.checkpoint_id != "job"
    own = await runner.history(stream.checkpoint_id)
    assert [s.step for s in own] == list(range(step, 4))
    assert await runner.history("job") == kept


async def test_a_fork_with_edited_session_values_changes_the_outcome() -> None:
    store = MemoryStore()
    runner = _runner(store)
    await runner.query("go", checkpoint_id="job", session_values={"unit": "m"}).collect()
    before = _records(store, "job")
    forked = await runner.fork("job", 2, "job-km", {"unit": "km"}).collect()
    assert forked.final_output == "results: 1m, 2m, 3km"  # the calls after step 2 see km
    (first, *_) = await runner.history("job-km")
    assert (first.step, first.session_values) == (2, {"unit": "km"})
    assert _records(store, "job") == before
    # a fork of the fork, from the step it started at, starts with the edited values
    again = await runner.fork("job-km", 2, "job-km-2").collect()
    assert again.final_output == "results: 1m, 2m, 3km"


async def test_only_the_last_keep_history_steps_are_kept() -> None:
    def many(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
        n = sum(m.role == "tool" for m in messages)
        return call("add", {"a": n, "b": 0}, id=f"c{n}") if n < 104 else "done"

    store = MemoryStore()
    agent = ChatModelAgent("calc", FunctionModel(many), tools=[add], max_iterations=200)
    runner = Runner(agent, store=store, durability="step")
    assert (await runner.query("go", checkpoint_id="long").collect()).final_output == "done"
    steps = await runner.history("long")
    assert [s.step for s in steps] == list(range(5, 105))  # the last 100 by default
    assert await store.get_checkpoint("long.step-4") is None  # older ones are deleted
    assert await store.get_checkpoint("long.step-5") is not None
    with pytest.raises(CheckpointNotFound, match="keeps steps 5 to 104"):
        await runner.fork("long", 4).collect()

    small = _runner(keep_history=2)
    await small.query("go", checkpoint_id="job").collect()
    assert [s.step for s in await small.history("job")] == [2, 3]
    assert await small.store.get_checkpoint("job.step-1") is None


async def test_keep_history_zero_keeps_no_history() -> None:
    runner = _runner(keep_history=0)
    result = await runner.query("go", checkpoint_id="job").collect()
    assert result.final_output == "results: 1, 2, 3"
    assert await runner.history("job") == []
    assert await runner.store.get_checkpoint("job.step-1") is None


async def test_unknown_checkpoints_have_no_history_and_unknown_steps_cannot_be_forked() -> None:
    runner = _runner()
    assert await runner.history("nothing") == []
    with pytest.raises(CheckpointNotFound, match="no step 1"):
        await runner.fork("nothing", 1).collect()
    await runner.query("go", checkpoint_id="job").collect()
    for step in (0, 4, -1):
        with pytest.raises(CheckpointNotFound, match=f"no step {step}"):
            await runner.fork("job", step).collect()
    # a run without durability="step" keeps no history
    plain = Runner(runner.agent)
    await plain.query("go", checkpoint_id="exit").collect()
    assert await plain.history("exit") == []


async def test_bad_arguments_are_refused() -> None:
    runner = _runner()
    with pytest.raises(UsageError, match="keep_history"):
        _runner(keep_history=-1)
    with pytest.raises(UsageError, match="keep_history"):
        _runner(keep_history=True)
    with pytest.raises(UsageError, match="step must be an int"):
        runner.fork("job", "1")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="new checkpoint id"):
        runner.fork("job", 1, "job")
    with pytest.raises(UsageError, match="session_values"):
        runner.fork("job", 1, session_values=[1])  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="checkpoint_id"):
        await runner.history("bad\nid")


async def test_a_fork_is_refused_by_another_agent_and_over_a_live_run() -> None:
    store = MemoryStore()
    runner = _runner(store)
    await runner.query("go", checkpoint_id="job").collect()
    other = Runner(ChatModelAgent("other", FunctionModel(_counting)), store=store)
    with pytest.raises(ResumeError, match="belongs to agent 'calc'"):
        await other.fork("job", 1).collect()
    await store.put_checkpoint("busy", b"{}")  # a pending run under the id asked for
    with pytest.raises(UsageError, match="holds a run that is pending"):
        await runner.fork("job", 1, "busy").collect()


async def test_a_resumed_run_adds_its_steps_to_the_history_it_resumed() -> None:
    asked: list[str] = []

    @tool
    def approve(ctx: AgentContext) -> str:
        """Ask a person."""
        from plait import interrupt

        answer = interrupt("ok?")
        asked.append(str(answer))
        return f"approved {answer}"

    def flow(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
        n = sum(m.role == "tool" for m in messages)
        if n == 0:
            return call("add", {"a": 1, "b": 1}, id="a")
        if n == 1:
            return call("approve", {}, id="b")
        if n == 2:
            return call("add", {"a": 2, "b": 2}, id="c")
        return "done"

    agent = ChatModelAgent("calc", FunctionModel(flow), tools=[add, approve])
    runner = Runner(agent, durability="step")
    paused = await runner.query("go", checkpoint_id="job").collect()
    assert paused.checkpoint_id == "job" and [s.step for s in await runner.history("job")] == [1]
    done = await runner.resume("job", value="yes").collect()
    assert done.final_output == "done"
    assert [s.step for s in await runner.history("job")] == [1, 2, 3]


async def test_the_history_expires_with_the_checkpoints_ttl() -> None:
    now = [1000.0]
    store = MemoryStore(clock=lambda: now[0])
    runner = _runner(store, checkpoint_ttl=60)
    await runner.query("go", checkpoint_id="job").collect()
    assert len(await runner.history("job")) == 3
    now[0] += 59
    assert len(await runner.history("job")) == 3
    now[0] += 2
    assert await runner.history("job") == []
    with pytest.raises(CheckpointNotFound):
        await runner.fork("job", 1).collect()


async def test_a_reused_checkpoint_id_starts_a_new_history() -> None:
    store = MemoryStore()
    runner = _runner(store)
    await runner.query("go", checkpoint_id="job").collect()
    await runner.query("again", checkpoint_id="job").collect()
    assert [s.step for s in await runner.history("job")] == [1, 2, 3]
    short = Runner(
        ChatModelAgent("calc", FunctionModel(lambda m, t: "at once"), tools=[add]),
        store=store,
        durability="step",
    )
    assert (await short.query("q", checkpoint_id="job").collect()).final_output == "at once"
    assert await short.history("job") == []  # a run that took no step has none
    assert await store.get_checkpoint("job.step-1") is None


async def test_an_event_that_is_not_json_is_kept_as_its_text() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    from collections.abc import AsyncIterator

    from plait import AgentInput, AgentOutput

    class Custom:
        """An agent that emits a custom value that is not JSON, then takes a step."""

        name = "custom"
        description = ""

        async def run(self, input: AgentInput, ctx: Any) -> AsyncIterator[AgentEvent]:
            yield ctx.event(output=AgentOutput(custom=Opaque()))
            stop = await ctx.safe_point()
            if stop is not None:
                yield stop
                return
            yield ctx.event(message=Message.assistant("end"))

    runner = Runner(Custom(), durability="step")
    result = await runner.query("q", checkpoint_id="c").collect()
    assert result.error is None
    (kept,) = await runner.history("c")
    assert kept.agent == "custom" and kept.event is not None
    assert kept.event.output is not None and kept.event.output.custom == "<opaque>"


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


_WHOLE = MessageVariant(is_streaming=False, role="assistant", message=Message.user("é ü"))


def _event(output: AgentOutput) -> AgentEvent:
    return AgentEvent(agent_name="a", run_path=("a",), output=output)


@pytest.mark.parametrize(
    ("event", "values"),
    [
        (None, {}),
        (_event(AgentOutput(message=_WHOLE)), {}),
        (
            _event(AgentOutput(custom={"x": [1.5, "🙂"]})),
            {"n": float("nan"), "big": 10**17, "f": 1e-7, "t": ("a", 2), "bad": _Opaque()},
        ),
        (_event(AgentOutput(custom=_Opaque())), {"k": "v"}),
    ],
)
def test_a_history_entry_holds_what_its_parts_encode_to(
    event: AgentEvent | None, values: dict[str, Any]
) -> None:
    entry = time_travel._step_json(3, "agent é", event, values, {"s": values})
    assert json.loads(entry) == {
        "step": 3,
        "agent": "agent é",
        "event": time_travel.encode_event(event),
        "session_values": time_travel.encode_values(values),
        "state": time_travel.encode_values({"s": values}),
    }
    document = time_travel._History.model_validate_json(time_travel._join([entry, entry]))
    assert [kept.step for kept in document.steps] == [3, 3]


def _docs_example() -> str:
    page = (ROOT / "docs" / "capabilities" / "time-travel.md").read_text()
    section = page.split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return block.group(1)


def test_the_docs_example_runs() -> None:
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(
        compile(_docs_example(), "docs/capabilities/time-travel.md", "exec", dont_inherit=True),
        namespace,
    )
    assert namespace["original"].final_output != namespace["forked"].final_output
