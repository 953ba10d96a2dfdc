"""RunStream's stop button: `cancel()` and `runner.cancel()` stop tools in flight, from any
task or thread; `aclose()` from another task stops the run the same way; a stopped run is
saved and never looks like a finished one; abandoned sync tools hold nothing up."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from plait import AgentEvent, ChatModelAgent, Message, RunContext, Runner, tool
from plait.errors import RunCancelled
from plait.testing import FunctionModel, ScriptedModel, call, calls, reply

pytestmark = pytest.mark.timeout(90)


class Steps:
    """An async tool `step(n)` that hangs on the steps listed in `hang_on` until released."""

    def __init__(self, hang_on: set[int]) -> None:
        self.hang_on = hang_on
        self.ran: list[int] = []
        self.started = asyncio.Event()
        self.cancelled: list[int] = []

        @tool
        async def step(n: int) -> str:
            """Do one step.

            Args:
                n: Which step.
            """
            self.ran.append(n)
            if n in self.hang_on:
                self.started.set()
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    self.cancelled.append(n)
                    raise
            return f"step {n} done"

        self.tool = step


def _script(rounds: int) -> list[Any]:
    return [*(call("step", {"n": n}) for n in range(1, rounds + 1)), reply("all done")]


async def _bounded(coro: Any) -> Any:
    async with asyncio.timeout(20):  # the faults fixed here hang forever
        return await coro


async def test_runner_cancel_stops_a_hanging_tool_and_the_run_resumes() -> None:
    steps = Steps(hang_on={2})
    runner = Runner(ChatModelAgent("A", ScriptedModel(_script(3)), tools=[steps.tool]))
    stream = runner.query("go")
    consumer = asyncio.create_task(stream.collect())
    await _bounded(steps.started.wait())
    assert runner.cancel(stream.checkpoint_id)
    result = await _bounded(consumer)
    assert isinstance(result.error, RunCancelled)
    assert result.final_output is None
    assert result.events[-1].error is result.error
    assert result.checkpoint_id == stream.checkpoint_id
    assert steps.cancelled == [2]
    steps.hang_on = set()
    runner.agent = ChatModelAgent("A", ScriptedModel(_script(3)[2:]), tools=[steps.tool])
    resumed = await _bounded(runner.resume(result.checkpoint_id).collect())
    assert resumed.final_output == "all done"
    assert steps.ran == [1, 2, 2, 3]  # the stopped call ran again; step 1 did not


async def test_a_tool_that_polls_ctx_cancelled_is_stopped_before_it_sees_the_flag() -> None:
    # The tool wakes at every turn of the loop; the stop comes while its next wake-up is
    # queued. It is cancelled there and then, so it cannot see the flag and return a result
    # as if it had finished (the stopped call is left out and runs again on resume).
    started = asyncio.Event()
    saw: list[bool] = []

    @tool
    async def poll(ctx: RunContext) -> str:
        """Work until the run is asked to stop."""
        started.set()
        while not ctx.cancelled:  # noqa: ASYNC110 - a run's cancel is a flag
            await asyncio.sleep(0)
        saw.append(True)
        return "stopped"

    runner = Runner(ChatModelAgent("A", ScriptedModel([call("poll", {})]), tools=[poll]))
    stream = runner.query("go")
    consumer = asyncio.create_task(stream.collect())
    await _bounded(started.wait())
    stream.cancel()
    result = await _bounded(consumer)
    assert isinstance(result.error, RunCancelled)
    assert saw == []
    tool_results = [e for e in result.events if e.message is not None and e.message.role == "tool"]
    assert tool_results == []


async def test_a_stop_keeps_the_calls_of_the_round_that_finished() -> None:
    steps = Steps(hang_on={2})
    first = ScriptedModel([calls(call("step", {"n": 1}), call("step", {"n": 2}))])
    runner = Runner(ChatModelAgent("A", first, tools=[steps.tool]))
    stream = runner.query("go")
    seen: list[AgentEvent] = []

    async def consume() -> None:
        async for event in stream:
            seen.append(event)

    consumer = asyncio.create_task(consume())
    await _bounded(steps.started.wait())
    stream.cancel()
    await _bounded(consumer)
    results = [
        e.message.message for e in seen if e.message is not None and e.message.role == "tool"
    ]
    assert [m.content for m in results if m is not None] == ["step 1 done"]
    assert isinstance(seen[-1].error, RunCancelled)
    steps.hang_on = set()
    resumed_model = ScriptedModel([reply("both done")])
    runner.agent = ChatModelAgent("A", resumed_model, tools=[steps.tool])
    resumed = await _bounded(runner.resume(stream.checkpoint_id).collect())
    assert resumed.final_output == "both done"
    assert steps.ran == [1, 2, 2]  # only the stopped call ran again
    told = [m.content for m in resumed_model.requests[0].messages if m.role == "tool"]
    assert told == ["step 1 done", "step 2 done"]


async def test_cancel_works_from_another_thread() -> None:
    steps = Steps(hang_on={1})
    runner = Runner(ChatModelAgent("A", ScriptedModel(_script(2)), tools=[steps.tool]))
    stream = runner.query("go")
    consumer = asyncio.create_task(stream.collect())
    await _bounded(steps.started.wait())
    stopper = threading.Thread(target=stream.cancel)
    stopper.start()
    result = await _bounded(consumer)
    stopper.join()
    assert isinstance(result.error, RunCancelled)
    assert steps.cancelled == [1]


async def test_aclose_from_another_task_stops_the_run_and_it_never_looks_finished() -> None:
    steps = Steps(hang_on={2})
    runner = Runner(ChatModelAgent("A", ScriptedModel(_script(5)), tools=[steps.tool]))
    stream = runner.query("go")
    consumer = asyncio.create_task(stream.collect())
    await _bounded(steps.started.wait())
    await _bounded(stream.aclose())  # no RuntimeError; returns once the step has returned
    assert steps.cancelled == [2]
    result = await _bounded(consumer)
    assert isinstance(result.error, RunCancelled)
    assert isinstance(result.events[-1].error, RunCancelled)
    assert result.final_output is None
    steps.hang_on = set()
    runner.agent = ChatModelAgent("A", ScriptedModel(_script(5)[2:]), tools=[steps.tool])
    resumed = await _bounded(runner.resume(result.checkpoint_id).collect())
    assert resumed.final_output == "all done"
    assert steps.ran == [1, 2, 2, 3, 4, 5]


async def test_aclose_from_another_task_between_events_ends_with_run_cancelled() -> None:
    steps = Steps(hang_on=set())
    runner = Runner(ChatModelAgent("A", ScriptedModel(_script(5)), tools=[steps.tool]))
    stream = runner.query("go")
    got_one, closed = asyncio.Event(), asyncio.Event()
    seen: list[AgentEvent] = []

    async def consume() -> None:
        async for event in stream:
            seen.append(event)
            if not got_one.is_set():
                got_one.set()
                await closed.wait()  # busy elsewhere while another task closes the stream

    consumer = asyncio.create_task(consume())
    await _bounded(got_one.wait())
    await stream.aclose()
    closed.set()
    await _bounded(consumer)
    assert isinstance(seen[-1].error, RunCancelled)
    assert len(steps.ran) < 5
    resumed = await _bounded(runner.resume(stream.checkpoint_id).collect())
    assert resumed.error is None  # it was saved, and resumes


@pytest.mark.parametrize("stop", ["cancel", "close"])
async def test_a_sync_tool_that_checks_ctx_cancelled_stops_its_side_effect(stop: str) -> None:
    effects: list[str] = []
    started, returned = threading.Event(), threading.Event()

    @tool
    def write_slowly(ctx: RunContext) -> str:
        """Write after a while, unless the run is stopped."""
        started.set()
        try:
            for _ in range(1000):
                if ctx.cancelled:
                    effects.append("stopped early")
                    return "stopped"
                time.sleep(0.01)
            effects.append("written")
            return "written"
        finally:
            returned.set()

    model = ScriptedModel([call("write_slowly"), reply("never")])
    stream = Runner(ChatModelAgent("A", model, tools=[write_slowly])).query("go")
    consumer = asyncio.create_task(stream.collect())
    assert await asyncio.to_thread(started.wait, 10)
    if stop == "cancel":  # the stop button: the run is saved and ends with RunCancelled
        stream.cancel()
        result = await _bounded(consumer)
        assert isinstance(result.error, RunCancelled)
    else:  # the consumer goes away: the run is closed at once
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await _bounded(consumer)
    assert await asyncio.to_thread(returned.wait, 10)
    assert effects == ["stopped early"]  # and never "written"


_IGNORES_CANCEL = textwrap.dedent(
    """
    import asyncio, sys, threading, time
    from plait import ChatModelAgent, Runner, tool
    from plait.testing import ScriptedModel, call, reply

    started = threading.Event()

    @tool
    def stubborn() -> str:
        \"\"\"Sleep a long time, never looking at ctx.cancelled.\"\"\"
        started.set()
        time.sleep(120)
        return "late"

    async def cancelled() -> str:
        runner = Runner(ChatModelAgent("A", ScriptedModel([call("stubborn")]), tools=[stubborn]))
        stream = runner.query("go")
        consumer = asyncio.create_task(stream.collect())
        await asyncio.to_thread(started.wait, 30)
        stream.cancel()
        return type((await consumer).error).__name__

    if sys.argv[1] == "cancel":
        print(asyncio.run(cancelled()), flush=True)
    else:
        agent = ChatModelAgent(
            "A", ScriptedModel([call("stubborn"), reply("moved on")]), tools=[stubborn],
            tool_timeout=0.2,
        )
        print(Runner(agent).query_sync("go").final_output, flush=True)
    """
)


@pytest.mark.parametrize(("mode", "printed"), [("cancel", "RunCancelled"), ("timeout", "moved on")])
def test_a_sync_tool_that_ignores_the_stop_holds_up_neither_asyncio_run_nor_exit(
    tmp_path: Path, mode: str, printed: str
) -> None:
    script = tmp_path / "stubborn.py"
    script.write_text(_IGNORES_CANCEL)
    out = subprocess.run(
        [sys.executable, str(script), mode],
        capture_output=True,
        text=True,
        timeout=60,  # the tool sleeps 120 s: waiting for it would fail here
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == printed


# `RunStream.ended`: whether the event just returned was the run's last.


def _adder() -> ChatModelAgent:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    model = ScriptedModel([call("add", {"a": 1, "b": 2}), reply("3")])
    return ChatModelAgent(name="adder", description="adds", model=model, tools=[add])


async def test_a_run_with_a_session_says_its_last_event_is_the_last_as_it_gives_it() -> None:
    stream = Runner(_adder()).run([Message.user("add")], session_id="s1")
    seen = [(event, stream.ended) async for event in stream]
    assert [ended for _, ended in seen] == [False, False, True]
    assert seen[-1][0].output is not None and seen[-1][0].output.message is not None
    assert stream.ended


async def test_a_run_without_a_session_has_ended_once_its_iteration_ends() -> None:
    stream = Runner(_adder()).run([Message.user("add")])
    assert not stream.ended
    seen = [stream.ended async for _ in stream]
    assert seen == [False, False, False]  # its last event is known to be once none follows
    assert stream.ended


async def test_an_error_that_ends_a_run_is_given_as_its_last_event() -> None:
    def broken(messages: list[Message], tools: list[Any]) -> Message:
        raise RuntimeError("the model is down")

    agent = ChatModelAgent(name="a", description="d", model=FunctionModel(broken))
    stream = Runner(agent).run([Message.user("hi")])
    seen = [(event.error is not None, stream.ended) async for event in stream]
    assert seen == [(True, True)]
