"""RecallTool: the tool `recall(query)` searches the memories of the run's user and answers
with their texts; a run without a user is told so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plait import ChatModelAgent, Message, Runner, RunResult
from plait.errors import InvalidToolArguments, StoreError, ToolError, UsageError
from plait.memory import MemoryItem, MemoryService, RecallTool, SqliteMemoryService
from plait.testing import ScriptedModel, call, reply


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[SqliteMemoryService]:
    async with SqliteMemoryService(tmp_path / "memory.db") as service:
        yield service


def _tool_results(result: RunResult) -> list[str]:
    """Return the content of every tool result of the run, in order."""
    out = []
    for event in result.events:
        variant = event.message
        if variant is not None and variant.role == "tool" and variant.message is not None:
            out.append(variant.message.content)
    return out


async def _recall(
    service: MemoryService,
    query: object,
    *,
    user_id: object = None,
    tool: RecallTool | None = None,
    tool_errors: str = "model",
) -> RunResult:
    """Run an agent that calls `recall(query)` once, as `user_id`; return the result."""
    model = ScriptedModel([call("recall", {"query": query}), reply("done")])
    agent = ChatModelAgent(
        "assistant",
        model,
        tools=[tool or RecallTool(service)],
        tool_errors=tool_errors,  # type: ignore[arg-type]
    )
    values = {} if user_id is None else {"user_id": user_id}
    return await Runner(agent).run([Message.user("hi")], session_values=values).collect()


async def test_recall_answers_with_the_texts_of_the_users_memories(
    service: SqliteMemoryService,
) -> None:
    await service.add("alice", "Alice likes green tea.")
    await service.add("alice", "Alice has a cat called Miso.")
    await service.add("bob", "Bob likes green tea too.")
    result = await _recall(service, "green tea", user_id="alice")
    assert result.error is None and result.final_output == "done"
    assert _tool_results(result) == ["1. Alice likes green tea."]


async def test_recall_numbers_several_memories_best_first(service: SqliteMemoryService) -> None:
    await service.add("alice", "tea")
    await service.add("alice", "green tea\nevery morning")
    result = await _recall(service, "green tea", user_id="alice")
    assert _tool_results(result) == ["1. green tea\n   every morning\n2. tea"]


async def test_recall_answers_with_at_most_k_memories(service: SqliteMemoryService) -> None:
    for n in range(4):
        await service.add("alice", f"note {n}")
    result = await _recall(service, "note", user_id="alice", tool=RecallTool(service, k=2))
    [answer] = _tool_results(result)
    assert answer.count("note") == 2


async def test_recall_says_when_nothing_matches(service: SqliteMemoryService) -> None:
    await service.add("bob", "Bob's secret")
    result = await _recall(service, "secret", user_id="alice")
    assert _tool_results(result) == ["No memories match."]


async def test_a_run_without_a_user_is_told_so(service: SqliteMemoryService) -> None:
    await service.add("alice", "Alice likes green tea.")
    result = await _recall(service, "tea")
    [answer] = _tool_results(result)
    assert answer.startswith("Error: ")
    assert "session value 'user_id'" in answer
    assert "Alice" not in answer


async def test_a_run_without_a_user_ends_with_a_tool_error_when_errors_raise(
    service: SqliteMemoryService,
) -> None:
    result = await _recall(service, "tea", tool_errors="raise")
    assert isinstance(result.error, ToolError)
    assert result.error.tool_name == "recall"
    assert "user_id" in str(result.error)


async def test_a_user_id_that_is_not_an_id_is_told_to_the_model(
    service: SqliteMemoryService,
) -> None:
    result = await _recall(service, "tea", user_id=42)
    [answer] = _tool_results(result)
    assert answer.startswith("Error: ") and "user_id must be a str" in answer


async def test_bad_arguments_are_told_to_the_model(service: SqliteMemoryService) -> None:
    for query in (None, 3, ["tea"]):
        result = await _recall(service, query, user_id="alice")
        [answer] = _tool_results(result)
        assert answer.startswith("Error: ") and '{"query"' in answer
    result = await _recall(service, "tea", user_id="alice", tool_errors="raise")
    assert result.error is None
    model = ScriptedModel([call("recall", "not json"), reply("done")])
    agent = ChatModelAgent("a", model, tools=[RecallTool(service)], tool_errors="raise")
    failed = await Runner(agent).run([Message.user("hi")]).collect()
    assert isinstance(failed.error, InvalidToolArguments)
    model = ScriptedModel([call("recall", {"query": "x", "k": 99}), reply("done")])
    agent = ChatModelAgent("a", model, tools=[RecallTool(service)], tool_errors="raise")
    failed = await Runner(agent).run([Message.user("hi")]).collect()
    assert isinstance(failed.error, InvalidToolArguments) and "k" in str(failed.error)


async def test_a_query_over_the_limit_is_told_to_the_model(service: SqliteMemoryService) -> None:
    result = await _recall(service, "tea " * 5_000, user_id="alice")
    [answer] = _tool_results(result)
    assert answer.startswith("Error: ") and "over the limit" in answer


async def test_a_failing_service_is_told_to_the_model() -> None:
    class Broken:
        async def add(self, user_id: str, text: str, metadata: object = None) -> str:
            raise AssertionError("not called")

        async def search(self, user_id: str, query: str, k: int = 5) -> list[MemoryItem]:
            raise StoreError("searching memories failed: disk gone", operation="searching")

        async def delete(self, user_id: str, memory_id: str) -> None:
            raise AssertionError("not called")

        async def close(self) -> None:
            pass

    result = await _recall(Broken(), "tea", user_id="alice")
    [answer] = _tool_results(result)
    assert answer.startswith("Error: ") and "disk gone" in answer


def test_the_tool_describes_one_query_argument(service: SqliteMemoryService) -> None:
    info = RecallTool(service).info()
    assert info.name == "recall"
    assert info.parameters["required"] == ["query"]
    assert set(info.parameters["properties"]) == {"query"}
    assert info.description


def test_bad_settings_are_usage_errors(service: SqliteMemoryService) -> None:
    with pytest.raises(UsageError, match="MemoryService"):
        RecallTool(object())  # type: ignore[arg-type]
    for k in (0, -1, True, 2.5):
        with pytest.raises(UsageError, match="k must be"):
            RecallTool(service, k=k)  # type: ignore[arg-type]
