"""Runs over HTTP: both response shapes, summaries, pause and resume, cancel, disconnects."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from plait import AgentEvent
from plait.server import create_app
from plait.stores import MemoryStore
from tests.server.support import (
    WAIT,
    BackgroundStream,
    Controls,
    ServerThread,
    client,
    make_agents,
    parse_sse,
    stream_run,
    wait_for_status,
)

pytestmark = pytest.mark.timeout(60)

SUMMARY_KEYS = {
    "status",
    "checkpoint_id",
    "final_output",
    "interrupts",
    "error",
    "usage",
    "handoffs",
    "agent",
    "session_id",
    "metadata",
}


def _run(http: httpx.Client, text: str, **body: Any) -> httpx.Response:
    return http.post("/v1/agents/helper/runs", json={"input": text, "stream": False, **body})


def _pause(http: httpx.Client, text: str = "approve deploy") -> dict[str, Any]:
    response = _run(http, text)
    assert response.status_code == 200, response.text
    summary = response.json()
    assert summary["status"] == "paused"
    return summary


def test_a_run_without_stream_answers_its_summary_and_events(alice: httpx.Client) -> None:
    response = _run(alice, "hello there")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == SUMMARY_KEYS | {"events"}
    assert body["status"] == "completed"
    assert body["final_output"] == "echo: hello there"
    assert body["usage"] == {"input_tokens": 2, "output_tokens": 3}
    assert body["error"] is None and body["interrupts"] == [] and body["handoffs"] == []
    assert body["checkpoint_id"] is None  # nothing to resume
    events = [AgentEvent.from_json(json.dumps(e)) for e in body["events"]]
    assert [e.agent_name for e in events] == ["helper"]
    checkpoint_id = response.headers["x-plait-checkpoint-id"]
    summary = alice.get(f"/v1/runs/{checkpoint_id}").json()
    assert summary == {k: v for k, v in body.items() if k != "events"}


def test_a_streamed_run_sends_agent_events_then_one_run_end(alice: httpx.Client) -> None:
    with alice.stream("POST", "/v1/agents/helper/runs", json={"input": "hi"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        checkpoint_id = response.headers["x-plait-checkpoint-id"]
        events = list(parse_sse(response.iter_lines()))
    names = [name for name, _ in events]
    assert names == ["agent_event", "run_end"]
    event = AgentEvent.from_json(json.dumps(events[0][1]))
    assert event.message is not None and event.message.message is not None
    assert event.message.message.content == "echo: hi"
    end = events[-1][1]
    assert set(end) == SUMMARY_KEYS
    assert end["status"] == "completed" and end["final_output"] == "echo: hi"
    assert alice.get(f"/v1/runs/{checkpoint_id}").json() == end


def test_input_may_be_message_objects(alice: httpx.Client) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok", "author": "ignored"},
        {"role": "user", "content": "second one"},
    ]
    response = alice.post("/v1/agents/helper/runs", json={"input": messages, "stream": False})
    assert response.status_code == 200, response.text
    assert response.json()["final_output"] == "echo: second one"


def test_a_run_that_fails_inside_is_200_with_a_failed_summary(alice: httpx.Client) -> None:
    response, events = stream_run(alice, "/v1/agents/helper/runs", {"input": "fail now"})
    assert response.status_code == 200
    end = events[-1][1]
    assert end["status"] == "failed"
    assert end["error"]["type"] == "ModelError"
    assert "the model is down" in end["error"]["message"]
    assert events[-2][1]["error"]["type"] == "ModelError"


def test_a_team_run_reports_its_handoffs(alice: httpx.Client) -> None:
    response = alice.post("/v1/agents/desk/runs", json={"input": "my bill?", "stream": False})
    body = response.json()
    assert body["final_output"] == "your bill is 10"
    handoff, end = body["handoffs"]
    assert handoff["from_agent"] == "triage" and handoff["to_agent"] == "billing"
    assert handoff["reason"] == "a bill" and handoff["timestamp"]
    assert (end["from_agent"], end["to_agent"]) == ("billing", "END")
    assert end["message"] == "your bill is 10"


def test_a_paused_run_resumes_with_a_value(alice: httpx.Client) -> None:
    summary = _pause(alice)
    [pending] = summary["interrupts"]
    assert pending["info"] == {"question": "approve deploy?"}
    assert pending["address"].startswith("agent:helper;tool:approve:")
    assert set(pending) == {"id", "info", "address"}
    checkpoint_id = summary["checkpoint_id"]
    assert alice.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "paused"
    response, events = stream_run(alice, f"/v1/runs/{checkpoint_id}/resume", {"value": "yes"})
    assert response.status_code == 200
    assert response.headers["x-plait-checkpoint-id"] == checkpoint_id
    end = events[-1][1]
    assert end["status"] == "completed" and end["final_output"] == "done: deploy=yes"
    assert alice.get(f"/v1/runs/{checkpoint_id}").json() == end


def test_a_resume_by_targets_and_a_second_pause_under_a_new_id(alice: httpx.Client) -> None:
    first = _pause(alice, "two")
    ids = [i["id"] for i in first["interrupts"]]
    assert len(ids) == 2
    path = f"/v1/runs/{first['checkpoint_id']}/resume"
    again = alice.post(path, json={"targets": {ids[0]: "ok"}, "stream": False}).json()
    assert again["status"] == "paused"
    assert again["checkpoint_id"] not in (None, first["checkpoint_id"])
    [left] = again["interrupts"]
    assert alice.get(f"/v1/runs/{first['checkpoint_id']}").json()["status"] == "paused"
    assert alice.get(f"/v1/runs/{again['checkpoint_id']}").json() == {
        k: v for k, v in again.items() if k != "events"
    }
    last = alice.post(
        f"/v1/runs/{again['checkpoint_id']}/resume",
        json={"targets": {left["id"]: "fine"}, "stream": False},
    ).json()
    assert last["status"] == "completed"
    assert last["final_output"] == "done: a=ok | b=fine"


@pytest.mark.parametrize("stream", [True, False])
def test_bad_resume_targets_are_400_and_leave_the_run_resumable(
    alice: httpx.Client, stream: bool
) -> None:
    summary = _pause(alice, "two")
    path = f"/v1/runs/{summary['checkpoint_id']}/resume"
    scalar = alice.post(path, json={"value": "yes", "stream": stream})
    assert scalar.status_code == 400
    assert scalar.json()["error"]["type"] == "ResumeError"
    unknown = alice.post(path, json={"targets": {"nope": 1}, "stream": stream})
    assert unknown.status_code == 400
    assert "nope" in unknown.json()["error"]["message"]
    assert alice.get(path.removesuffix("/resume")).json()["status"] == "paused"
    targets = {i["id"]: "y" for i in summary["interrupts"]}
    done = alice.post(path, json={"targets": targets, "stream": False}).json()
    assert done["status"] == "completed"


@pytest.mark.parametrize("stream", [True, False])
def test_a_repeated_resume_is_409(alice: httpx.Client, stream: bool) -> None:
    summary = _pause(alice)
    path = f"/v1/runs/{summary['checkpoint_id']}/resume"
    assert alice.post(path, json={"value": 1, "stream": False}).status_code == 200
    again = alice.post(path, json={"value": 1, "stream": stream})
    assert again.status_code == 409
    assert again.json()["error"]["type"] == "CheckpointAlreadyResumed"


def _resume_with_y(http: httpx.Client, path: str) -> httpx.Response:
    return http.post(path, json={"value": "y", "stream": False})


def test_concurrent_resumes_one_wins_the_other_is_409(alice: httpx.Client) -> None:
    for _ in range(3):
        summary = _pause(alice)
        path = f"/v1/runs/{summary['checkpoint_id']}/resume"
        with ThreadPoolExecutor(4) as pool:
            responses = list(pool.map(_resume_with_y, [alice] * 4, [path] * 4))
        codes = sorted(r.status_code for r in responses)
        assert codes == [200, 409, 409, 409], [r.text for r in responses]


def test_a_resume_of_an_unknown_or_unpaused_run(alice: httpx.Client) -> None:
    missing = alice.post("/v1/runs/no-such-run/resume", json={"value": 1})
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "CheckpointNotFound"
    too_long = alice.post(f"/v1/runs/{'x' * 300}/resume", json={"value": 1})
    assert too_long.status_code == 404
    completed = _run(alice, "hello").headers["x-plait-checkpoint-id"]
    response = alice.post(f"/v1/runs/{completed}/resume", json={"value": 1})
    assert response.status_code == 404  # it never paused: nothing to resume


def test_a_cancelled_run_says_so_and_resumes(alice: httpx.Client, controls: Controls) -> None:
    run = BackgroundStream(alice, "/v1/agents/helper/runs", {"input": "slow"})
    assert run.started.wait(WAIT) and controls.slow_started.wait(WAIT)
    assert run.status == 200
    checkpoint_id = run.checkpoint_id
    assert alice.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "running"
    cancel = alice.post(f"/v1/runs/{checkpoint_id}/cancel")
    assert cancel.status_code == 202
    assert cancel.json() == {"checkpoint_id": checkpoint_id, "status": "running"}
    events = run.join()
    assert [name for name, _ in events].count("run_end") == 1
    end = events[-1][1]
    assert end["status"] == "cancelled"
    assert end["error"]["type"] == "RunCancelled"
    assert end["checkpoint_id"] is not None
    assert alice.get(f"/v1/runs/{checkpoint_id}").json() == end
    resumed = alice.post(f"/v1/runs/{end['checkpoint_id']}/resume", json={"stream": False})
    assert resumed.status_code == 200
    assert resumed.json()["final_output"] == "done: slow work done"


def test_cancelling_a_finished_run_changes_nothing(alice: httpx.Client) -> None:
    checkpoint_id = _run(alice, "hello").headers["x-plait-checkpoint-id"]
    response = alice.post(f"/v1/runs/{checkpoint_id}/cancel")
    assert response.status_code == 202
    assert response.json()["status"] == "completed"
    assert alice.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "completed"
    assert alice.post("/v1/runs/nothing-here/cancel").status_code == 404


def test_a_client_that_disconnects_does_not_lose_the_run(
    alice: httpx.Client, controls: Controls
) -> None:
    with alice.stream("POST", "/v1/agents/helper/runs", json={"input": "block"}) as response:
        checkpoint_id = response.headers["x-plait-checkpoint-id"]
        lines = response.iter_lines()
        name, _ = next(parse_sse(lines))
        assert name == "agent_event"
        assert controls.blocked.wait(WAIT)
    assert alice.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "running"
    controls.release.set()
    summary = wait_for_status(alice, checkpoint_id, "completed", "failed")
    assert summary["status"] == "completed"
    assert summary["final_output"] == "done: unblocked"


class _LosingClaims(MemoryStore):
    """A store where another worker always claims a checkpoint just before this one."""

    async def claim_checkpoint(self, checkpoint_id: str, version: int) -> bool:
        assert await super().claim_checkpoint(checkpoint_id, version)  # the other worker
        return await super().claim_checkpoint(checkpoint_id, version)


def test_a_resume_that_loses_the_claim_to_another_is_409() -> None:
    app = create_app(make_agents(Controls()), store=_LosingClaims())
    with ServerThread(app) as server, client(server.url) as http:
        paused = _pause(http)
        response = http.post(f"/v1/runs/{paused['checkpoint_id']}/resume", json={"value": 1})
        assert response.status_code == 409
        assert response.json()["error"]["type"] == "CheckpointAlreadyResumed"
        assert "resumed by someone else" in response.json()["error"]["message"]
