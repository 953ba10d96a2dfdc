"""plait runs as Temporal workflows, against a real dev server (see conftest.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RetryPolicy

from plait import temporal
from plait.errors import GuardrailTripped, ResumeError, ToolError, WorkflowNondeterminism
from plait.events import AgentEvent, RunResult
from plait.messages import Message

from .agents import all_agents, asker_agent, calls, guarded

pytestmark = pytest.mark.timeout(240)

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"
WAIT = 120.0  # seconds any wait may take at most (a safety net; a busy machine is slow)


def _queue() -> str:
    return f"q-{uuid.uuid4().hex}"


async def _until(check: Callable[[], Any], what: str) -> Any:
    """Poll `check` until it returns something true; fail after `WAIT` seconds."""
    deadline = time.monotonic() + WAIT
    while True:
        found = check()
        if asyncio.iscoroutine(found):
            found = await found
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        await asyncio.sleep(0.05)


async def _events(handle: WorkflowHandle[Any, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = await handle.query("events")
    return events


async def _paused(handle: WorkflowHandle[Any, Any]) -> list[dict[str, Any]]:
    """Wait until the run waits for a resume; return its pending interrupts."""

    async def pending() -> list[dict[str, Any]] | None:
        events = await _events(handle)
        if events and (events[-1].get("action") or {}).get("interrupted"):
            found: list[dict[str, Any]] = events[-1]["action"]["interrupted"]["contexts"]
            return found
        return None

    found: list[dict[str, Any]] = await _until(pending, "the run to pause")
    return found


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
    """Start worker processes (`worker_proc.py`) on a task queue; kill them at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(queue: str, address: str = "") -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "worker_proc.py"), address, queue, str(tmp_path)],
            env=_env(),
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.fixture
async def serving(client: Client, tmp_path: Path) -> AsyncIterator[str]:
    """A worker in this process serving the test agents; yields its task queue."""
    queue = _queue()
    options = {
        "tool:slow": {
            "start_to_close_timeout": timedelta(seconds=1),
            "retry_policy": RetryPolicy(maximum_attempts=1),
        },
        "tool:nap": {
            "heartbeat_timeout": timedelta(seconds=1),
            "retry_policy": RetryPolicy(maximum_attempts=1),
        },
    }
    async with temporal.worker(
        client, all_agents(tmp_path), task_queue=queue, activity_options=options
    ):
        yield queue


async def test_a_coordinator_team_run_completes_with_its_members_as_control_flow(
    client: Client, serving: str, tmp_path: Path
) -> None:
    handle = await temporal.start(client, "lead", "what is the answer?", task_queue=serving)
    result = await handle.result()
    assert isinstance(result, RunResult)
    assert result.error is None
    assert result.final_output == "final: written: found: answer is 42"
    assert calls(tmp_path) == [
        "model lead 0",
        "model researcher 0",
        "tool lookup answer",
        "model researcher 1",
        "model lead 1",
        "model writer",
        "model lead 2",
    ]
    paths = {tuple(e.run_path) for e in result.events}
    assert ("lead", "researcher") in paths and ("lead", "writer") in paths
    # only leaf calls are activities: 6 model calls and 1 tool call, no member "activity"
    history = await handle.fetch_history()
    kinds = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert sorted(kinds) == ["plait-model"] * 6 + ["plait-tool"]


async def test_the_events_query_returns_the_events_as_json_also_after_the_run(
    client: Client, serving: str
) -> None:
    handle = await temporal.start(
        client, "lead", "go", workflow_id=f"ev-{uuid.uuid4().hex}", task_queue=serving
    )
    assert handle.id.startswith("ev-")
    result = await handle.result()
    events = await _events(handle)
    assert events == [json.loads(e.to_json()) for e in result.events]
    assert [AgentEvent.from_json(json.dumps(e)) for e in events] == list(result.events)
    assert events[-1]["output"]["message"]["message"]["content"] == result.final_output


async def test_a_worker_killed_mid_run_is_replaced_and_no_finished_call_runs_again(
    client: Client, temporal_address: str, spawn: Any, tmp_path: Path
) -> None:
    queue = _queue()
    first = spawn(queue, temporal_address)
    handle = await temporal.start(client, "steps", "three steps", task_queue=queue)
    await _until(lambda: "tool start 2" in calls(tmp_path), "step 2 to start")
    first.send_signal(signal.SIGKILL)
    first.wait()
    (tmp_path / "go").write_text("go")
    spawn(queue, temporal_address)
    result = await asyncio.wait_for(handle.result(), WAIT)
    assert result.error is None and result.final_output == "done"
    done = calls(tmp_path)
    for line in ("model 0", "model 1", "model 2", "model 3", "tool done 1", "tool done 3"):
        assert done.count(line) == 1, (line, done)
    assert done.count("tool done 2") == 1, done  # step 2 never finished on the killed worker
    assert done.index("tool done 1") < done.index("tool done 2") < done.index("tool done 3")
    tool_events = [e for e in result.events if e.message is not None and e.message.role == "tool"]
    assert len(tool_events) == 3


async def test_a_paused_run_is_resumed_from_another_process(
    client: Client, serving: str, temporal_address: str, tmp_path: Path
) -> None:
    handle = await temporal.start(client, "asker", "approve it", task_queue=serving)
    pending = await _paused(handle)
    assert len(pending) == 1 and pending[0]["info"] == {"question": "approve invoice?"}
    assert pending[0]["address"] == "agent:asker;tool:approve:a1"
    # the other process runs while this one's worker goes on serving (no blocking wait)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "resume_proc.py"),
        temporal_address,
        handle.id,
        '"yes"',
        env=_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), WAIT)
    assert proc.returncode == 0, stderr.decode()
    assert stdout.decode().strip() == "resumed"
    result = await handle.result()
    assert result.error is None
    assert result.final_output == "approved: yes"
    assert calls(tmp_path).count("model 0") == 1  # the first model call did not run again
    events = await _events(handle)
    assert any((e.get("action") or {}).get("interrupted") for e in events)


async def test_a_rejected_resume_raises_and_leaves_the_run_waiting(
    client: Client, serving: str
) -> None:
    handle = await temporal.start(client, "asker", "approve it", task_queue=serving)
    pending = await _paused(handle)
    with pytest.raises(ResumeError, match="unknown interrupt"):
        await temporal.resume(handle, {"no-such-id": True})
    with pytest.raises(ResumeError):
        await temporal.resume(handle)
    assert await _paused(handle) == pending  # still waiting on the same interrupt
    await temporal.resume(handle, {pending[0]["id"]: "ok"})
    result = await handle.result()
    assert result.final_output == "approved: ok"
    with pytest.raises(ResumeError, match="not waiting"):
        await temporal.resume(handle, value="again")


async def test_a_tool_activity_that_times_out_fails_as_that_tool_call(
    client: Client, serving: str
) -> None:
    handle = await temporal.start(client, "sloth", "be slow", task_queue=serving)
    result = await asyncio.wait_for(handle.result(), WAIT)
    assert result.error is None
    assert "tool 'slow'" in result.final_output
    assert "activity timed out" in result.final_output


async def test_a_call_longer_than_its_heartbeat_timeout_heartbeats_and_finishes(
    client: Client, serving: str
) -> None:
    handle = await temporal.start(client, "sloth", "take a nap", task_queue=serving)
    result = await asyncio.wait_for(handle.result(), WAIT)
    assert result.error is None
    assert result.final_output == "rested"


async def test_a_changed_agent_replaying_a_run_in_flight_is_nondeterminism(
    client: Client, serving: str, tmp_path: Path
) -> None:
    handle = await temporal.start(client, "asker", "approve it", task_queue=serving)
    await _paused(handle)
    history = await handle.fetch_history()
    await temporal.replayer([asker_agent(tmp_path)]).replay_workflow(history)  # same: fine
    changed = asker_agent(tmp_path, tool_name="approve_v2")
    with pytest.raises(WorkflowNondeterminism) as caught:
        await temporal.replayer([changed]).replay_workflow(history)
    assert caught.value.workflow_id == handle.id
    assert handle.id in str(caught.value)


async def _activity_kinds(handle: WorkflowHandle[Any, Any]) -> list[str]:
    history = await handle.fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]


async def test_a_graph_runs_its_sync_node_as_an_activity(
    client: Client, serving: str, tmp_path: Path
) -> None:
    handle = await temporal.start(client, "counter", "hello", task_queue=serving)
    result = await handle.result()
    assert result.error is None, result.error
    assert result.final_output["order"] == ["measured 5", "noted"]
    assert calls(tmp_path) == ["node measure"]
    assert await _activity_kinds(handle) == ["plait-node"]


async def test_a_swarm_transfers_in_the_workflow_and_its_summary_is_an_activity(
    client: Client, serving: str, tmp_path: Path
) -> None:
    handle = await temporal.start(client, "support", "refund please", task_queue=serving)
    result = await handle.result()
    assert result.error is None, result.error
    assert result.final_output.startswith("billing saw:")
    assert "the user wants a refund" in result.final_output
    assert result.handoffs[0].to_agent == "billing"
    assert calls(tmp_path) == ["model desk", "model summary", "model billing"]
    assert await _activity_kinds(handle) == ["plait-model"] * 3


async def test_a_worker_shut_down_with_a_run_in_flight_leaves_it_to_the_next_quietly(
    client: Client, tmp_path: Path
) -> None:
    import gc

    noise: list[str] = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda u: noise.append(f"{u.exc_value!r} in {u.object!r}")
    try:
        queue = _queue()
        async with temporal.worker(client, all_agents(tmp_path), task_queue=queue):
            handle = await temporal.start(client, "steps", "go", task_queue=queue)
            await _until(lambda: "tool start 2" in calls(tmp_path), "step 2 to start")
            (tmp_path / "go").write_text("go")  # the activity ends; the workflow waits
        gc.collect()
        async with temporal.worker(client, all_agents(tmp_path), task_queue=queue):
            result = await asyncio.wait_for(handle.result(), WAIT)
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert result.final_output == "done"
    assert noise == []


def test_bad_activity_options_and_agents_are_usage_errors() -> None:
    from plait.errors import UsageError

    with pytest.raises(UsageError, match="activity_options key"):
        temporal.replayer([asker_agent(Path("."))], activity_options={"tools:x": {}})
    with pytest.raises(UsageError, match="not options"):
        temporal.replayer([asker_agent(Path("."))], activity_options={"default": {"nope": 1}})
    with pytest.raises(UsageError, match="two agents"):
        temporal.replayer([asker_agent(Path(".")), asker_agent(Path("."))])
    assert issubclass(ToolError, Exception)


async def test_a_worker_with_changed_agents_fails_a_run_in_flight_with_nondeterminism(
    client: Client, temporal_address: str, spawn: Any, tmp_path: Path
) -> None:
    queue = _queue()
    first = spawn(queue, temporal_address)
    handle = await temporal.start(client, "asker", "approve it", task_queue=queue)
    await _paused(handle)
    first.send_signal(signal.SIGKILL)
    first.wait()
    changed = asker_agent(tmp_path, tool_name="approve_v2")
    async with temporal.worker(client, [changed], task_queue=queue):
        with pytest.raises(ResumeError):
            await temporal.resume(handle, value="yes")
        with pytest.raises(WorkflowNondeterminism) as caught:
            await asyncio.wait_for(handle.result(), WAIT)
    assert caught.value.workflow_id == handle.id
    assert handle.id in str(caught.value)


async def test_local_activities_run_the_calls_without_scheduled_activity_tasks(
    client: Client, tmp_path: Path
) -> None:
    queue = _queue()
    options = {"default": {"local": True, "start_to_close_timeout": timedelta(seconds=30)}}
    async with temporal.worker(
        client, all_agents(tmp_path), task_queue=queue, activity_options=options
    ):
        handle = await temporal.start(client, "lead", "what is the answer?", task_queue=queue)
        result = await handle.result()
    assert result.final_output == "final: written: found: answer is 42"
    assert await _activity_kinds(handle) == []  # recorded as markers, no activity tasks
    history = await handle.fetch_history()
    markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")]
    assert len(markers) == 7


async def test_an_interrupt_inside_an_agent_tool_pauses_and_resumes_at_its_address(
    client: Client, serving: str, tmp_path: Path
) -> None:
    handle = await temporal.start(client, "desk", "sign please", task_queue=serving)
    pending = await _paused(handle)
    assert pending[0]["address"] == "agent:desk;tool:clerk:d1;agent:clerk;tool:sign:k1"
    await temporal.resume(handle, value="yes")
    result = await handle.result()
    assert result.error is None, result.error
    assert result.final_output == "signed: yes; yes by clerk"
    keys = [line for line in calls(tmp_path) if line.startswith("key ")]
    assert len(keys) == 2 and keys[0] == keys[1]  # the same idempotency key on the resume
    assert keys[0].startswith("key plait-")


async def test_an_agent_the_worker_does_not_serve_ends_the_run_with_a_usage_error(
    client: Client, serving: str
) -> None:
    from plait.errors import UsageError

    handle = await temporal.start(client, "nobody", [Message.user("hi")], task_queue=serving)
    result = await handle.result()
    assert isinstance(result.error, UsageError)
    assert "no agent named 'nobody'" in str(result.error)
    with pytest.raises(UsageError, match="str or a list"):
        await temporal.start(client, "asker", 42, task_queue=serving)  # type: ignore[arg-type]


async def test_sync_guardrails_and_a_sync_model_input_run_in_the_workflow_and_it_ends(
    client: Client, serving: str, tmp_path: Path
) -> None:
    handle = await temporal.start(client, "guarded", "two and two?", task_queue=serving)
    result = await asyncio.wait_for(handle.result(), WAIT)
    assert result.error is None, result.error
    assert result.final_output == "the answer is: two and two? (be brief)"
    assert sorted(calls(tmp_path)) == [
        "input guardrail two and two?",
        "model",
        f"output guardrail {result.final_output}",
    ]
    assert await _activity_kinds(handle) == ["plait-model"]  # the guardrails: in the workflow
    history = await handle.fetch_history()
    await temporal.replayer([guarded(tmp_path)]).replay_workflow(history)  # deterministic


@pytest.mark.parametrize(
    ("text", "kind", "name", "info"),
    [
        ("my homework, please", "input", "no_homework", {"topic": "homework"}),
        ("the secret?", "output", "no_secret", {"said": "the answer is: the secret? (be brief)"}),
    ],
    ids=["input", "output"],
)
async def test_a_sync_guardrail_that_trips_ends_the_workflow_with_guardrail_tripped(
    client: Client, serving: str, text: str, kind: str, name: str, info: Any
) -> None:
    handle = await temporal.start(client, "guarded", text, task_queue=serving)
    result = await asyncio.wait_for(handle.result(), WAIT)
    assert isinstance(result.error, GuardrailTripped), result.error
    assert (result.error.kind, result.error.guardrail) == (kind, name)
    assert result.error.agent_name == "guarded" and result.error.info == info
    assert result.final_output is None


async def test_the_sync_exit_tool_ends_the_agent_in_the_workflow(
    client: Client, serving: str
) -> None:
    handle = await temporal.start(client, "finisher", "go", task_queue=serving)
    result = await asyncio.wait_for(handle.result(), WAIT)
    assert result.error is None, result.error
    assert result.final_output == "finished via exit"
    assert await _activity_kinds(handle) == ["plait-model"]  # `exit` is control flow


async def test_a_compaction_summary_is_a_model_activity(
    client: Client, serving: str, tmp_path: Path
) -> None:
    talk = [Message.user("a" * 300), Message.assistant("b" * 300), Message.user("and now?")]
    handle = await temporal.start(client, "compact", talk, task_queue=serving)
    result = await handle.result()
    assert result.error is None, result.error
    assert "they talked at length" in result.final_output
    assert calls(tmp_path) == ["model summary", "model answer"]
    assert await _activity_kinds(handle) == ["plait-model", "plait-model"]


@pytest.mark.parametrize("gate", [{"effect": "once"}, {"approval": True}], ids=["once", "approval"])
def test_a_tool_with_a_once_effect_or_an_approval_is_refused_not_run_ungated(
    gate: dict[str, Any],
) -> None:
    from plait import ChatModelAgent, tool
    from plait.errors import UsageError
    from plait.testing import ScriptedModel

    @tool(**gate)
    def pay(cents: int) -> str:
        """Pay.

        Args:
            cents: How much.
        """
        return f"paid {cents}"

    agent = ChatModelAgent("Payer", ScriptedModel([]), tools=[pay])
    with pytest.raises(UsageError, match=r"tool 'pay' has .*plait\.temporal does not run"):
        temporal.replayer([agent])
