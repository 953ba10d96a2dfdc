"""The door every request passes (`plait.server.door`): a run started through it belongs to
the caller its key names, however the key is sent, and what it does not take is answered by
the route, as before."""

from __future__ import annotations

import httpx
import pytest

from tests.server.support import client


def _run(http: httpx.Client, headers: dict[str, str]) -> httpx.Response:
    body = {"input": "hello door", "stream": False}
    return http.post("/v1/agents/helper/runs", json=body, headers=headers)


@pytest.mark.parametrize(
    "headers",
    [
        {"authorization": "bearer key-alice"},  # the scheme in any case
        {"authorization": "Bearer   key-alice"},  # spaces before the key
        {"x-api-key": "key-alice"},  # what the langgraph-sdk client sends
        {"x-api-key": "key-bob", "authorization": "Bearer key-alice"},  # Bearer first
    ],
)
def test_a_run_belongs_to_the_user_of_the_key_however_it_is_sent(
    base_url: str, headers: dict[str, str]
) -> None:
    with client(base_url) as anyone:
        started = _run(anyone, headers)
        assert started.status_code == 200, started.text
        assert started.json()["final_output"] == "echo: hello door"
        checkpoint_id = started.headers["x-plait-checkpoint-id"]
        with client(base_url, "key-alice") as alice, client(base_url, "key-bob") as bob:
            assert alice.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "completed"
            assert bob.get(f"/v1/runs/{checkpoint_id}").status_code == 404


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Basic key-alice"}, {"authorization": "Bearer"}, {"x-api-key": ""}],
)
def test_a_run_without_a_valid_key_is_401(base_url: str, headers: dict[str, str]) -> None:
    with client(base_url) as anyone:
        refused = _run(anyone, headers)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    assert refused.json()["error"]["type"] == "http"


def test_what_the_door_does_not_take_is_the_route_s_answer(alice: httpx.Client) -> None:
    unknown = alice.post("/v1/agents/nobody/runs", json={"input": "hi"})
    assert unknown.status_code == 404
    assert "no agent 'nobody'" in unknown.json()["error"]["message"]
    extra = alice.post("/v1/agents/helper/runs", json={"input": "hi", "nope": 1})
    assert extra.status_code == 422
    assert extra.json()["error"]["message"].startswith("body.nope:")
    text = alice.post(
        "/v1/agents/helper/runs", content=b'{"input": "hi"}', headers={"content-type": "text/plain"}
    )
    assert text.status_code == 422
    assert "Content-Type: application/json" in text.json()["error"]["message"]
    nested = alice.post("/v1/agents/helper/x/runs", json={"input": "hi"})
    assert nested.status_code == 404


def test_a_json_content_type_with_parameters_runs(alice: httpx.Client) -> None:
    headers = {"content-type": "application/json; charset=utf-8"}
    body = b'{"input": "hello door", "stream": false}'
    started = alice.post("/v1/agents/helper/runs", content=body, headers=headers)
    assert started.status_code == 200, started.text
    assert started.json()["status"] == "completed"
