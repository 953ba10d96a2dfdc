"""Runner: streams, results, filters, errors as events, run context, clean cancellation."""

from __future__ import annotations

import asyncio
import copy
import gc
import inspect
from collections.abc import AsyncIterator
from typing import Any

import pytest

from plait import (
    AgentEvent,
    AgentInput,
    ChatModelAgent,
    Message,
    RunContext,
    Runner,
    RunResult,
    Usage,
    interrupt,
    run_context,
    tool,
)
from plait.errors import AgentError, ModelError, UsageError
from plait.stores import MemoryStore
from plait.testing import ScriptedModel, call, reply
from tests.conftest import kinds


@tool
async def add(a: int, b: int) -> int:
    """Add.

    Args:
        a: First.
        b: Second.
    """
    return a + b


def _calc(model: ScriptedModel) -> ChatModelAgent:
    return ChatModelAgent("calc", model, tools=[add])


def test_run_sync_returns_a_complete_result_with_usage_summed() -> None:
    model = ScriptedModel(
        [
            call("add", {"a": 1, "b": 2}, usage=Usage(input_tokens=10, output_tokens=3)),
            reply("3", usage=Usage(input_tokens=15, output_tokens=1)),
        ]
    )
    result = Runner(_calc(model)).run_sync([Message.user("1+2?")])
    assert kinds(result.events) == ["assistant", "tool:add", "assistant"]
    assert result.final_output == "3"
    assert result.error is None
    assert result.usage == Usage(input_tokens=25, output_tokens=4)
    assert (result.interrupts, result.checkpoint_id, result.handoffs) == ((), None, ())


async def test_usage_is_summed_in_streaming_mode_too() -> None:
    model = ScriptedModel([reply("a b", usage=Usage(input_tokens=2, output_tokens=2))])
    result = await Runner(_calc(model), enable_streaming=True).query("q").collect()
    assert result.usage == Usage(input_tokens=2, output_tokens=2)
    assert result.final_output == "a b"


def test_event_filter_drops_events_but_not_the_result() -> None:
    model = ScriptedModel([call("add", {"a": 1, "b": 1}), reply("2")])
    only_tools = Runner(
        _calc(model), event_filter=lambda e: e.message is not None and e.message.role == "tool"
    )
    result = only_tools.query_sync("q")
    assert kinds(result.events) == ["tool:add"]
    assert result.final_output == "2"


def test_errors_are_events_and_run_sync_never_raises() -> None:
    result = Runner(_calc(ScriptedModel([]))).query_sync("q")
    assert kinds(result.events) == ["error:ModelError"]
    assert result.final_output is None
    with pytest.raises(ModelError):
        result.raise_for_error()


def test_session_values_are_seeded_and_shared_with_tools() -> None:
    seen = {}

    @tool
    def remember(note: str) -> str:
        """Remember a note.

        Args:
            note: The note.
        """
        ctx = run_context()
        seen.update(agent=ctx.agent_name, path=ctx.run_path, user=ctx.session_values["user"])
        ctx.session_values["note"] = note
        return "ok"

    model = ScriptedModel([call("remember", {"note": "n1"}), reply("{done}")])
    agent = ChatModelAgent("mem", model, tools=[remember], instruction="User {user}")
    runner = Runner(agent)

    async def main() -> dict[str, object]:
        stream = runner.query("q", session_values={"user": "ann"})
        await stream.collect()
        return stream.context.session_values

    values = asyncio.run(main())
    assert values == {"user": "ann", "note": "n1"}
    assert seen == {"agent": "mem", "path": ("mem",), "user": "ann"}
    assert model.requests[0].messages[0] == Message.system("User ann")


def test_run_context_outside_a_run_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="only available"):
        run_context()


class EchoAgent:
    """A custom agent written against the Agent protocol."""

    name = "echo"
    description = "Repeats the last message."

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        assert run_context() is ctx
        yield ctx.event(message=Message.assistant(input.messages[-1].content))


class BrokenAgent:
    name = "broken"
    description = ""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield ctx.event(message=Message.assistant("before"))
        raise KeyError("missing")


def test_custom_agents_run_and_their_exceptions_become_agent_errors() -> None:
    assert Runner(EchoAgent()).query_sync("hello").final_output == "hello"
    result = Runner(BrokenAgent()).query_sync("x")
    assert kinds(result.events) == ["assistant", "error:AgentError"]
    assert isinstance(result.error, AgentError) and result.error.agent_name == "broken"


def test_bad_runner_inputs_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="needs an Agent"):
        Runner(object())  # type: ignore[arg-type]
    runner = Runner(EchoAgent())
    with pytest.raises(UsageError, match="query"):
        runner.run("text")  # type: ignore[arg-type]


async def test_sync_methods_refuse_to_run_inside_an_event_loop() -> None:
    with pytest.raises(UsageError, match="own event loop"):
        Runner(EchoAgent()).query_sync("x")


def test_each_sync_method_takes_the_arguments_of_the_stream_it_drains() -> None:
    def shape(method: Any) -> list[tuple[str, Any, Any]]:
        parameters = inspect.signature(method).parameters.values()
        return [(p.name, p.kind, p.default) for p in parameters]

    for name in ("run", "query", "resume"):
        assert shape(getattr(Runner, f"{name}_sync")) == shape(getattr(Runner, name)), name
        drained = inspect.signature(getattr(Runner, f"{name}_sync"))
        assert drained.return_annotation in ("RunResult", RunResult), name
        assert getattr(Runner, f"{name}_sync").__doc__, name
    runner = Runner(EchoAgent())
    result = runner.run_sync([Message.user("hi")], session_id="s", session_values={"k": 1})
    assert result.final_output == "hi"
    with pytest.raises(UsageError, match="takes a text"):
        runner.query_sync(None)  # type: ignore[arg-type]


def test_one_runner_and_model_serve_successive_event_loops() -> None:
    model = ScriptedModel([reply("one"), reply("two"), reply("three")])
    runner = Runner(_calc(model))
    assert [runner.query_sync(q).final_output for q in "abc"] == ["one", "two", "three"]
    assert asyncio.run(runner.query("d").collect()).error is not None  # script exhausted


# --- cancellation -------------------------------------------------------------------------------


class Probe:
    """A slow tool and a slow model stream that record whether they were cleaned up."""

    def __init__(self) -> None:
        self.tool_started = asyncio.Event()
        self.tool_cancelled = False
        self.stream_closed = False

        @tool
        async def slow() -> str:
            """Wait a long time."""
            self.tool_started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                self.tool_cancelled = True
                raise
            return "late"

        self.slow = slow

    def tasks_left(self) -> list[asyncio.Task[object]]:
        current = asyncio.current_task()
        return [t for t in asyncio.all_tasks() if t is not current and not t.done()]


async def test_leaving_the_iteration_early_cancels_tools_in_flight() -> None:
    probe = Probe()
    from plait.testing import calls

    @tool
    async def quick() -> str:
        """Answer at once."""
        return "quick"

    model = ScriptedModel([calls(call("slow", {}), call("quick", {})), reply("never")])
    runner = Runner(ChatModelAgent("A", model, tools=[probe.slow, quick]))
    stream = runner.query("q")
    async for event in stream:
        if event.message is not None and event.message.role == "tool":
            assert probe.tool_started.is_set()
            break
    del stream, event
    gc.collect()
    for _ in range(20):
        await asyncio.sleep(0.01)
        if probe.tool_cancelled and not probe.tasks_left():
            break
    assert probe.tool_cancelled
    assert probe.tasks_left() == []


async def test_aclose_closes_the_model_stream() -> None:
    closed = asyncio.Event()

    class EndlessModel:
        async def generate(self, messages: object, **kw: object) -> Message:
            raise AssertionError("not used")

        async def stream(self, messages: object, **kw: object) -> AsyncIterator[Message]:
            try:
                while True:
                    yield Message.assistant("tick ")
                    await asyncio.sleep(0)
            finally:
                closed.set()

    runner = Runner(ChatModelAgent("A", EndlessModel()), enable_streaming=True)
    async with runner.query("q") as stream:
        event = await anext(stream)
        assert event.message is not None and event.message.stream is not None
        chunks = aiter(event.message.stream)
        assert (await anext(chunks)).content == "tick "
    assert closed.is_set()


async def test_cancelling_the_consumer_task_cancels_the_run() -> None:
    probe = Probe()
    model = ScriptedModel([call("slow", {}), reply("never")])
    runner = Runner(ChatModelAgent("A", model, tools=[probe.slow]))

    async def consume() -> None:
        async for _ in runner.query("q"):
            pass

    task = asyncio.create_task(consume())
    await probe.tool_started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert probe.tool_cancelled
    assert probe.tasks_left() == []


def test_runner_metadata_is_read_only_in_the_run_and_in_the_result() -> None:
    seen: list[Any] = []

    @tool
    def look(ctx: RunContext) -> str:
        """Look at the run's metadata."""
        seen.append(copy.deepcopy(dict(ctx.metadata)))
        with pytest.raises(TypeError):
            ctx.metadata["tenant"] = "evil"  # type: ignore[index]
        ctx.metadata["tags"].append("changed")  # a copy per run: the runner's stays
        return "ok"

    metadata = {"tenant": "acme", "tags": ["a"]}
    model = ScriptedModel([call("look", {}), reply("done"), call("look", {}), reply("again")])
    runner = Runner(ChatModelAgent("A", model, tools=[look]), metadata=metadata)
    first = runner.query_sync("q")
    second = runner.query_sync("q")
    assert seen == [metadata, metadata]
    assert first.metadata == {"tenant": "acme", "tags": ["a", "changed"]}
    assert second.error is None and metadata == {"tenant": "acme", "tags": ["a"]}
    assert Runner(_calc(ScriptedModel(["x"]))).query_sync("q").metadata == {}


async def test_a_resuming_runners_metadata_wins_over_the_checkpoints() -> None:
    @tool
    def ask() -> str:
        """Ask a person."""
        return str(interrupt("ok?"))

    model = ScriptedModel([call("ask", {}), reply("done")])
    agent = ChatModelAgent("A", model, tools=[ask])
    store = MemoryStore()
    paused = await Runner(agent, store=store, metadata={"a": 1, "b": 2}).query("q").collect()
    resumer = Runner(agent, store=store, metadata={"b": 3, "c": 4})
    done = await resumer.resume(paused.checkpoint_id, value="y").collect()  # type: ignore[arg-type]
    assert done.metadata == {"a": 1, "b": 3, "c": 4}


@pytest.mark.parametrize(
    ("metadata", "named"),
    [
        (["a"], "must be a mapping"),
        ({1: "x"}, "metadata (key 1) is not"),
        ({"when": object()}, "metadata['when'] is not"),
        ({"deep": {"x": [1, float("nan")]}}, "metadata['deep']['x'][1] is not"),
    ],
)
def test_metadata_that_is_not_json_is_refused_when_the_runner_is_built(
    metadata: Any, named: str
) -> None:
    with pytest.raises(UsageError) as caught:
        Runner(_calc(ScriptedModel([])), metadata=metadata)
    assert named in str(caught.value)
