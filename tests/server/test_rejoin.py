"""`GET /v1/runs/{id}/stream`: re-attaching to a run's live events, from where the client
was (`Last-Event-ID`), on the process that runs it or on another one sharing the store."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from plait import ChatModelAgent, Message, interrupt, tool
from plait.server import create_app
from plait.stores import SqliteStore
from plait.testing import FunctionModel, ScriptedModel, call, reply
from plait.tools.base import ToolInfo
from tests.server.support import WAIT, BackgroundStream, ServerThread, client, wait_for_status

pytestmark = pytest.mark.timeout(90)

KEYS = {"key-alice": "alice", "key-bob": "bob"}


class Gate:
    """Lets a gated model write its second chunk."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.waiting = threading.Event()


GATE = Gate()


class GatedModel(FunctionModel):
    """Streams "Hello " at once and "world" once the gate opens."""

    def __init__(self) -> None:
        super().__init__(lambda messages, tools: reply("Hello world"))

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        await self.generate(messages, tools=tools, **options)
        yield Message(role="assistant", content="Hello ")
        GATE.waiting.set()
        await asyncio.to_thread(GATE.open.wait, WAIT)
        yield Message(role="assistant", content="world")


@tool
def ask(question: str) -> str:
    """Ask a person.

    Args:
        question: What to ask.
    """
    return f"answer: {interrupt({'question': question})}"


def _agents() -> dict[str, Any]:
    asker = ChatModelAgent(
        "asker",
        ScriptedModel([call("ask", {"question": "Go?"}), reply("went")], per_run=True),
        tools=[ask],
    )
    return {"gated": ChatModelAgent("gated", GatedModel()), "asker": asker}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rejoin") / "plait.db"


def _serve(db: Path) -> ServerThread:
    app = create_app(_agents(), store=SqliteStore(db), api_keys=KEYS, cancel_poll=0.05)
    return ServerThread(app)


@pytest.fixture(scope="module")
def base_url(db: Path) -> Iterator[str]:
    with _serve(db) as running:
        yield running.url


@pytest.fixture
def alice(base_url: str) -> Iterator[httpx.Client]:
    with client(base_url, "key-alice") as http:
        yield http


@pytest.fixture
def gate() -> Iterator[Gate]:
    GATE.open.clear()
    GATE.waiting.clear()
    yield GATE
    GATE.open.set()


def events_of(lines: Iterator[str]) -> list[tuple[int | None, str, str]]:
    """Return the (id, event name, data) of each SSE event in `lines`."""
    found: list[tuple[int | None, str, str]] = []
    event_id: int | None = None
    name, data = "message", []
    for line in lines:
        if line == "":
            if data:
                found.append((event_id, name, "\n".join(data)))
            event_id, name, data = None, "message", []
        elif line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
    return found


def rejoin(http: httpx.Client, run_id: str, last: object = None) -> httpx.Response:
    headers = {} if last is None else {"last-event-id": str(last)}
    return http.get(f"/v1/runs/{run_id}/stream", headers=headers)


def read(response: httpx.Response) -> list[tuple[int | None, str, str]]:
    """Return the (id, event name, data) of each event of a whole SSE response."""
    return events_of(response.iter_lines())


def _start_gated(http: httpx.Client) -> BackgroundStream:
    body = {"input": "hi", "deltas": True}
    started = BackgroundStream(http, "/v1/agents/gated/runs", body)
    assert started.started.wait(WAIT) and started.status == 200
    assert GATE.waiting.wait(WAIT)  # the first chunk is out; the run waits at the gate
    return started


def test_a_client_re_attaches_to_a_live_run_and_follows_it_to_its_end(
    alice: httpx.Client, gate: Gate
) -> None:
    first = _start_gated(alice)
    run_id = first.checkpoint_id
    assert alice.get("/v1/runs?status=running").json()["runs"][0]["run_id"] == run_id
    with alice.stream("GET", f"/v1/runs/{run_id}/stream") as response:
        assert response.headers["x-plait-checkpoint-id"] == run_id
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        assert next(lines) == "id: 0"  # what was sent so far comes at once
        assert next(lines) == "event: agent_delta"
        assert '"delta": "Hello "' in next(lines)
        assert next(lines) == ""
        gate.open.set()  # the run goes on: the rest comes as it happens
        rest = events_of(lines)
    again = first.join()
    assert [name for _, name, _ in rest] == ["agent_delta", "agent_event", "run_end"]
    assert [event_id for event_id, _, _ in rest] == [1, 2, 3]
    assert '"delta": "world"' in rest[0][2]
    assert [name for name, _ in again] == ["agent_delta", *(name for _, name, _ in rest)]
    assert '"status":"completed"' in rest[-1][2]


def test_last_event_id_skips_what_the_client_has(alice: httpx.Client, gate: Gate) -> None:
    first = _start_gated(alice)
    gate.open.set()
    events = first.join()
    run_id = first.checkpoint_id
    whole = read(rejoin(alice, run_id))  # an ended run's log is kept: all of it again
    assert [event_id for event_id, _, _ in whole] == [0, 1, 2, 3]
    assert [name for _, name, _ in whole] == [name for name, _ in events]
    after = read(rejoin(alice, run_id, last=1))
    assert after == whole[2:]
    assert read(rejoin(alice, run_id, last=3)) == []
    refused = rejoin(alice, run_id, last="x")
    assert refused.status_code == 422
    assert "Last-Event-ID" in refused.json()["error"]["message"]


def test_a_resumed_run_is_re_attached_from_its_resume(alice: httpx.Client) -> None:
    paused = alice.post("/v1/agents/asker/runs", json={"input": "go", "stream": False}).json()
    run_id = paused["checkpoint_id"]
    before = read(rejoin(alice, run_id))
    assert before[-1][1] == "run_end" and '"status":"paused"' in before[-1][2]
    body = {"value": "yes", "stream": False}
    assert alice.post(f"/v1/runs/{run_id}/resume", json=body).json()["status"] == "completed"
    after = read(rejoin(alice, run_id))
    assert [event_id for event_id, _, _ in after] == list(range(len(after)))
    assert '"content":"answer: yes"' in after[0][2]  # the resume's first event: the tool's
    assert '"status":"completed"' in after[-1][2]


def test_another_users_run_or_an_unknown_one_is_not_found(
    alice: httpx.Client, base_url: str
) -> None:
    run_id = alice.post("/v1/agents/asker/runs", json={"input": "go", "stream": False}).json()[
        "checkpoint_id"
    ]
    with client(base_url, "key-bob") as bob:
        assert rejoin(bob, run_id).status_code == 404
    assert rejoin(alice, "no-such-run").status_code == 404
    assert rejoin(alice, "x" * 300).status_code == 404
    with client(base_url) as nobody:
        assert rejoin(nobody, run_id).status_code == 401


def test_a_run_of_another_process_is_followed_to_its_end(
    alice: httpx.Client, db: Path, gate: Gate
) -> None:
    first = _start_gated(alice)
    with _serve(db) as other, client(other.url, "key-alice") as there:
        received: list[Any] = []

        def follow() -> None:
            received.extend(read(rejoin(there, first.checkpoint_id)))

        reader = threading.Thread(target=follow)
        reader.start()
        wait_for_status(there, first.checkpoint_id, "running")
        gate.open.set()
        first.join()
        reader.join(WAIT * 2)
        assert not reader.is_alive()
    assert [(event_id, name) for event_id, name, _ in received] == [(0, "run_end")]
    assert '"status":"completed"' in received[0][2]
