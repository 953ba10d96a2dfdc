"""`POST /v1/eval` on a real server: each case is a run listed by `GET /v1/runs` and
cancellable like any run, a client that leaves stops the evaluation, and what a request may
hold is bounded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from plait import ChatModelAgent, Message, ToolInfo, tool
from plait.server import create_app
from plait.server.eval_api import MAX_EVAL_CASES
from plait.stores import MemoryStore
from plait.testing import FunctionModel, call, reply
from tests.server.support import WAIT, ServerThread, client

pytestmark = pytest.mark.timeout(120)

KEY = "eval-key"


@dataclass
class Tools:
    """What the test agent's tools did, and events the test waits on."""

    ticks: list[str] = field(default_factory=list)
    ticking: threading.Event = field(default_factory=threading.Event)
    holding: threading.Event = field(default_factory=threading.Event)


def _agent(tools: Tools) -> ChatModelAgent:
    """An agent that ticks without end ('tick'), holds until cancelled ('hold'), else echoes."""

    @tool
    async def tick() -> str:
        """Count one call (and let the server's other work go on, as a tool's I/O does)."""
        await asyncio.sleep(0)
        tools.ticks.append("tick")
        if len(tools.ticks) >= 3:
            tools.ticking.set()
        return "ticked"

    @tool
    async def hold() -> str:
        """Work until the run is asked to stop (which stops its tool calls)."""
        tools.holding.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), WAIT * 2)
        return "held"

    def model(messages: list[Message], offered: list[ToolInfo]) -> Message:
        text = next(m.content for m in reversed(messages) if m.role == "user")
        if text == "tick":
            return call("tick")
        if text == "hold" and messages[-1].role != "tool":
            return call("hold")
        return reply(f"echo {text}")

    return ChatModelAgent("ticker", FunctionModel(model), tools=[tick, hold], max_iterations=1000)


@pytest.fixture
def served() -> Iterator[tuple[str, Tools]]:
    tools = Tools()
    app = create_app([_agent(tools)], store=MemoryStore(), api_keys={KEY: "ana"})
    with ServerThread(app) as running:
        yield running.url, tools


def _runs(http: httpx.Client, **params: str) -> list[dict[str, Any]]:
    response = http.get("/v1/runs", params={"agent": "ticker", **params})
    assert response.status_code == 200
    runs: list[dict[str, Any]] = response.json()["runs"]
    return runs


def _until(found: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Return `found()` once it is not empty (or at the deadline, empty)."""
    deadline = time.monotonic() + WAIT
    while not (result := found()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return result


def test_each_case_is_a_listed_run_that_can_be_cancelled(served: tuple[str, Tools]) -> None:
    url, tools = served
    evalset = {
        "cases": [
            {"id": "held", "input": "hold"},
            {"id": "after", "input": "hi", "expected_response": "echo hi"},
        ]
    }
    answers: list[httpx.Response] = []

    def post() -> None:
        with client(url, KEY) as http:
            answers.append(http.post("/v1/eval", json={"agent": "ticker", "evalset": evalset}))

    poster = threading.Thread(target=post, daemon=True)
    poster.start()
    assert tools.holding.wait(WAIT)
    with client(url, KEY) as http:
        (running,) = _runs(http, status="running")
        cancel = http.post(f"/v1/runs/{running['run_id']}/cancel")
        assert cancel.status_code == 202
        poster.join(WAIT * 2)
        (answer,) = answers
        assert answer.status_code == 200
        held, after = answer.json()["cases"]
        assert held["run_id"] == running["run_id"]
        assert (held["passed"], held["error"].split(":")[0]) == (False, "RunCancelled")
        assert after["passed"]  # a cancelled case fails; the next one runs
        listed = {run["run_id"]: run["status"] for run in _runs(http)}
        assert listed == {held["run_id"]: "cancelled", after["run_id"]: "completed"}


def _post_and_leave(url: str, body: dict[str, Any], left: threading.Event) -> None:
    """Send `body` to `POST /v1/eval` on a socket of its own; close it once `left` is set."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    head = (
        f"POST /v1/eval HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
        sock.sendall(head.encode() + data)
        assert left.wait(WAIT)


def test_a_client_that_leaves_stops_the_evaluation(served: tuple[str, Tools]) -> None:
    url, tools = served
    cases = [{"id": f"tick-{i}", "input": "tick"} for i in range(20)]
    _post_and_leave(url, {"agent": "ticker", "evalset": {"cases": cases}}, tools.ticking)
    with client(url, KEY) as http:
        # the server saw the client leave: it cancelled the case in flight
        cancelled = _until(lambda: _runs(http, status="cancelled"))
        assert len(cancelled) == 1
        seen = len(tools.ticks)
        marker = http.post("/v1/agents/ticker/runs", json={"input": "marker", "stream": False})
        assert marker.json()["status"] == "completed"
        assert len(tools.ticks) == seen  # no case ran on while the marker ran
        assert _runs(http, status="running") == []
        assert _runs(http, status="cancelled") == cancelled


def test_an_evalset_over_the_case_limit_is_refused(served: tuple[str, Tools]) -> None:
    url, _ = served
    cases = [{"id": f"c{i}", "input": "hi"} for i in range(MAX_EVAL_CASES + 1)]
    with client(url, KEY) as http:
        response = http.post("/v1/eval", json={"agent": "ticker", "evalset": {"cases": cases}})
        assert response.status_code == 413
        error = response.json()["error"]
        assert error["type"] == "EvalSetError"
        assert f"at most {MAX_EVAL_CASES}" in error["message"]
        assert _runs(http) == []  # refused before any case ran
        cases.pop()
        allowed = http.post("/v1/eval", json={"agent": "ticker", "evalset": {"cases": cases}})
        assert allowed.json()["pass_rate"] == 1.0


@pytest.mark.parametrize("depth", [100_000, 300])
def test_a_deeply_nested_body_is_a_client_error(served: tuple[str, Tools], depth: int) -> None:
    url, _ = served
    nested = "[" * depth + "]" * depth
    body = (
        '{"agent": "ticker", "evalset": {"cases": '
        f'[{{"id": "deep", "input": "hi", "expected_response": {nested}}}]}}}}'
    )
    with client(url, KEY) as http:
        response = http.post("/v1/eval", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert set(response.json()) == {"error"}
