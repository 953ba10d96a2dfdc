"""Sessions over HTTP: listed newest first, read, deleted, each user's own."""

from __future__ import annotations

import uuid
from urllib.parse import quote

import httpx
import pytest

pytestmark = pytest.mark.timeout(60)


def _turn(http: httpx.Client, session_id: str, text: str, **body: object) -> dict[str, object]:
    response = http.post(
        "/v1/agents/helper/runs",
        json={"input": text, "session_id": session_id, "stream": False, **body},
    )
    assert response.status_code == 200, response.text
    summary: dict[str, object] = response.json()
    return summary


def _listed(http: httpx.Client) -> list[str]:
    response = http.get("/v1/sessions")
    assert response.status_code == 200
    return [s["session_id"] for s in response.json()]


def test_sessions_are_listed_newest_first_and_read_whole(alice: httpx.Client) -> None:
    older, newer = f"older-{uuid.uuid4().hex}", f"newer-{uuid.uuid4().hex}"
    _turn(alice, older, "one", session_values={"city": "Oslo"})
    summary = _turn(alice, newer, "second")
    assert summary["session_id"] == newer
    _turn(alice, newer, "three")
    listed = alice.get("/v1/sessions").json()
    ids = [s["session_id"] for s in listed]
    assert ids.index(newer) < ids.index(older)
    assert all(set(s) == {"session_id", "updated_at", "agent"} for s in listed)
    assert {s["agent"] for s in listed if s["session_id"] in (older, newer)} == {"helper"}
    session = alice.get(f"/v1/sessions/{newer}").json()
    assert set(session) == {"session_id", "messages", "values", "handoffs"}
    assert [(m["author"], m["role"], m["content"]) for m in session["messages"]] == [
        ("user", "user", "second"),
        ("helper", "assistant", "echo: second"),
        ("user", "user", "three"),
        ("helper", "assistant", "echo: three"),
    ]
    assert alice.get(f"/v1/sessions/{older}").json()["values"] == {"city": "Oslo"}


def test_a_paused_turn_is_in_the_session_once_resumed(alice: httpx.Client) -> None:
    session_id = f"s-{uuid.uuid4().hex}"
    paused = _turn(alice, session_id, "approve it")
    assert paused["status"] == "paused" and paused["session_id"] == session_id
    resumed = alice.post(
        f"/v1/runs/{paused['checkpoint_id']}/resume", json={"value": "ok", "stream": False}
    ).json()
    assert resumed["session_id"] == session_id
    messages = alice.get(f"/v1/sessions/{session_id}").json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["name"] == "approve"
    assert session_id in _listed(alice)


def test_a_session_is_deleted_once(alice: httpx.Client) -> None:
    session_id = f"gone-{uuid.uuid4().hex}"
    _turn(alice, session_id, "hello")
    response = alice.delete(f"/v1/sessions/{session_id}")
    assert response.status_code == 204 and response.content == b""
    assert alice.get(f"/v1/sessions/{session_id}").status_code == 404
    assert session_id not in _listed(alice)
    again = alice.delete(f"/v1/sessions/{session_id}")
    assert again.status_code == 404
    assert again.json()["error"]["type"] == "http"


def test_another_users_session_is_not_found_nor_listed(
    alice: httpx.Client, bob: httpx.Client
) -> None:
    session_id = f"mine-{uuid.uuid4().hex}"
    _turn(alice, session_id, "secret")
    assert bob.get(f"/v1/sessions/{session_id}").status_code == 404
    assert bob.delete(f"/v1/sessions/{session_id}").status_code == 404
    assert session_id not in _listed(bob)
    _turn(bob, session_id, "same id, other user")  # bob's own session of that id
    assert [m["content"] for m in alice.get(f"/v1/sessions/{session_id}").json()["messages"]] == [
        "secret",
        "echo: secret",
    ]
    assert alice.get(f"/v1/sessions/{session_id}").json()["messages"][0]["content"] == "secret"


def test_unknown_and_impossible_session_ids_are_404(alice: httpx.Client) -> None:
    assert alice.get("/v1/sessions/never-used").status_code == 404
    assert alice.get(f"/v1/sessions/{'s' * 300}").status_code == 404
    assert alice.delete(f"/v1/sessions/{'s' * 300}").status_code == 404


def test_session_ids_that_json_escapes_are_listed_and_unlisted_whole(
    alice: httpx.Client,
) -> None:
    odd = f'say "hi" \\ é ☃ {uuid.uuid4().hex}'
    plain = f"plain-{uuid.uuid4().hex}"
    _turn(alice, odd, "hello")
    _turn(alice, plain, "hello")
    assert {odd, plain} <= set(_listed(alice))
    assert alice.delete(f"/v1/sessions/{quote(odd, safe='')}").status_code == 204
    listed = _listed(alice)
    assert odd not in listed and plain in listed
