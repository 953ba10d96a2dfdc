"""A model that is writing, over HTTP: its text streams as it is written when the run has
a session, and Stop (`POST /v1/runs/{id}/cancel`) ends it now, with a summary that says
`cancelled` and a run that resumes, the session holding the answer once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import httpx
import pytest

from plait import ChatModelAgent, Message, tool
from plait.server import create_app
from plait.stores import MemoryStore
from plait.testing import call
from plait.tools.base import ToolInfo
from tests.server.support import WAIT, ServerThread, client, parse_sse

pytestmark = pytest.mark.timeout(120)


class Writer:
    """Calls `look` first, then writes "Hel" and waits for `gate` before "lo"; later calls
    answer "again" at once."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.writing = threading.Event()
        self.written = threading.Event()  # the gated reply is whole
        self.calls = 0

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Answer whole (not used by these tests' streamed runs)."""
        return Message.assistant("again")

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Answer in chunks; the second call waits for the gate after its first chunk."""
        self.calls += 1
        if self.calls == 1:
            yield call("look", {}, id="look1")
            return
        if self.calls > 2:
            yield Message.assistant("again")
            return
        yield Message.assistant("Hel")
        self.writing.set()
        await asyncio.to_thread(self.gate.wait, WAIT * 6)
        self.written.set()
        yield Message.assistant("lo")


@tool
def look() -> str:
    """Look around."""
    return "all quiet"


@pytest.fixture
def served() -> Iterator[tuple[str, Writer]]:
    model = Writer()
    app = create_app(ChatModelAgent("writer", model, tools=[look]), store=MemoryStore())
    with ServerThread(app) as server:
        try:
            yield server.url, model
        finally:
            model.gate.set()  # a stopped call's waiting thread ends before the server does


def _lines(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    return parse_sse(response.iter_lines())


def test_text_streams_while_the_model_writes_in_a_session(served: tuple[str, Writer]) -> None:
    url, model = served
    body = {"input": "hi", "session_id": "s1", "deltas": True}
    with client(url) as http, http.stream("POST", "/v1/agents/writer/runs", json=body) as response:
        assert response.status_code == 200
        events = _lines(response)
        for name, data in events:
            if name == "agent_delta":
                assert data["delta"] == "Hel"
                break
        assert not model.written.is_set()  # the first chunk came before the model finished
        model.gate.set()
        rest = list(events)
    assert rest[-1][0] == "run_end" and rest[-1][1]["final_output"] == "Hello"


def test_stop_while_the_model_writes_cancels_and_the_run_resumes(
    served: tuple[str, Writer],
) -> None:
    url, model = served
    body = {"input": "hi", "session_id": "s2", "deltas": True}
    with client(url) as http:
        with http.stream("POST", "/v1/agents/writer/runs", json=body) as response:
            run_id = response.headers["x-plait-checkpoint-id"]
            events = _lines(response)
            for name, _ in events:
                if name == "agent_delta":
                    break
            assert model.writing.is_set()
            assert http.post(f"/v1/runs/{run_id}/cancel").status_code == 202
            end = [data for name, data in events if name == "run_end"]
        assert end[-1]["status"] == "cancelled"
        assert end[-1]["error"]["type"] == "RunCancelled"
        assert http.get(f"/v1/runs/{run_id}").json()["status"] == "cancelled"
        checkpoint = end[-1]["checkpoint_id"]
        resumed = http.post(f"/v1/runs/{checkpoint}/resume", json={"stream": False}).json()
        assert resumed["status"] == "completed" and resumed["final_output"] == "again"
        session = http.get("/v1/sessions/s2").json()
        said = [(m["role"], m["content"]) for m in session["messages"]]
        assert said == [
            ("user", "hi"),
            ("assistant", ""),
            ("tool", "all quiet"),
            ("assistant", "again"),
        ]
