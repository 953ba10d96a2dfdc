"""save_turns and Runner(after_run=...): a completed run's turn is remembered for its user,
once; failed, cancelled and paused runs are not; users never see each other's turns."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plait import (
    AgentContext,
    ChatModelAgent,
    Hooks,
    Message,
    Runner,
    RunResult,
    RunStream,
    interrupt,
    tool,
)
from plait.errors import HookError, ModelError, PlaitError, RunCancelled, UsageError
from plait.memory import RecallTool, SqliteMemoryService, save_turns
from plait.testing import ScriptedModel, call, reply


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[SqliteMemoryService]:
    async with SqliteMemoryService(tmp_path / "memory.db") as service:
        yield service


@tool
def approve(item: str) -> str:
    """Ask a person to approve.

    Args:
        item: What to approve.
    """
    return f"{item}: {interrupt({'approve': item})}"


def _runner(service: SqliteMemoryService, *script: Any, **kwargs: Any) -> Runner:
    agent = ChatModelAgent("helper", ScriptedModel(list(script)), tools=[approve])
    return Runner(agent, after_run=[save_turns(service)], **kwargs)


async def _all(service: SqliteMemoryService, user: str, query: str) -> list[str]:
    return [item.text for item in await service.search(user, query, k=50)]


async def test_a_completed_run_adds_its_turn(service: SqliteMemoryService) -> None:
    runner = _runner(service, reply("Noted: green tea."))
    result = await runner.query("I like green tea", session_values={"user_id": "alice"}).collect()
    assert result.error is None
    [item] = await service.search("alice", "tea")
    assert item.text == "user: I like green tea\nassistant: Noted: green tea."
    assert item.metadata == {"agent": "helper", "session_id": None}


async def test_every_caller_message_is_in_the_turn(service: SqliteMemoryService) -> None:
    runner = _runner(service, reply("Both noted."))
    messages = [Message.user("My name is Ada."), Message.user("I live in Paris.")]
    await runner.run(messages, session_values={"user_id": "ada"}).collect()
    assert await _all(service, "ada", "paris") == [
        "user: My name is Ada.\nuser: I live in Paris.\nassistant: Both noted."
    ]


async def test_a_failed_run_adds_nothing(service: SqliteMemoryService) -> None:
    runner = _runner(service)  # an empty script: the model call fails
    result = await runner.query("I like tea", session_values={"user_id": "alice"}).collect()
    assert isinstance(result.error, ModelError)
    assert await service.search("alice", "tea") == []


async def test_a_cancelled_run_adds_nothing(service: SqliteMemoryService) -> None:
    streams: list[RunStream] = []

    @tool
    async def stop() -> str:
        """Stop the run."""
        streams[0].cancel()
        return "stopping"

    agent = ChatModelAgent("helper", ScriptedModel([call("stop"), reply("never")]), tools=[stop])
    runner = Runner(agent, after_run=[save_turns(service)])
    streams.append(runner.query("I like tea", session_values={"user_id": "alice"}))
    result = await streams[0].collect()
    assert isinstance(result.error, RunCancelled)
    assert await service.search("alice", "tea") == []


async def test_a_paused_run_adds_its_turn_once_when_a_resume_completes(
    service: SqliteMemoryService,
) -> None:
    runner = _runner(
        service,
        call("approve", {"item": "the tea order"}),
        call("approve", {"item": "the tea bill"}),
        reply("The tea is ordered."),
    )
    values = {"user_id": "alice"}
    paused = await runner.query("Order tea please", session_values=values).collect()
    assert paused.interrupts and await service.search("alice", "tea") == []
    again = await runner.resume(paused.checkpoint_id or "", value="yes").collect()
    assert again.interrupts and await service.search("alice", "tea") == []
    done = await runner.resume(again.checkpoint_id or "", value="yes").collect()
    assert done.error is None and done.final_output == "The tea is ordered."
    assert await _all(service, "alice", "tea") == [
        "user: Order tea please\nassistant: The tea is ordered."
    ]


async def test_each_turn_of_a_session_is_added_once(service: SqliteMemoryService) -> None:
    runner = _runner(service, reply("Hello Ada."), reply("Paris is lovely."))
    first = runner.query("I am Ada", session_id="s1", session_values={"user_id": "ada"})
    await first.collect()
    second = await runner.query("I live in Paris", session_id="s1").collect()  # value kept
    assert second.error is None
    texts = await _all(service, "ada", "ada paris lovely hello")
    assert sorted(texts) == [
        "user: I am Ada\nassistant: Hello Ada.",
        "user: I live in Paris\nassistant: Paris is lovely.",
    ]
    [item] = await service.search("ada", "paris")
    assert item.metadata == {"agent": "helper", "session_id": "s1"}


async def test_a_run_without_a_user_adds_nothing(service: SqliteMemoryService) -> None:
    await service.add("someone", "an earlier memory")
    runner = _runner(service, reply("Noted."))
    result = await runner.query("I like tea").collect()
    assert result.error is None and result.final_output == "Noted."
    with sqlite3.connect(service.path) as connection:
        assert connection.execute("SELECT COUNT(*) FROM plait_memories").fetchone() == (1,)


async def test_a_user_id_that_is_not_an_id_ends_the_run(service: SqliteMemoryService) -> None:
    runner = _runner(service, reply("Noted."))
    result = await runner.query("I like tea", session_values={"user_id": 42}).collect()
    assert isinstance(result.error, UsageError) and "user_id" in str(result.error)
    assert result.final_output is None


async def test_users_never_see_each_others_turns(service: SqliteMemoryService) -> None:
    saver = _runner(service, reply("Your code is safe."))
    await saver.query("My vault code is 1234", session_values={"user_id": "alice"}).collect()
    model = ScriptedModel([call("recall", {"query": "vault code"}), reply("I know nothing.")])
    agent = ChatModelAgent("helper", model, tools=[RecallTool(service)])
    runner = Runner(agent, after_run=[save_turns(service)])
    result = await runner.query("What is my code?", session_values={"user_id": "bob"}).collect()
    tool_answers = [
        e.message.message.content
        for e in result.events
        if e.message is not None and e.message.role == "tool" and e.message.message is not None
    ]
    assert tool_answers == ["No memories match."]
    assert await _all(service, "alice", "code") == [
        "user: My vault code is 1234\nassistant: Your code is safe."
    ]
    assert await _all(service, "bob", "code") == [
        "user: What is my code?\nassistant: I know nothing."
    ]


async def test_after_run_callables_run_in_order_after_the_runner_hooks() -> None:
    seen: list[str] = []

    class Observer(Hooks):
        async def after_run(self, ctx: AgentContext, result: RunResult) -> None:
            seen.append("hook")

    async def first(ctx: AgentContext, result: RunResult) -> None:
        seen.append(f"first {ctx.agent_name} {result.final_output}")

    def second(ctx: AgentContext, result: RunResult) -> None:  # a plain function works too
        seen.append("second")

    agent = ChatModelAgent("helper", ScriptedModel([reply("hi")]))
    runner = Runner(agent, hooks=[Observer()], after_run=[first, second])
    result = await runner.query("hello").collect()
    assert result.error is None
    assert seen == ["hook", "first helper hi", "second"]


async def test_an_exception_in_a_callable_ends_the_run_with_a_hook_error() -> None:
    def broken(ctx: AgentContext, result: RunResult) -> None:
        raise ValueError("boom")

    agent = ChatModelAgent("helper", ScriptedModel([reply("hi")]))
    result = await Runner(agent, after_run=[broken]).query("hello").collect()
    assert isinstance(result.error, HookError)
    assert result.error.seam == "after_run" and "broken" in result.error.hook
    assert "boom" in str(result.error) and result.final_output is None


async def test_a_plait_error_in_a_callable_ends_the_run_with_it() -> None:
    class Refused(PlaitError):
        """Refused."""

    async def refuse(ctx: AgentContext, result: RunResult) -> None:
        raise Refused("no")

    agent = ChatModelAgent("helper", ScriptedModel([reply("hi")]))
    result = await Runner(agent, after_run=[refuse]).query("hello").collect()
    assert isinstance(result.error, Refused)


def test_after_run_takes_a_list_of_callables(service: SqliteMemoryService) -> None:
    agent = ChatModelAgent("helper", ScriptedModel([]))
    with pytest.raises(UsageError, match="list of callables"):
        Runner(agent, after_run=save_turns(service))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="callables"):
        Runner(agent, after_run=["not callable"])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="MemoryService"):
        save_turns(object())  # type: ignore[arg-type]
