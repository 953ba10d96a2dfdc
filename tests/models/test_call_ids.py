"""Tool calls without ids, or sharing one, get unique ids at the model boundary."""

from __future__ import annotations

from typing import Any

import pytest

from plait import (
    ChatModelAgent,
    Message,
    Middleware,
    ModelRequest,
    ParallelAgent,
    RunContext,
    Runner,
    RunResult,
    ToolCall,
    interrupt,
    tool,
)
from plait.messages import merge_chunks
from plait.testing import FunctionModel
from tests.conftest import messages_of

APPROVED: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    APPROVED.clear()


@tool
async def echo(text: str) -> str:
    """Say it back.

    Args:
        text: What to say.
    """
    return f"echo {text}"


@tool
async def approve(item: str) -> str:
    """Ask a person to approve.

    Args:
        item: What to approve.
    """
    answer = interrupt({"approve": item})
    APPROVED.append(f"{item}={answer}")
    return f"{item}: {answer}"


def _calling(name: str, ids: tuple[str, ...], items: tuple[str, ...]) -> FunctionModel:
    """A model that calls `name` once per item in one reply (with `ids`), then answers."""
    key = "text" if name == "echo" else "item"

    def answer(messages: list[Message], tools: list[Any]) -> Message:
        if messages[-1].role == "tool":
            return Message.assistant("done")
        return Message.assistant(
            tool_calls=tuple(
                ToolCall(id=i, name=name, arguments=f'{{"{key}": "{item}"}}')
                for i, item in zip(ids, items, strict=True)
            )
        )

    return FunctionModel(answer)


def _pairs(messages: list[Message]) -> dict[str, str]:
    """Map each tool call's arguments to the result with its id."""
    calls = {tc.id: tc.arguments for m in messages if m.role == "assistant" for tc in m.tool_calls}
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    assert len(calls) == len(results)
    return {calls[i]: results[i] for i in results}


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("ids", [("", ""), ("c1", "c1"), ("c1", "")], ids=["empty", "same", "mix"])
async def test_each_call_of_a_reply_gets_its_own_id_before_it_is_run_or_shown(
    streaming: bool, ids: tuple[str, ...]
) -> None:
    model = _calling("echo", ids, ("a", "b"))
    agent = ChatModelAgent("A", model, tools=[echo])
    result = await Runner(agent, enable_streaming=streaming).query("go").collect()
    assert result.final_output == "done"
    shown = await messages_of(result.events)
    (calling,) = [m for m in shown if m.tool_calls]
    given = [tc.id for tc in calling.tool_calls]
    assert len(set(given)) == 2 and all(given)
    if "c1" in ids:
        assert given[0] == "c1"  # an id that is unique where it stands is kept
    assert _pairs(shown) == {'{"text": "a"}': "echo a", '{"text": "b"}': "echo b"}
    sent = list(model.requests[1].messages)  # what the model is told afterwards
    assert sent[-3] == calling
    assert _pairs(sent) == {'{"text": "a"}': "echo a", '{"text": "b"}': "echo b"}
    if streaming:  # the chunks carry the same ids as the whole message
        first = result.events[0].message
        assert first is not None and first.stream is not None
        assert merge_chunks(first.stream.chunks) == calling


def _interrupt_for(result: RunResult, item: str) -> str:
    (found,) = [c.id for c in result.interrupts if c.info == {"approve": item}]
    return found


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("ids", [("", ""), ("x", "x")], ids=["empty", "same"])
async def test_an_answer_reaches_the_call_that_asked_for_it(
    streaming: bool, ids: tuple[str, ...]
) -> None:
    left = ChatModelAgent("left", _calling("approve", ids, ("A", "B")), tools=[approve])
    right = ChatModelAgent("right", _calling("approve", ("",), ("C",)), tools=[approve])
    runner = Runner(ParallelAgent("P", [left, right]), enable_streaming=streaming)
    paused = await runner.query("go").collect()
    assert len({c.address for c in paused.interrupts}) == 3
    answers = {_interrupt_for(paused, "B"): "yes to B", _interrupt_for(paused, "C"): "yes to C"}
    again = await runner.resume(paused.checkpoint_id, answers).collect()  # type: ignore[arg-type]
    assert sorted(APPROVED) == ["B=yes to B", "C=yes to C"]
    assert [c.info for c in again.interrupts] == [{"approve": "A"}]  # A is asked again
    done = await runner.resume(again.checkpoint_id, value="yes to A").collect()  # type: ignore[arg-type]
    assert sorted(APPROVED) == ["A=yes to A", "B=yes to B", "C=yes to C"]
    shown = await messages_of([*paused.events, *again.events, *done.events])
    results = {m.content for m in shown if m.role == "tool"}
    assert results == {"A: yes to A", "B: yes to B", "C: yes to C"}


class ChunksWithoutIndex:
    """A model streaming its calls without `index` (calls told apart by id), reusing `c1`."""

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, messages: Any, *, tools: Any = (), **options: Any) -> Message:
        raise AssertionError("streaming only")

    async def stream(self, messages: Any, *, tools: Any = (), **options: Any) -> Any:
        self.calls += 1
        if self.calls > 1:
            yield Message.assistant("done")
            return
        for tc in [
            ToolCall(id="c1", name="echo", arguments='{"text": '),
            ToolCall(id="", name="", arguments='"a"}'),
            ToolCall(id="c2", name="echo", arguments='{"text": "b"}'),
            ToolCall(id="c1", name="echo", arguments='{"text": '),  # a new call, same id
            ToolCall(id="c1", name="", arguments='"c"}'),  # ... and its continuation
        ]:
            yield Message.assistant(tool_calls=(tc,))


async def test_streamed_calls_without_index_keep_their_ids_apart_as_they_merge() -> None:
    agent = ChatModelAgent("A", ChunksWithoutIndex(), tools=[echo])
    result = await Runner(agent, enable_streaming=True).query("go").collect()
    shown = await messages_of(result.events)
    (calling,) = [m for m in shown if m.tool_calls]
    given = [tc.id for tc in calling.tool_calls]
    assert given[:2] == ["c1", "c2"] and given[2] not in ("c1", "c2", "")
    assert _pairs(shown) == {
        '{"text": "a"}': "echo a",
        '{"text": "b"}': "echo b",
        '{"text": "c"}': "echo c",
    }


async def test_calls_a_middleware_adds_to_the_reply_get_unique_ids_too() -> None:
    class TwoEchoes(Middleware):
        async def after_model(
            self, ctx: RunContext, request: ModelRequest, message: Message
        ) -> Message | None:
            if message.content != "echo twice":
                return None
            pair = tuple(ToolCall(id="", name="echo", arguments=f'{{"text": "{t}"}}') for t in "ab")
            return Message.assistant(tool_calls=pair)

    model = FunctionModel(
        lambda messages, tools: "done" if messages[-1].role == "tool" else "echo twice"
    )
    agent = ChatModelAgent("A", model, tools=[echo], middlewares=[TwoEchoes()])
    result = await Runner(agent).query("go").collect()
    assert result.final_output == "done"
    sent = list(model.requests[1].messages)
    assert len({tc.id for tc in sent[-3].tool_calls} - {""}) == 2
    assert _pairs(sent) == {'{"text": "a"}': "echo a", '{"text": "b"}': "echo b"}
