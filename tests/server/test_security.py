"""The server's security findings, each through the public API over a real socket: DNS
rebinding, SSE lines no client can misread, one id rule, strict bodies."""

from __future__ import annotations

import json
import socket
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from plait import ChatModelAgent, tool
from plait.errors import UsageError
from plait.server import create_app
from plait.stores import MemoryStore
from plait.testing import FunctionModel, call, reply
from tests.server.support import WAIT, ServerThread, client, parse_sse

pytestmark = pytest.mark.timeout(60)

_EVIL = "evil.example"


@tool
def shout(text: str) -> str:
    """Repeat a text.

    Args:
        text: What to repeat.
    """
    return text


def _echo(messages: Any, tools: Any) -> Any:
    """Call `shout` with the user's text, then answer with that text."""
    last = messages[-1]
    if last.role == "tool":
        return reply(last.content)
    return call("shout", {"text": last.content})


def _agent() -> ChatModelAgent:
    return ChatModelAgent("echo", FunctionModel(_echo), tools=[shout])


@pytest.fixture(scope="module")
def keyless() -> Iterator[str]:
    """A server without keys (what `plait web` serves); return its URL."""
    with ServerThread(create_app(_agent(), store=MemoryStore())) as running:
        yield running.url


@pytest.fixture(scope="module")
def keyed() -> Iterator[str]:
    """A server with a key; return its URL."""
    app = create_app(_agent(), store=MemoryStore(), api_keys={"k": "alice"})
    with ServerThread(app) as running:
        yield running.url


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


# --- 1. DNS rebinding ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/sessions", None),
        ("GET", "/v1/agents", None),
        ("POST", "/v1/agents/echo/runs", {"input": "hi", "stream": False, "session_id": "s"}),
        ("GET", "/healthz", None),
    ],
)
def test_a_keyless_server_refuses_a_rebound_host(
    keyless: str, method: str, path: str, body: dict[str, Any] | None
) -> None:
    host = f"{_EVIL}:{_port(keyless)}"
    with client(keyless) as http:
        response = http.request(method, path, json=body, headers={"host": host})
        assert response.status_code == 403, response.text
        assert response.json()["error"]["type"] == "http"
        assert _EVIL in response.json()["error"]["message"]
        # nothing was started: no session was written under the rebound host
        assert http.get("/v1/sessions").json() == []


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "LOCALHOST", "app.localhost"])
def test_a_keyless_server_answers_its_loopback_names(keyless: str, name: str) -> None:
    with client(keyless) as http:
        response = http.get("/v1/agents", headers={"host": f"{name}:{_port(keyless)}"})
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("name", ["evillocalhost", "localhost.evil.test", "x-localhost"])
def test_a_name_that_only_ends_like_localhost_is_refused(keyless: str, name: str) -> None:
    with client(keyless) as http:
        response = http.get("/v1/agents", headers={"host": f"{name}:{_port(keyless)}"})
        assert response.status_code == 403, response.text


def test_a_keyless_server_refuses_a_foreign_origin(keyless: str) -> None:
    with client(keyless) as http:
        body = {"input": "hi", "stream": False}
        for origin in (f"http://{_EVIL}", "null", "file://x"):
            response = http.post("/v1/agents/echo/runs", json=body, headers={"origin": origin})
            assert response.status_code == 403, (origin, response.text)
        same = http.post("/v1/agents/echo/runs", json=body, headers={"origin": keyless})
        assert same.status_code == 200 and same.json()["final_output"] == "hi"


def test_a_raw_socket_without_a_host_header_is_refused(keyless: str) -> None:
    with socket.create_connection(("127.0.0.1", _port(keyless)), timeout=WAIT) as sock:
        sock.sendall(b"GET /v1/agents HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 403"), answer[:100]


def test_allowed_hosts_names_a_proxy_and_star_lifts_the_check() -> None:
    app = create_app(_agent(), store=MemoryStore(), allowed_hosts=["agents.example.com"])
    with ServerThread(app) as running, client(running.url) as http:
        assert http.get("/v1/agents", headers={"host": "agents.example.com"}).status_code == 200
        assert http.get("/v1/agents", headers={"host": _EVIL}).status_code == 403
    app = create_app(_agent(), store=MemoryStore(), allowed_hosts=["*"])
    with ServerThread(app) as running, client(running.url) as http:
        assert http.get("/v1/agents", headers={"host": _EVIL}).status_code == 200


def test_a_keyed_server_answers_any_host_unless_told(keyed: str) -> None:
    with client(keyed, "k") as http:
        assert http.get("/v1/agents", headers={"host": _EVIL}).status_code == 200
    app = create_app(
        _agent(), store=MemoryStore(), api_keys={"k": "alice"}, allowed_hosts=["a.example"]
    )
    with ServerThread(app) as running, client(running.url, "k") as http:
        assert http.get("/v1/agents", headers={"host": _EVIL}).status_code == 403


@pytest.mark.parametrize("bad", ["", 3, [""], ["a b" * 200], "name"])
def test_allowed_hosts_must_be_a_list_of_names(bad: Any) -> None:
    with pytest.raises(UsageError, match="allowed_hosts"):
        create_app(_agent(), store=MemoryStore(), allowed_hosts=bad)


# --- 2. SSE lines -------------------------------------------------------------------------


_FORGED = '\n\nevent: run_end\ndata: {"status": "completed", "final_output": "forged"}\n\n'


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c"])
def test_no_client_sees_a_forged_run_end(keyless: str, separator: str) -> None:
    text = "hi" + _FORGED.replace("\n", separator)
    with (
        client(keyless) as http,
        http.stream("POST", "/v1/agents/echo/runs", json={"input": text}) as response,
    ):
        raw = response.read()
    # httpx's iter_lines splits the way str.splitlines does: every separator above
    lines = raw.decode().splitlines()
    events = list(parse_sse(iter(lines)))
    names = [name for name, _ in events]
    assert names.count("run_end") == 1 and names[-1] == "run_end"
    assert events[-1][1]["final_output"] == text  # the text came through whole
    assert events[-1][1]["status"] == "completed"


# --- 3 and 4. one id rule -----------------------------------------------------------------


@pytest.mark.parametrize(
    "session_id",
    ["a/b", "../x", ".", "..", "a\u2028b", "a\x85b", "\ud800", "x" * 129, "", "a\x00b"],
)
def test_a_session_id_the_api_cannot_route_is_422_and_writes_nothing(
    keyless: str, session_id: str
) -> None:
    body = json.dumps({"input": "hi", "session_id": session_id, "stream": False}, ensure_ascii=True)
    with client(keyless) as http:
        response = http.post(
            "/v1/agents/echo/runs", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 422, response.text
        message = response.json()["error"]["message"]
        assert "session_id" in message and "local/" not in message
        assert response.headers.get("x-plait-checkpoint-id") is None
        assert http.get("/v1/sessions").json() == []


def test_every_accepted_session_id_can_be_read_and_deleted(keyless: str) -> None:
    with client(keyless) as http:
        for session_id in ("a b", "ünï", "a.b", "...", "a%2Fb", "😀", "a?b#c"):
            body = {"input": "hi", "session_id": session_id, "stream": False}
            assert http.post("/v1/agents/echo/runs", json=body).status_code == 200
            path = "/v1/sessions/" + urllib.parse.quote(session_id, safe="")
            assert http.get(path).json()["session_id"] == session_id
            assert http.delete(path).status_code == 204
            assert http.get(path).status_code == 404
        assert http.get("/v1/sessions").json() == []


@pytest.mark.parametrize("run_id", ["%E2%80%A8", "%C2%85", "%ED%A0%80", "x" * 200])
def test_a_run_id_no_run_can_have_is_404_without_internals(keyless: str, run_id: str) -> None:
    with client(keyless) as http:
        for method, path in (
            ("GET", f"/v1/runs/{run_id}"),
            ("POST", f"/v1/runs/{run_id}/cancel"),
            ("POST", f"/v1/runs/{run_id}/resume"),
        ):
            response = http.request(method, path, json={} if method == "POST" else None)
            assert response.status_code == 404, (path, response.text)
            assert "local/" not in response.text


# --- 5. strict bodies ---------------------------------------------------------------------


@pytest.mark.parametrize("stream", ["yes", "on", "off", 1, 0, "1", "true", None])
def test_stream_must_be_a_json_bool(keyless: str, stream: Any) -> None:
    with client(keyless) as http:
        run = http.post("/v1/agents/echo/runs", json={"input": "hi", "stream": stream})
        assert run.status_code == 422, run.text
        assert "stream" in run.json()["error"]["message"]
        resume = http.post("/v1/runs/nope/resume", json={"value": 1, "stream": stream})
        assert resume.status_code == 422, resume.text


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": 5},
        {"role": "user", "content": "x", "tool_call_id": 3},
        {"role": "assistant", "tool_calls": [{"id": 1, "name": "shout", "arguments": "{}"}]},
    ],
)
def test_message_fields_are_not_coerced(keyless: str, message: dict[str, Any]) -> None:
    with client(keyless) as http:
        response = http.post("/v1/agents/echo/runs", json={"input": [message], "stream": False})
        assert response.status_code == 422, response.text
