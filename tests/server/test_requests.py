"""Requests the server refuses, each with its status and the one error shape; keys and users;
the body limit; the OpenAPI schema."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import LIMIT
from tests.server.support import WAIT

pytestmark = pytest.mark.timeout(60)


def _error(response: httpx.Response, status: int, type: str = "http") -> str:
    """Check an error response's status and shape; return its message."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == type
    message: str = body["error"]["message"]
    assert message
    return message


# --- keys and users -----------------------------------------------------------------------


def test_healthz_needs_no_key(base_url: str) -> None:
    response = httpx.get(f"{base_url}/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Bearer wrong"}, {"authorization": "Basic a2V5LWFsaWNlOg=="}],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/agents"),
        ("POST", "/v1/agents/helper/runs"),
        ("GET", "/v1/runs/x"),
        ("POST", "/v1/runs/x/resume"),
        ("POST", "/v1/runs/x/cancel"),
        ("GET", "/v1/runs/x/history"),
        ("POST", "/v1/runs/x/fork"),
        ("GET", "/v1/sessions"),
        ("GET", "/v1/sessions/x"),
        ("DELETE", "/v1/sessions/x"),
        ("GET", "/openapi.json"),
    ],
)
def test_every_route_but_healthz_needs_a_valid_key(
    base_url: str, method: str, path: str, headers: dict[str, str]
) -> None:
    body = {"input": "hi", "stream": False} if method == "POST" else None
    response = httpx.request(method, base_url + path, json=body, headers=headers)
    assert "API key" in _error(response, 401)
    assert response.headers["www-authenticate"] == "Bearer"


def test_agents_are_listed(alice: httpx.Client) -> None:
    assert alice.get("/v1/agents").json() == [
        {"name": "helper", "description": "Echoes, asks for approval, works slowly."},
        {"name": "desk", "description": "A desk."},
    ]


def test_another_users_runs_are_not_found(alice: httpx.Client, bob: httpx.Client) -> None:
    paused = alice.post("/v1/agents/helper/runs", json={"input": "approve x", "stream": False})
    checkpoint_id = paused.json()["checkpoint_id"]
    _error(bob.get(f"/v1/runs/{checkpoint_id}"), 404, "CheckpointNotFound")
    _error(
        bob.post(f"/v1/runs/{checkpoint_id}/resume", json={"value": 1}), 404, "CheckpointNotFound"
    )
    _error(bob.post(f"/v1/runs/{checkpoint_id}/cancel"), 404, "CheckpointNotFound")
    assert alice.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "paused"
    done = alice.post(f"/v1/runs/{checkpoint_id}/resume", json={"value": 1, "stream": False})
    assert done.json()["status"] == "completed"


# --- unknown things -----------------------------------------------------------------------


def test_unknown_agents_runs_and_routes_are_404(alice: httpx.Client) -> None:
    assert "no agent 'nobody'" in _error(
        alice.post("/v1/agents/nobody/runs", json={"input": "hi"}), 404
    )
    _error(alice.get("/v1/runs/unknown"), 404, "CheckpointNotFound")
    _error(alice.get("/v1/runs/" + "x" * 200), 404, "CheckpointNotFound")
    _error(alice.get("/v1/nothing-here"), 404)
    _error(alice.put("/v1/agents"), 405)


# --- bodies that do not fit -----------------------------------------------------------------

BAD_BODIES: list[tuple[str, Any, str]] = [
    ("unknown role", {"input": [{"role": "robot", "content": "hi"}]}, "role"),
    ("no input", {"stream": False}, "input"),
    ("input a number", {"input": 3}, "input"),
    ("empty message list", {"input": []}, "input"),
    ("content not text", {"input": [{"role": "user", "content": {"a": 1}}]}, "content"),
    ("unknown field", {"input": "hi", "sesion_id": "s"}, "sesion_id"),
    ("session id too long", {"input": "hi", "session_id": "s" * 129}, "session_id"),
    ("session id with a newline", {"input": "hi", "session_id": "a\nb"}, "session_id"),
    ("values not a map", {"input": "hi", "session_values": [1]}, "session_values"),
    ("stream not a bool", {"input": "hi", "stream": "maybe"}, "stream"),
    ("a list body", [1, 2], "body"),
]


@pytest.mark.parametrize(("why", "body", "named"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_a_run_body_that_does_not_fit_is_422(
    alice: httpx.Client, why: str, body: Any, named: str
) -> None:
    assert named in _error(alice.post("/v1/agents/helper/runs", json=body), 422)


def test_deep_but_valid_values_are_served(alice: httpx.Client) -> None:
    values = {"a": json.loads("[" * 400 + "]" * 400)}
    body = {"input": "hi", "session_values": values, "stream": False}
    assert alice.post("/v1/agents/helper/runs", json=body).status_code == 200


def test_a_resume_body_with_targets_and_value_is_422(alice: httpx.Client) -> None:
    response = alice.post("/v1/runs/x/resume", json={"targets": {}, "value": 1})
    assert "not both" in _error(response, 422)
    _error(alice.post("/v1/runs/x/resume", json={"targets": [1]}), 422)


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b'{"input": "hi"', "application/json"),
        (b"\xff\xfe not utf-8", "application/json"),
        (b"[" * 3000, "application/json"),
        (b'{"input": "hi"}', "text/plain"),
        (b'{"input": "hi"}', None),
        (b"input=hi", "application/x-www-form-urlencoded"),
    ],
)
def test_malformed_bodies_are_client_errors_never_500(
    alice: httpx.Client, content: bytes, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response = alice.post("/v1/agents/helper/runs", content=content, headers=headers)
    assert response.status_code in (400, 422), response.text
    _error(response, response.status_code)


# --- the body limit ---------------------------------------------------------------------------


def _padded(size: int) -> bytes:
    """A valid run body of exactly `size` bytes (JSON padded with spaces)."""
    body = json.dumps({"input": "hi", "stream": False}).encode()
    return body + b" " * (size - len(body))


def test_a_body_at_the_limit_is_served_and_one_byte_more_is_413(alice: httpx.Client) -> None:
    headers = {"content-type": "application/json"}
    at_limit = alice.post("/v1/agents/helper/runs", content=_padded(LIMIT), headers=headers)
    assert at_limit.status_code == 200
    over = alice.post("/v1/agents/helper/runs", content=_padded(LIMIT + 1), headers=headers)
    assert "4096 bytes" in _error(over, 413)


def test_a_huge_string_is_413_not_500(alice: httpx.Client) -> None:
    response = alice.post("/v1/agents/helper/runs", json={"input": "x" * 10 * LIMIT})
    _error(response, 413)


def _chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def test_a_chunked_body_counts_the_bytes_received(alice: httpx.Client) -> None:
    headers = {"content-type": "application/json"}
    small = alice.post(
        "/v1/agents/helper/runs", content=_chunks(_padded(LIMIT), 1000), headers=headers
    )
    assert small.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in small.request.headers
    assert small.status_code == 200
    big = alice.post(
        "/v1/agents/helper/runs", content=_chunks(_padded(LIMIT + 500), 1000), headers=headers
    )
    assert big.request.headers.get("transfer-encoding") == "chunked"
    _error(big, 413)


def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit(base_url: str) -> None:
    """The client never ends its body: the 413 comes anyway, once the limit is passed."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
        sock.sendall(
            b"POST /v1/agents/helper/runs HTTP/1.1\r\nhost: test\r\n"
            b"authorization: Bearer key-alice\r\ncontent-type: application/json\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        chunk = b"x" * 1000
        for _ in range(5):  # 5000 bytes, over the 4096 limit; no final chunk is ever sent
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        deadline = time.monotonic() + WAIT
        received = b""
        while b"\r\n\r\n" not in received and time.monotonic() < deadline:
            received += sock.recv(4096)
    assert received.startswith(b"HTTP/1.1 413"), received[:200]


# --- the OpenAPI schema -------------------------------------------------------------------------


def test_the_openapi_schema_documents_every_route(alice: httpx.Client) -> None:
    schema = alice.get("/openapi.json").json()
    expected = {
        ("get", "/healthz"): {"200"},
        ("get", "/v1/agents"): {"200", "401"},
        ("post", "/v1/agents/{name}/runs"): {"200", "400", "401", "404", "413", "422", "429"},
        ("post", "/v1/runs/{checkpoint_id}/resume"): {
            "200",
            "400",
            "401",
            "404",
            "409",
            "422",
            "429",
        },
        ("post", "/v1/runs/{checkpoint_id}/cancel"): {"202", "401", "404"},
        ("get", "/v1/runs/{checkpoint_id}"): {"200", "401", "404"},
        ("get", "/v1/runs/{checkpoint_id}/spans"): {"200", "401", "404"},
        ("get", "/v1/runs/{checkpoint_id}/history"): {"200", "401", "404"},
        ("post", "/v1/runs/{checkpoint_id}/fork"): {"200", "400", "401", "404", "422", "429"},
        ("get", "/v1/sessions"): {"200", "401"},
        ("get", "/v1/sessions/{session_id}"): {"200", "401", "404"},
        ("delete", "/v1/sessions/{session_id}"): {"204", "401", "404"},
        ("post", "/agui/{agent}"): {"200", "400", "401", "404", "409", "422"},
        ("get", "/v1/models"): {"200", "401"},
        ("get", "/v1/models/{model}"): {"200", "401", "404"},
        ("post", "/v1/chat/completions"): {"200", "400", "401", "404", "413", "424"},
        ("post", "/v1/responses"): {"200", "400", "401", "404", "413", "424"},
        ("post", "/v1/eval"): {"200", "400", "401", "404", "413", "422"},
        ("get", "/v1/runs"): {"200", "401", "422"},
        ("get", "/v1/usage"): {"200", "401", "422"},
        ("get", "/v1/agents/{name}/topology"): {"200", "401", "404"},
        ("get", "/v1/approvals"): {"200", "401"},
        ("get", "/v1/approvals/rules"): {"200", "401"},
        ("post", "/v1/approvals/rules"): {"200", "401", "422"},
        ("delete", "/v1/approvals/rules/{tool}"): {"204", "401"},
        ("get", "/v1/audit"): {"200", "401", "422"},
    }
    documented = {
        (method, path): operation
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    }
    own = ("/healthz", "/v1/", "/agui/")
    agent_protocol = {key for key in documented if not key[1].startswith(own)}
    assert set(documented) - agent_protocol == set(expected)
    for key in agent_protocol:  # the Agent Protocol's routes, behind the same keys
        operation = documented[key]
        assert operation["summary"] and operation["description"], key
        assert "401" in operation["responses"], key
    for key, statuses in expected.items():
        operation = documented[key]
        assert operation["summary"] and operation["description"], key
        assert statuses <= set(operation["responses"]), key
    run = documented[("post", "/v1/agents/{name}/runs")]["responses"]["200"]["content"]
    assert {"application/json", "text/event-stream"} <= set(run)
    components = schema["components"]["schemas"]
    assert {"RunSummary", "RunResponse", "ErrorResponse", "RunRequest", "ResumeRequest"} <= set(
        components
    )
    assert {"ForkRequest", "StepOut"} <= set(components)
    fork = documented[("post", "/v1/runs/{checkpoint_id}/fork")]["responses"]["200"]["content"]
    assert {"application/json", "text/event-stream"} <= set(fork)


# --- text that is not text ----------------------------------------------------------------

LONE = [
    ("/v1/agents/helper/runs", '{"input": "\\ud800 hi", "stream": true}'),
    ("/v1/agents/helper/runs", '{"input": "\\ud800 hi", "stream": false}'),
    ("/v1/agents/helper/runs", '{"input": [{"role": "user", "content": "hi \\udc00"}]}'),
    (
        "/v1/chat/completions",
        '{"model": "helper", "messages": [{"role": "user", '
        '"content": "\\ud800 hi"}], "stream": true}',
    ),
    (
        "/v1/chat/completions",
        '{"model": "helper", "messages": [{"role": "user", "content": "\\ud83d hi"}]}',
    ),
]


@pytest.mark.parametrize(("path", "body"), LONE)
def test_a_lone_surrogate_is_refused_at_once_and_starts_no_run(
    alice: httpx.Client, path: str, body: str
) -> None:
    before = alice.get("/v1/runs", params={"status": "running"}).json()["runs"]
    response = alice.post(path, content=body, headers={"content-type": "application/json"})
    if path.startswith("/v1/chat"):  # OpenAI's routes answer a bad body as OpenAI does
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        message = error["message"]
    else:
        message = _error(response, 422)
    assert "surrogate" in message
    assert message.startswith(("input", "messages[0].content")), message  # names where
    after = alice.get("/v1/runs", params={"status": "running"}).json()["runs"]
    assert [r["run_id"] for r in after] == [r["run_id"] for r in before]


def test_a_surrogate_pair_and_an_escaped_backslash_are_text(alice: httpx.Client) -> None:
    body = '{"input": "\\ud83d\\ude00 and \\\\ud800", "stream": false}'
    response = alice.post(
        "/v1/agents/helper/runs", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["final_output"] == "echo: \U0001f600 and \\ud800"
