"""The custom agent of docs/concepts.md ("Writing your own agent") under every composite, on
SQLite and PostgreSQL: it keeps state with `save_state`, pauses, is resumed by a runner in
a fresh store object, reads `resume_info`, and its session holds each message once."""

from __future__ import annotations

import os
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest

from plait import (
    Agent,
    ChatModelAgent,
    LoopAgent,
    Message,
    ParallelAgent,
    Runner,
    SequentialAgent,
    StateGraph,
    Team,
)
from plait.graph import END, START
from plait.stores import PostgresStore, SqliteStore
from plait.stores.base import Store
from plait.testing import FunctionModel, call, reply

ROOT = Path(__file__).resolve().parents[2]
DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def _example() -> dict[str, Any]:
    """Run the example of "Writing your own agent" and return what it defines."""
    page = (ROOT / "docs" / "concepts.md").read_text()
    section = page.split("## Writing your own agent", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    namespace: dict[str, Any] = {"__name__": "custom_agent_example"}
    exec(compile(block.group(1), "docs/concepts.md", "exec", dont_inherit=True), namespace)
    return namespace


APPROVER = _example()["Approver"]


class _GraphState(TypedDict, total=False):
    messages: list[Any]


def _graph() -> Agent:
    graph = StateGraph(_GraphState)
    graph.add_node("approver", APPROVER())
    graph.add_edge(START, "approver")
    graph.add_edge("approver", END)
    return graph.compile(name="flow")


def _coordinator() -> Agent:
    def lead_model(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "tool":
            return reply(messages[-1].content)
        return call("approver", {"request": "refund order 7"})

    lead = ChatModelAgent("lead", FunctionModel(lead_model), description="Leads.")
    return Team.coordinator(lead, [APPROVER()])


def _swarm() -> Agent:
    route = call("transfer_to_agent", {"agent_name": "approver", "message": "refund order 7"})
    desk = ChatModelAgent("desk", FunctionModel(lambda m, t: route), description="Routes.")
    return Team.swarm(desk, [desk, APPROVER()])


COMPOSITES: dict[str, Callable[[], Agent]] = {
    "sequential": lambda: SequentialAgent("seq", [APPROVER()]),
    "parallel": lambda: ParallelAgent("par", [APPROVER("a"), APPROVER("b")]),
    "loop": lambda: LoopAgent("loop", [APPROVER()], max_iterations=1),
    "coordinator": _coordinator,
    "swarm": _swarm,
    "graph": _graph,
}


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Return a factory of store objects on one database (a new object per runner)."""
    if request.param == "sqlite":
        yield lambda: SqliteStore(tmp_path / "plait.db")
        return
    import psycopg

    try:
        psycopg.connect(DSN, connect_timeout=5).close()
    except psycopg.Error as exc:
        pytest.skip(f"no PostgreSQL server at {DSN}: {exc}")
    prefix = f"plait_test_{uuid.uuid4().hex[:12]}_"
    yield lambda: PostgresStore(DSN, table_prefix=prefix)
    with psycopg.connect(DSN, autocommit=True) as connection:
        for table in ("checkpoints", "sessions", "schema_version"):
            connection.execute(f"DROP TABLE IF EXISTS {prefix}{table}")


@pytest.mark.parametrize("composite", sorted(COMPOSITES))
async def test_the_documented_custom_agent_runs_under_every_composite(
    composite: str, make_store: Callable[[], Store]
) -> None:
    build = COMPOSITES[composite]
    async with make_store() as first:
        paused = (
            await Runner(build(), store=first).query("refund order 7", session_id="chat").collect()
        )
    assert paused.error is None, paused.error
    assert paused.checkpoint_id is not None
    assert {str(i.info) for i in paused.interrupts} == {str({"approve": "refund order 7"})}
    targets = {i.id: "approved" for i in paused.interrupts}
    async with make_store() as store:
        done = await Runner(build(), store=store).resume(paused.checkpoint_id, targets).collect()
        view = await Runner(build(), store=store).sessions.get("chat")
    assert done.error is None, done.error
    texts = [(await e.message.get_message()).content for e in done.events if e.message is not None]
    answers = [t for t in texts if t.startswith("refund order 7: approved")]
    assert answers and all(t.endswith("(True)") for t in answers)
    assert not any(t.startswith("Asking about") for t in texts)  # not said again
    assert view is not None
    said = Counter((m.name, m.role, m.content) for m in view.messages)
    assert all(count == 1 for count in said.values()), said  # no message twice
    # a member run as a tool is not in the session, nor a graph node's words (its answer is)
    if composite not in ("coordinator", "graph"):
        asked = [text for _, _, text in said if text.startswith("Asking about")]
        assert len(asked) == (2 if composite == "parallel" else 1), said
