"""runner.sessions: read a session with its authors, list sessions newest first, delete."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from plait import (
    ChatModelAgent,
    IdSource,
    Message,
    Runner,
    SessionSummary,
    SessionView,
    Team,
    interrupt,
    tool,
)
from plait.errors import UsageError
from plait.stores import MemoryStore
from plait.testing import FunctionModel, ScriptedModel, call, reply

T0 = datetime(2030, 1, 1, tzinfo=UTC)


class Clock(IdSource):
    """Ids as usual; the time moves only when told."""

    def __init__(self) -> None:
        self.at = T0

    def now(self) -> datetime:
        return self.at


def _echo() -> ChatModelAgent:
    return ChatModelAgent("echo", FunctionModel(lambda messages, tools: "ok"))


async def test_a_session_is_read_with_each_messages_author() -> None:
    triage = ChatModelAgent(
        "triage",
        ScriptedModel([call("transfer_to_agent", {"agent_name": "billing", "message": "pay"})]),
        description="triage",
    )
    billing = ChatModelAgent("billing", ScriptedModel(["paid", "again"]), description="bills")
    clock = Clock()
    runner = Runner(Team.swarm("triage", [triage, billing], name="desk"), ids=clock)
    await runner.query("refund me", session_id="s1", session_values={"tier": "gold"}).collect()
    clock.at = T0 + timedelta(minutes=1)
    await runner.query("thanks", session_id="s1").collect()
    view = await runner.sessions.get("s1")
    assert isinstance(view, SessionView) and view.session_id == "s1"
    assert [(m.name, m.role, m.content) for m in view.messages] == [
        ("user", "user", "refund me"),
        ("triage", "assistant", ""),
        ("triage", "tool", "Transfer initiated to agent 'billing'"),
        ("billing", "assistant", "paid"),
        ("user", "user", "thanks"),
        ("billing", "assistant", "again"),
    ]
    assert view.values["tier"] == "gold"
    assert [(h.from_agent, h.to_agent) for h in view.handoffs] == [
        ("triage", "billing"),
        ("billing", "END"),
        ("billing", "END"),
    ]
    assert view.active_agent == "billing"
    assert view.updated_at == T0 + timedelta(minutes=1)
    assert await runner.sessions.get("never") is None


async def test_sessions_are_listed_newest_first_and_ties_latest_written_first() -> None:
    clock = Clock()
    store = MemoryStore()
    runner = Runner(_echo(), store=store, ids=clock)
    for session_id in ("a", "b", "c"):  # written at the same time
        await runner.query("hi", session_id=session_id).collect()
    await runner.query("hi", session_id="a").collect()
    assert [s.session_id for s in await runner.sessions.list()] == ["a", "c", "b"]
    clock.at = T0 + timedelta(seconds=1)
    await runner.query("hi", session_id="b").collect()
    listed = await Runner(_echo(), store=store).sessions.list(limit=2)  # any runner of it
    assert listed == [
        SessionSummary(session_id="b", updated_at=T0 + timedelta(seconds=1), agent="echo"),
        SessionSummary(session_id="a", updated_at=T0, agent="echo"),
    ]


async def test_sessions_are_listed_with_the_agent_that_wrote_them_last() -> None:
    store = MemoryStore()
    other = ChatModelAgent("other", ScriptedModel([reply("x")], per_run=True))
    await Runner(_echo(), store=store).query("hi", session_id="mine").collect()
    await Runner(other, store=store).query("hi", session_id="theirs").collect()
    sessions = Runner(_echo(), store=store).sessions
    assert {(s.session_id, s.agent) for s in await sessions.list()} == {
        ("mine", "echo"),
        ("theirs", "other"),
    }
    assert [s.session_id for s in await sessions.list(agent="other")] == ["theirs"]
    assert await sessions.list(agent="nobody") == []


async def test_a_session_is_deleted_once_and_unlisted() -> None:
    runner = Runner(_echo())
    await runner.query("hi", session_id="gone").collect()
    await runner.query("hi", session_id="kept").collect()
    assert await runner.sessions.delete("gone") is True
    assert await runner.sessions.get("gone") is None
    assert [s.session_id for s in await runner.sessions.list()] == ["kept"]
    assert await runner.sessions.delete("gone") is False


def test_the_sync_forms_and_a_paused_turn() -> None:
    @tool
    def ask() -> str:
        """Ask a person."""
        return str(interrupt("ok?"))

    model = ScriptedModel([call("ask", {}), reply("done")])
    runner = Runner(ChatModelAgent("A", model, tools=[ask]))
    paused = runner.query_sync("go", session_id="s")
    assert runner.sessions.get_sync("s") is None and runner.sessions.list_sync() == []
    runner.resume_sync(paused.checkpoint_id, value="yes")  # type: ignore[arg-type]
    view = runner.sessions.get_sync("s")
    assert view is not None and view.messages[0] == Message(role="user", content="go", name="user")
    assert view.active_agent == "A"
    assert [s.session_id for s in runner.sessions.list_sync()] == ["s"]
    assert runner.sessions.delete_sync("s") is True


def test_the_id_of_the_session_index_is_not_a_session() -> None:
    runner = Runner(_echo())
    with pytest.raises(UsageError, match="lists its sessions"):
        runner.query(".plait/session-index", session_id=".plait/session-index")
    runner.query_sync("hi", session_id="s")
    assert runner.sessions.get_sync(".plait/session-index") is None
    assert runner.sessions.delete_sync(".plait/session-index") is False
    assert [s.session_id for s in runner.sessions.list_sync()] == ["s"]
