from __future__ import annotations

import dataclasses

import pytest

from plait import Message, ToolCall, Usage
from plait.messages import merge_chunks


def test_constructors_set_roles_and_fields() -> None:
    assert Message.system("s") == Message(role="system", content="s")
    assert Message.user("u") == Message(role="user", content="u")
    tc = ToolCall(id="c1", name="add", arguments='{"a":1}')
    assistant = Message.assistant("hi", [tc], usage=Usage(input_tokens=3, output_tokens=4))
    assert assistant.role == "assistant"
    assert assistant.tool_calls == (tc,)
    assert assistant.usage is not None and assistant.usage.total_tokens == 7
    tool = Message.tool("5", "c1", name="add")
    assert (tool.role, tool.content, tool.tool_call_id, tool.name) == ("tool", "5", "c1", "add")


def test_messages_are_frozen_and_keyword_only() -> None:
    message = Message.user("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Message("user", "x")  # type: ignore[misc]
    assert dataclasses.replace(message, content="y") == Message.user("y")


def test_usage_adds() -> None:
    total = Usage(input_tokens=1, output_tokens=2) + Usage(input_tokens=10, output_tokens=20)
    assert total == Usage(input_tokens=11, output_tokens=22)
    assert total.total_tokens == 33


def test_merge_chunks_joins_text_sums_usage_and_merges_tool_calls_by_index() -> None:
    chunks = [
        Message.assistant("Hel"),
        Message.assistant("lo"),
        Message.assistant("", [ToolCall(id="c1", name="add", arguments='{"a":', index=0)]),
        Message.assistant("", [ToolCall(id="c2", name="mul", arguments="{}", index=1)]),
        Message.assistant("", [ToolCall(id="", name="", arguments=" 1}", index=0)]),
        Message.assistant(usage=Usage(input_tokens=5, output_tokens=1)),
        Message.assistant(usage=Usage(output_tokens=2)),
    ]
    merged = merge_chunks(chunks)
    assert merged.content == "Hello"
    assert merged.tool_calls == (
        ToolCall(id="c1", name="add", arguments='{"a": 1}'),
        ToolCall(id="c2", name="mul", arguments="{}"),
    )
    assert merged.usage == Usage(input_tokens=5, output_tokens=3)


def test_merge_chunks_without_index_starts_a_call_per_new_id() -> None:
    chunks = [
        Message.assistant("", [ToolCall(id="a", name="f", arguments='{"x"')]),
        Message.assistant("", [ToolCall(id="", name="", arguments=": 1}")]),
        Message.assistant("", [ToolCall(id="b", name="g", arguments="{}")]),
    ]
    merged = merge_chunks(chunks)
    assert [(c.id, c.name, c.arguments) for c in merged.tool_calls] == [
        ("a", "f", '{"x": 1}'),
        ("b", "g", "{}"),
    ]


@pytest.mark.parametrize(
    "value",
    [
        Usage(input_tokens=1, output_tokens=2),
        ToolCall(id="c", name="n", arguments='{"a": [1, 2]}'),
        Message.assistant(
            "t", [ToolCall(id="c", name="n", arguments="{}")], usage=Usage(input_tokens=1)
        ),
        Message.tool("r", "c", name="n"),
    ],
)
def test_json_round_trip(value: Usage | ToolCall | Message) -> None:
    text = value.to_json()
    assert type(value).from_json(text) == value
