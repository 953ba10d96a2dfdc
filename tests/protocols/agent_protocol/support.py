"""What the Agent Protocol tests share: agents on scripted models, a real server with two
users' keys, and the official `langgraph_sdk` client of each user."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from plait import ChatModelAgent, Team, interrupt, run_context, tool
from plait.core.agent import Agent
from plait.server import create_app
from plait.stores.base import SessionRecord
from plait.stores.memory import MemoryStore
from plait.stores.sqlite import SqliteStore
from plait.testing import ScriptedModel, call, reply
from tests.server.support import ServerThread

KEYS = {"key-ann": "ann", "key-bob": "bob"}
#: The public names of the served agents.
SERVED = {"echo", "asker", "desk", "worker", "reporter"}


@tool
def approve(action: str) -> str:
    """Ask a person to approve an action.

    Args:
        action: What to approve.
    """
    answer = interrupt({"question": f"approve {action}?"})
    return f"{action}={answer}"


#: Set once the `worker` agent's tool is working (it works until its run is cancelled).
WORKING = threading.Event()


@tool
async def work() -> str:
    """Work until the run is asked to stop: the stop cancels the call, which so never has a
    result (a loop that checked `ctx.cancelled` could see the stop first and return one)."""
    WORKING.set()
    await asyncio.Event().wait()  # only the run's stop ends it
    return "never"


@tool
def report() -> str:
    """Report progress as a custom event."""
    run_context().emit({"progress": 100})  # the `custom` stream mode's value
    return "reported"


report.emits_events = True  # its events reach the run's stream (`plait.tools.base.EmitsEvents`)


def make_agents() -> dict[str, Agent]:
    """Return the served agents: an echo, one that asks for approval, and a team."""
    echo = ChatModelAgent(
        "echo",
        ScriptedModel([lambda m, t: reply(f"echo: {m[-1].content}")], per_run=True),
        description="Echoes the last message.",
    )
    asker = ChatModelAgent(
        "asker",
        ScriptedModel([call("approve", {"action": "pay"}), reply("paid")], per_run=True),
        description="Asks before it pays.",
        tools=[approve],
    )
    triage = ChatModelAgent(
        "triage",
        ScriptedModel(
            [call("transfer_to_agent", {"agent_name": "billing"}), reply("sent")], per_run=True
        ),
    )
    billing = ChatModelAgent("billing", ScriptedModel([reply("your bill is 10")], per_run=True))
    desk = Team.swarm(triage, [triage, billing], name="desk", description="A desk.")
    worker = ChatModelAgent(
        "worker",
        ScriptedModel([call("work", {}), reply("worked")], per_run=True),
        tools=[work],
    )
    reporter = ChatModelAgent(
        "reporter",
        ScriptedModel([call("report", {}), reply("reported")], per_run=True),
        tools=[report],
    )
    return {"echo": echo, "asker": asker, "desk": desk, "worker": worker, "reporter": reporter}


def served_asker() -> Agent:
    """The `asker` agent, as a TARGET of `plait serve` (`support.py:served_asker`)."""
    return make_agents()["asker"]


@dataclass
class Served:
    """A running server and the clients of its two users."""

    url: str
    ann: LangGraphClient
    bob: LangGraphClient


@contextlib.asynccontextmanager
async def serve(
    tmp_path: Path, agents: dict[str, Agent] | None = None, **options: Any
) -> AsyncIterator[Served]:
    """Serve the test agents (or `agents`) on a SQLite store in `tmp_path`, with two users'
    keys (and `options` for `create_app`)."""
    store = SqliteStore(tmp_path / "ap.db")
    served = make_agents() if agents is None else agents
    app = create_app(served, store=store, api_keys=KEYS, **options)
    with ServerThread(app) as server:
        async with (
            get_client(url=server.url, api_key="key-ann") as ann,
            get_client(url=server.url, api_key="key-bob") as bob,
        ):
            yield Served(server.url, ann, bob)


class CountingStore(MemoryStore):
    """A memory store that counts its session reads and writes, per record."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: collections.Counter[str] = collections.Counter()
        self.writes: collections.Counter[str] = collections.Counter()

    async def _get_session_record(self, session_id: str) -> SessionRecord | None:
        self.reads[session_id] += 1
        return await super()._get_session_record(session_id)

    async def _put_session(
        self, session_id: str, data: bytes, ttl: float | None, expected_version: int | None
    ) -> int:
        self.writes[session_id] += 1
        return await super()._put_session(session_id, data, ttl, expected_version)
