"""A model that is writing: its text streams at once, with or without a session, and a stop
ends the call in flight (streamed or not), leaving a run that resumes and asks the model
again, with nothing doubled in the session."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from plait import ChatModelAgent, Message, ParallelAgent, Runner, tool
from plait.errors import RunCancelled
from plait.stores import MemoryStore
from plait.testing import call
from plait.tools.base import ToolInfo

pytestmark = pytest.mark.timeout(90)


class Writer:
    """A model whose gated reply writes "Hel", then waits for `gate` before "lo"; every
    later reply is "again" at once. With `tool_first`, the first reply calls `look` and the
    second is the gated one. `writing` is set when the gated reply's first chunk is out."""

    def __init__(self, *, tool_first: bool = False) -> None:
        self.gate = asyncio.Event()
        self.writing = asyncio.Event()
        self.calls = 0
        self.gated = 2 if tool_first else 1  # which call is gated
        self.stopped = 0  # calls that were cut short
        self.answered = asyncio.Event()  # set when the gated call has answered (whole)

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Answer whole: the gated call waits for the gate."""
        self.calls += 1
        if self.calls < self.gated:
            return call("look", {}, id=f"look{self.calls}")
        if self.calls > self.gated:
            return Message.assistant("again")
        self.writing.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.stopped += 1
            raise
        self.answered.set()
        return Message.assistant("Hello")

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Answer in chunks: the gated call stops after "Hel" until the gate opens."""
        self.calls += 1
        if self.calls < self.gated:
            yield call("look", {}, id=f"look{self.calls}")
            return
        if self.calls > self.gated:
            yield Message.assistant("again")
            return
        yield Message.assistant("Hel")
        self.writing.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.stopped += 1
            raise
        yield Message.assistant("lo")


@tool
def look() -> str:
    """Look around."""
    return "all quiet"


async def _bounded(coro: Any) -> Any:
    async with asyncio.timeout(20):  # what is fixed here hangs for good
        return await coro


def _texts(messages: Sequence[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


async def test_streamed_text_reaches_the_reader_while_the_model_writes_with_a_session() -> None:
    model = Writer(tool_first=True)
    store = MemoryStore()
    agent = ChatModelAgent("A", model, tools=[look])
    runner = Runner(agent, store=store, enable_streaming=True)
    stream = runner.query("hi", session_id="s1")
    roles = []
    while True:  # the tool call, its result, then the answer while the model writes it
        event = await _bounded(anext(stream))
        assert event.message is not None
        roles.append(event.message.role)
        if len(roles) == 3:
            break
    assert roles == ["assistant", "tool", "assistant"]
    assert event.message.stream is not None
    chunks = aiter(event.message.stream)
    first = await _bounded(anext(chunks))
    assert first.content == "Hel"
    assert not model.gate.is_set()
    model.gate.set()
    rest = [chunk.content async for chunk in chunks]
    assert rest == ["lo"]
    result = await _bounded(stream.collect())
    assert result.final_output == "Hello"
    session = await runner.sessions.get("s1")
    assert session is not None
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    assert session.messages[-1].content == "Hello"


@pytest.mark.parametrize("streaming", [True, False])
async def test_a_stop_while_the_model_writes_ends_the_call_and_the_run_resumes(
    streaming: bool,
) -> None:
    model = Writer()
    runner = Runner(ChatModelAgent("A", model), store=MemoryStore(), enable_streaming=streaming)
    stream = runner.query("hi", session_id="s1")
    consumer = asyncio.create_task(stream.collect())
    await _bounded(model.writing.wait())
    stream.cancel()
    result = await _bounded(consumer)
    assert isinstance(result.error, RunCancelled)
    assert result.final_output is None
    assert model.stopped == 1  # the call in flight was ended, not let finish
    assert result.checkpoint_id == stream.checkpoint_id
    session = await runner.sessions.get("s1")
    assert session is None or ("assistant", "Hello") not in _texts(session.messages)
    resumed = await _bounded(runner.resume(result.checkpoint_id).collect())
    assert resumed.error is None
    assert resumed.final_output == "again"
    assert model.calls == 2  # asked again on resume
    session = await runner.sessions.get("s1")
    assert session is not None
    assert _texts(session.messages) == [("user", "hi"), ("assistant", "again")]


async def test_a_stop_asked_before_the_streamed_call_starts_makes_no_reply() -> None:
    model = Writer()
    model.gate.set()
    runner = Runner(ChatModelAgent("A", model), store=MemoryStore(), enable_streaming=True)
    stream = runner.query("hi")
    stream.cancel()  # before the first event: the run stops at its first chance
    result = await _bounded(stream.collect())
    assert isinstance(result.error, RunCancelled)
    assert result.final_output is None
    assert model.calls == 0  # the model was never asked
    resumed = await _bounded(runner.resume(result.checkpoint_id).collect())
    assert resumed.final_output == "Hello"


@pytest.mark.parametrize("first_done", ["L", "R"])
async def test_a_stop_ends_the_model_call_in_flight_when_another_ran_beside_it(
    first_done: str,
) -> None:
    writers = {"L": Writer(), "R": Writer()}
    agents = [ChatModelAgent(name, model) for name, model in writers.items()]
    runner = Runner(ParallelAgent("both", agents), store=MemoryStore())
    stream = runner.query("hi")
    consumer = asyncio.create_task(stream.collect())
    for model in writers.values():
        await _bounded(model.writing.wait())
    done = writers[first_done]
    still = writers["R" if first_done == "L" else "L"]
    done.gate.set()  # one of the two calls in flight ends, the other still waits
    await _bounded(done.answered.wait())
    stream.cancel()
    result = await _bounded(consumer)
    assert isinstance(result.error, RunCancelled)
    assert (still.stopped, done.stopped) == (1, 0)  # the call still in flight was ended
    resumed = await _bounded(runner.resume(result.checkpoint_id).collect())
    assert resumed.error is None
    said = [e.message.message.content for e in resumed.events if e.message and e.message.message]
    assert said == ["again"]
    assert (still.calls, done.calls) == (2, 1)  # asked again on resume; the other had answered
