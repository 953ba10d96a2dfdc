"""A2A 0.3 clients: raw 0.3 JSON-RPC over HTTP (`message/send`, `message/stream`, `tasks/get`,
`tasks/cancel`) and the 0.3 fields of the agent card, against `plait.protocols.a2a.app`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from plait import ChatModelAgent, interrupt
from plait.messages import Message as PlaitMessage
from plait.protocols import a2a
from plait.testing import FunctionModel, call, reply
from tests.protocols.a2a_support import WAIT
from tests.server.support import ServerThread, parse_sse


def ask(question: str) -> str:
    """Ask the person a question and return the answer."""
    answer: str = interrupt(question)
    return answer


def _plan(messages: list[PlaitMessage], tools: Any) -> PlaitMessage:
    if messages[-1].role == "tool":
        return reply(f"a trip to {messages[-1].content}")
    if "trip" in messages[-1].content:
        return call("ask", {"question": "Which city?"})
    return reply(f"you said {messages[-1].content}")


@pytest.fixture
def url() -> Iterator[str]:
    """Serve a planner (it asks a question when asked for a trip) and return its URL."""
    agent = ChatModelAgent("planner", FunctionModel(_plan), description="Plans.", tools=[ask])
    with ServerThread(a2a.app(agent)) as server:
        yield server.url


class Rpc:
    """A 0.3 JSON-RPC client: no `A2A-Version` header, 0.3 method names and shapes."""

    def __init__(self, http: httpx.Client, url: str) -> None:
        self.http, self.url, self.ids = http, url, 0

    def __call__(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        answer: dict[str, Any] = self.http.post(self.url, json=body).json()
        assert answer["id"] == self.ids and "error" not in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def stream(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        self.ids += 1
        body = {"jsonrpc": "2.0", "id": self.ids, "method": "message/stream", "params": params}
        with self.http.stream("POST", self.url, json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            return [data["result"] for _, data in parse_sse(response.iter_lines())]


@contextlib.contextmanager
def rpc(url: str) -> Iterator[Rpc]:
    with httpx.Client(timeout=WAIT) as http:
        yield Rpc(http, url + "/")


def message(text: str, **ids: str) -> dict[str, Any]:
    return {
        "kind": "message",
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        "messageId": f"m-{text}-{len(ids)}",
        **ids,
    }


def test_the_card_has_the_0_3_fields(url: str) -> None:
    card = httpx.get(url + "/.well-known/agent-card.json", timeout=WAIT).json()
    assert card["url"] == url + "/"
    assert (card["protocolVersion"], card["preferredTransport"]) == ("0.3", "JSONRPC")
    assert card["name"] == "planner" and card["capabilities"]["streaming"] is True


def test_message_send_answers_with_the_completed_task(url: str) -> None:
    with rpc(url) as call_:
        task = call_("message/send", {"message": message("hello")})
        assert (task["kind"], task["status"]["state"]) == ("task", "completed")
        [artifact] = task["artifacts"]
        assert artifact["name"] == "answer"
        assert artifact["parts"] == [{"kind": "text", "text": "you said hello"}]
        assert task["status"]["message"]["parts"][0]["text"] == "you said hello"
        found = call_("tasks/get", {"id": task["id"]})
    assert (found["id"], found["status"]["state"]) == (task["id"], "completed")
    assert found["artifacts"] == task["artifacts"]


def test_message_stream_sends_0_3_events(url: str) -> None:
    with rpc(url) as call_:
        results = call_.stream({"message": message("hello")})
    assert [r["kind"] for r in results] == [
        "task",
        "status-update",
        "artifact-update",
        "status-update",
    ]
    assert results[1]["status"]["state"] == "working" and results[1]["final"] is False
    chunk = results[2]
    assert (chunk["artifact"]["artifactId"], chunk["lastChunk"]) == ("answer", True)
    assert chunk["artifact"]["parts"] == [{"kind": "text", "text": "you said hello"}]
    assert (results[3]["status"]["state"], results[3]["final"]) == ("completed", True)


def test_an_input_required_task_is_resumed_by_the_next_message(url: str) -> None:
    with rpc(url) as call_:
        asked = call_("message/send", {"message": message("plan a trip")})
        assert asked["status"]["state"] == "input-required"
        assert asked["status"]["message"]["parts"][0]["text"] == "Which city?"
        ids = {"taskId": asked["id"], "contextId": asked["contextId"]}
        done = call_("message/send", {"message": message("Lisbon", **ids)})
    assert (done["id"], done["status"]["state"]) == (asked["id"], "completed")
    assert done["artifacts"][0]["parts"][0]["text"] == "a trip to Lisbon"


def test_tasks_cancel_cancels_a_task_waiting_for_input(url: str) -> None:
    with rpc(url) as call_:
        asked = call_("message/send", {"message": message("plan a trip")})
        canceled = call_("tasks/cancel", {"id": asked["id"]})
        assert canceled["status"]["state"] == "canceled"
        assert call_("tasks/get", {"id": asked["id"]})["status"]["state"] == "canceled"


def test_an_unknown_task_is_a_0_3_error(url: str) -> None:
    with httpx.Client(timeout=WAIT) as http:
        body = {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"id": "nope"}}
        answer = http.post(url + "/", json=body).json()
    assert answer["id"] == 7 and answer["error"]["code"] == -32001  # TaskNotFoundError
