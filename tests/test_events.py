from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from plait import (
    AgentAction,
    AgentEvent,
    AgentOutput,
    BreakLoopAction,
    HandoffLog,
    InterruptCtx,
    InterruptInfo,
    Message,
    MessageStream,
    MessageVariant,
    RunResult,
    ToolCall,
    TransferToAgentAction,
    Usage,
)
from plait.errors import ModelError, RunCancelled, SerializationError


async def _chunks(*texts: str, fail: Exception | None = None) -> AsyncIterator[Message]:
    for text in texts:
        yield Message.assistant(text)
    if fail is not None:
        raise fail


async def test_stream_yields_chunks_one_to_one_and_can_be_read_again() -> None:
    stream = MessageStream(_chunks("a", "b", "c"))
    first = [m.content async for m in stream]
    second = [m.content async for m in stream]
    assert first == second == ["a", "b", "c"]
    assert (await stream.collect()).content == "abc"


async def test_collect_drains_without_a_reader_and_readers_replay_afterwards() -> None:
    stream = MessageStream(_chunks("x", "y"))
    assert not stream.done
    assert (await stream.collect()).content == "xy"
    assert stream.done
    assert [m.content async for m in stream] == ["x", "y"]


async def test_two_concurrent_readers_see_every_chunk() -> None:
    async def slow() -> AsyncIterator[Message]:
        for text in "abcd":
            await asyncio.sleep(0.001)
            yield Message.assistant(text)

    stream = MessageStream(slow())

    async def read() -> str:
        return "".join([m.content async for m in stream])

    assert await asyncio.gather(read(), read(), stream.collect()) == [
        "abcd",
        "abcd",
        Message.assistant("abcd"),
    ]


async def test_source_error_reaches_readers_through_on_error() -> None:
    stream = MessageStream(
        _chunks("a", fail=RuntimeError("socket closed")),
        on_error=lambda exc: ModelError(f"model failed: {exc}"),
    )
    seen: list[str] = []

    async def read() -> None:
        async for chunk in stream:
            seen.append(chunk.content)

    with pytest.raises(ModelError, match="socket closed"):
        await read()
    assert seen == ["a"]
    with pytest.raises(ModelError):
        await stream.collect()


async def test_closed_stream_tells_readers_it_was_cancelled() -> None:
    closed = asyncio.Event()

    async def source() -> AsyncIterator[Message]:
        try:
            yield Message.assistant("a")
            yield Message.assistant("b")
        finally:
            closed.set()

    stream = MessageStream(source())
    reader = aiter(stream)
    assert (await anext(reader)).content == "a"
    await stream.aclose()
    assert closed.is_set()
    with pytest.raises(RunCancelled):
        await stream.collect()


async def test_variant_get_message() -> None:
    whole = MessageVariant(is_streaming=False, role="assistant", message=Message.assistant("w"))
    assert (await whole.get_message()).content == "w"
    streaming = MessageVariant(
        is_streaming=True, role="assistant", stream=MessageStream(_chunks("s", "t"))
    )
    assert (await streaming.get_message()).content == "st"


def test_action_merge_keeps_both_sides() -> None:
    a = AgentAction(custom={"k": 1})
    b = AgentAction(exit=True)
    merged = a.merge(b)
    assert merged.exit and merged.custom == {"k": 1}


def test_handoff_log_renders_one_line() -> None:
    log = HandoffLog(
        timestamp=datetime(2026, 1, 2, 14, 30, 1, tzinfo=UTC),
        from_agent="triage",
        to_agent="security",
        message="check the login",
        step_count=3,
        tokens_used=450,
    )
    assert log.render() == '[14:30:01] triage → security: "check the login" (3 steps, 450 tokens)'


def test_handoff_log_counts_in_their_number_and_leaves_out_an_empty_message() -> None:
    log = HandoffLog(
        timestamp=datetime(2026, 1, 2, 14, 30, 1, tzinfo=UTC),
        from_agent="triage",
        to_agent="billing",
        step_count=1,
        tokens_used=1,
    )
    assert log.render() == "[14:30:01] triage → billing (1 step, 1 token)"


def _sample_event() -> AgentEvent:
    return AgentEvent(
        agent_name="b",
        run_path=("a", "b"),
        depth=1,
        output=AgentOutput(
            message=MessageVariant(
                is_streaming=False,
                role="tool",
                tool_name="t",
                message=Message.tool("r", "c1", name="t"),
            ),
            custom={"x": [1, 2]},
        ),
        action=AgentAction(
            exit=True,
            transfer_to_agent=TransferToAgentAction(dest_agent_name="c", message="m", reason="r"),
            break_loop=BreakLoopAction(from_agent="l", done=True, current_iterations=2),
            interrupted=InterruptInfo(
                contexts=(InterruptCtx(id="i1", address="agent:a", info={"q": "ok?"}),),
                checkpoint_id="cp",
            ),
        ),
    )


def test_every_event_type_round_trips_through_json() -> None:
    event = _sample_event()
    assert AgentEvent.from_json(event.to_json()) == event
    log = HandoffLog(timestamp=datetime(2026, 1, 2, tzinfo=UTC), from_agent="a", to_agent="b")
    result = RunResult(
        events=(event,),
        final_output="done",
        interrupts=event.action.interrupted.contexts,  # type: ignore[union-attr]
        checkpoint_id="cp",
        handoffs=(log,),
        usage=Usage(input_tokens=1, output_tokens=2),
    )
    back = RunResult.from_json(result.to_json())
    assert back == result
    assert back.handoffs[0].timestamp.tzinfo is not None


async def test_a_finished_stream_round_trips_and_an_unfinished_one_is_refused() -> None:
    stream = MessageStream(_chunks("a", "b"))
    variant = MessageVariant(is_streaming=True, role="assistant", stream=stream)
    with pytest.raises(SerializationError):
        variant.to_json()
    await stream.collect()
    back = MessageVariant.from_json(variant.to_json())
    assert back.is_streaming
    assert (await back.get_message()).content == "ab"
    assert back == variant


def test_run_result_raise_for_error() -> None:
    assert RunResult(final_output="x").raise_for_error().final_output == "x"
    with pytest.raises(ModelError):
        RunResult(error=ModelError("down")).raise_for_error()


def test_tool_call_round_trip_keeps_arguments_verbatim() -> None:
    tc = ToolCall(id="c", name="n", arguments='{"a" : 1 }')
    assert ToolCall.from_json(tc.to_json()).arguments == '{"a" : 1 }'


def test_an_unencodable_custom_value_is_named_by_its_path() -> None:
    output = AgentOutput(custom={"cart": [{"price": 1}, {"price": object()}]})
    with pytest.raises(SerializationError) as info:
        output.to_json()
    assert info.value.path == "AgentOutput.custom['cart'][1]['price']"


async def test_the_events_of_a_step_equal_the_ones_the_constructors_build() -> None:
    from plait import ChatModelAgent, Runner, tool
    from plait.testing import ScriptedModel, call, reply

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    agent = ChatModelAgent("calc", ScriptedModel([call("add", {"a": 1, "b": 2}), reply("3")]))
    agent = agent.with_tools([add])
    events = (await Runner(agent).query("1+2?").collect()).events
    messages = [await e.output.message.get_message() for e in events if e.output]
    expected = [
        AgentEvent(
            agent_name="calc",
            run_path=("calc",),
            output=AgentOutput(
                message=MessageVariant(is_streaming=False, role=m.role, tool_name=m.name, message=m)
            ),
        )
        for m in messages
    ]
    assert [m.role for m in messages] == ["assistant", "tool", "assistant"]
    assert list(events) == expected
    assert [e.to_json() for e in events] == [e.to_json() for e in expected]


def test_an_event_encoded_again_at_once_is_not_encoded_twice() -> None:
    import dataclasses

    from plait.events import event_json_bytes

    event = _sample_event()
    first = event_json_bytes(event)
    assert event_json_bytes(event) is first  # (the step save after the stream's encode)
    assert first.decode() == event.to_json()
    deeper = dataclasses.replace(event, depth=1)
    assert event_json_bytes(deeper) == first.replace(b'"depth":0', b'"depth":1')
    assert AgentEvent.from_json(event_json_bytes(event)) == event


def test_an_unencodable_event_is_named_by_its_path() -> None:
    event = AgentEvent(agent_name="a", run_path=("a",), output=AgentOutput(custom={"x": object()}))
    with pytest.raises(SerializationError) as info:
        event.to_json()
    assert info.value.path == "AgentEvent.output.custom['x']"
