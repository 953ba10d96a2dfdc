"""`GET /v1/runs`: the caller's runs from the store, newest first, filtered and paged."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from plait import ChatModelAgent, Message, interrupt, tool
from plait.server import create_app, run_index
from plait.stores import SqliteStore
from plait.testing import FunctionModel, call, calls, reply
from tests.server.support import (
    WAIT,
    BackgroundStream,
    Controls,
    ServerThread,
    client,
    make_agents,
    stream_run,
    wait_for_status,
)

pytestmark = pytest.mark.timeout(120)

KEYS = {"key-alice": "alice", "key-bob": "bob"}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "plait.db"


@pytest.fixture
def url(db: Path) -> Iterator[str]:
    """A fresh server (its own store) for each test."""
    app = create_app(make_agents(Controls()), store=SqliteStore(db), api_keys=KEYS)
    with ServerThread(app) as running:
        yield running.url


@pytest.fixture
def alice(url: str) -> Iterator[httpx.Client]:
    with client(url, "key-alice") as http:
        yield http


def _run(http: httpx.Client, text: str, agent: str = "helper", **body: Any) -> httpx.Response:
    response = http.post(f"/v1/agents/{agent}/runs", json={"input": text, "stream": False, **body})
    assert response.status_code == 200, response.text
    return response


def _listed(http: httpx.Client, **params: Any) -> dict[str, Any]:
    response = http.get("/v1/runs", params=params)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def test_runs_are_listed_newest_first_with_their_latest_summary(alice: httpx.Client) -> None:
    done = _run(alice, "hello", session_id="s1")
    paused = _run(alice, "approve the deploy")
    failed = _run(alice, "fail now")
    page = _listed(alice)
    assert page["next_cursor"] is None
    runs = page["runs"]
    ids = [run["run_id"] for run in runs]
    assert ids == [r.headers["x-plait-checkpoint-id"] for r in (failed, paused, done)]
    assert [run["status"] for run in runs] == ["failed", "paused", "completed"]
    assert {"run_id", "agent", "session_id", "updated_at", "status", "checkpoint_id"} <= set(
        runs[0]
    )
    assert runs[2]["session_id"] == "s1" and runs[2]["final_output"] == "echo: hello"
    assert runs[1]["checkpoint_id"] == ids[1]
    assert runs[1]["interrupts"][0]["info"] == {"question": "approve the deploy?"}
    assert "the model is down" in runs[0]["error"]["message"]
    assert all(run["agent"] == "helper" for run in runs)


def test_a_resumed_run_is_listed_once_as_its_latest_summary(alice: httpx.Client) -> None:
    first = _run(alice, "two things").json()
    run_id = first["checkpoint_id"]
    pending = first["interrupts"]
    answer = {"targets": {pending[0]["id"]: "yes"}, "stream": False}
    again = alice.post(f"/v1/runs/{run_id}/resume", json=answer).json()
    assert again["status"] == "paused" and again["checkpoint_id"] != run_id
    runs = _listed(alice)["runs"]
    assert [(r["run_id"], r["status"], r["checkpoint_id"]) for r in runs] == [
        (run_id, "paused", again["checkpoint_id"])
    ]
    last = {"value": "ok", "stream": False}
    end = alice.post(f"/v1/runs/{again['checkpoint_id']}/resume", json=last).json()
    assert end["status"] == "completed"
    runs = _listed(alice)["runs"]
    assert [(r["run_id"], r["status"]) for r in runs] == [(run_id, "completed")]
    assert alice.get(f"/v1/runs/{run_id}").json()["status"] == "completed"
    assert _listed(alice, status="paused") == {"runs": [], "next_cursor": None}


def test_filters_pick_runs_by_status_and_agent(alice: httpx.Client) -> None:
    _run(alice, "hello")
    paused = _run(alice, "approve it").headers["x-plait-checkpoint-id"]
    _run(alice, "hi", agent="desk")
    assert [r["run_id"] for r in _listed(alice, status="paused")["runs"]] == [paused]
    assert [r["agent"] for r in _listed(alice, agent="desk")["runs"]] == ["desk"]
    assert len(_listed(alice, agent="helper", status="completed")["runs"]) == 1
    nothing = {"runs": [], "next_cursor": None}
    assert _listed(alice, agent="nobody") == nothing
    assert _listed(alice, agent="desk", status="paused") == nothing
    assert _listed(alice, status="cancelled") == nothing


def test_pages_follow_the_cursor_while_runs_change(alice: httpx.Client) -> None:
    started = [_run(alice, f"approve job{i}").headers["x-plait-checkpoint-id"] for i in range(5)]
    newest_first = started[::-1]
    first = _listed(alice, limit=2)
    assert [r["run_id"] for r in first["runs"]] == newest_first[:2]
    _run(alice, "a newer run")  # starts before the next page is read
    answer = {"value": "yes", "stream": False}
    assert alice.post(f"/v1/runs/{started[1]}/resume", json=answer).json()["status"] == (
        "completed"
    )
    second = _listed(alice, limit=2, cursor=first["next_cursor"])
    assert [r["run_id"] for r in second["runs"]] == newest_first[2:4]
    assert second["runs"][1]["status"] == "completed"  # changed since the first page
    third = _listed(alice, limit=2, cursor=second["next_cursor"])
    assert [r["run_id"] for r in third["runs"]] == newest_first[4:]
    assert third["next_cursor"] is None


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"status": "sleeping"}, "status"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"cursor": "WzEsMl0x"}, "cursor"),
    ],
)
def test_bad_parameters_are_refused_with_422(
    alice: httpx.Client, params: dict[str, Any], says: str
) -> None:
    response = alice.get("/v1/runs", params=params)
    assert response.status_code == 422
    assert says in response.json()["error"]["message"]


def test_each_user_lists_only_their_own_runs(alice: httpx.Client, url: str) -> None:
    _run(alice, "approve mine")
    with client(url, "key-bob") as bob:
        assert _listed(bob) == {"runs": [], "next_cursor": None}
        _run(bob, "hello")
        assert [r["final_output"] for r in _listed(bob)["runs"]] == ["echo: hello"]
    assert [r["status"] for r in _listed(alice)["runs"]] == ["paused"]
    with client(url) as nobody:
        assert nobody.get("/v1/runs").status_code == 401


def test_workers_sharing_a_store_list_each_others_runs(alice: httpx.Client, db: Path) -> None:
    paused = _run(alice, "approve on one").headers["x-plait-checkpoint-id"]
    other = create_app(make_agents(Controls()), store=SqliteStore(db), api_keys=KEYS)
    with ServerThread(other) as running, client(running.url, "key-alice") as on_other:
        assert [r["run_id"] for r in _listed(on_other, status="paused")["runs"]] == [paused]
        answer = {"value": "yes", "stream": False}
        assert on_other.post(f"/v1/runs/{paused}/resume", json=answer).status_code == 200
        _run(on_other, "hello from two")
    runs = _listed(alice)["runs"]
    assert [r["status"] for r in runs] == ["completed", "completed"]
    assert runs[1]["run_id"] == paused


def test_the_index_keeps_paused_runs_longest(
    alice: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_index, "MAX_LISTED_RUNS", 3)
    paused = _run(alice, "approve old").headers["x-plait-checkpoint-id"]
    done = [_run(alice, f"run {i}").headers["x-plait-checkpoint-id"] for i in range(4)]
    runs = _listed(alice)["runs"]
    assert [r["run_id"] for r in runs] == [done[3], done[2], paused]
    assert alice.get(f"/v1/runs/{done[0]}").json()["status"] == "completed"  # still readable


def test_a_failed_runs_turn_is_kept_in_its_session(alice: httpx.Client) -> None:
    session = f"s-{uuid.uuid4().hex}"
    _run(alice, "hello", session_id=session)
    failed = _run(alice, "fail please", session_id=session).json()
    assert failed["status"] == "failed" and failed["error"]["message"]
    messages = alice.get(f"/v1/sessions/{session}").json()["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "hello"),
        ("assistant", "echo: hello"),
        ("user", "fail please"),
    ]
    again = _run(alice, "retry it", session_id=session).json()
    assert again["final_output"] == "echo: retry it"


def test_sessions_say_their_agent_and_filter_by_it(alice: httpx.Client) -> None:
    _run(alice, "hello", session_id="with-helper")
    _run(alice, "hi", agent="desk", session_id="with-desk")
    listed = {s["session_id"]: s["agent"] for s in alice.get("/v1/sessions").json()}
    assert listed == {"with-helper": "helper", "with-desk": "desk"}
    only = alice.get("/v1/sessions", params={"agent": "desk"}).json()
    assert [s["session_id"] for s in only] == ["with-desk"]
    assert alice.get("/v1/sessions", params={"agent": "nobody"}).json() == []


def test_deltas_send_streamed_text_as_it_comes(alice: httpx.Client) -> None:
    body = {"input": "many words here", "deltas": True}
    response, events = stream_run(alice, "/v1/agents/helper/runs", body)
    assert response.status_code == 200
    names = [name for name, _ in events]
    assert names.count("agent_delta") >= 3
    deltas = [data for name, data in events if name == "agent_delta"]
    assert "".join(d["delta"] for d in deltas) == "echo: many words here"
    assert deltas[0]["agent_name"] == "helper" and deltas[0]["run_path"] == ["helper"]
    assert names.index("agent_delta") < names.index("agent_event")
    assert names[-1] == "run_end" and events[-1][1]["final_output"] == "echo: many words here"
    _, plain = stream_run(alice, "/v1/agents/helper/runs", {"input": "no deltas"})
    assert {name for name, _ in plain} == {"agent_event", "run_end"}


def test_cancel_by_run_id_reaches_the_run_resumed_under_another_checkpoint(
    alice: httpx.Client, db: Path
) -> None:
    controls = Controls()

    @tool
    def ask_then_work(step: str) -> str:
        """Ask a person, then work until released.

        Args:
            step: Which step.
        """
        answer = interrupt({"question": step})
        if answer == "ok":  # the second resume: work until released
            controls.blocked.set()
            controls.release.wait(WAIT)
        return f"{step}={answer}"

    def model(messages: list[Message], tools: Any) -> Message:
        if messages[-1].role == "tool":
            return reply("done")
        return calls(call("ask_then_work", {"step": "a"}), call("ask_then_work", {"step": "b"}))

    worker = ChatModelAgent("worker", FunctionModel(model), tools=[ask_then_work])
    app = create_app({"worker": worker}, store=SqliteStore(db), api_keys=KEYS, cancel_poll=0.05)
    with ServerThread(app) as running, client(running.url, "key-alice") as http:
        first = _run(http, "go", agent="worker").json()
        run_id = first["checkpoint_id"]
        answer = {"targets": {first["interrupts"][0]["id"]: "yes"}, "stream": False}
        again = http.post(f"/v1/runs/{run_id}/resume", json=answer).json()
        assert again["status"] == "paused" and again["checkpoint_id"] != run_id
        resumed = BackgroundStream(
            http, f"/v1/runs/{again['checkpoint_id']}/resume", {"value": "ok"}
        )
        assert controls.blocked.wait(WAIT)
        assert wait_for_status(http, run_id, "running")["status"] == "running"
        try:
            assert http.post(f"/v1/runs/{run_id}/cancel").status_code == 202
            events = resumed.join()
        finally:
            controls.release.set()
        assert events[-1][1]["status"] == "cancelled"
        assert [r["status"] for r in _listed(http)["runs"]] == ["cancelled"]


def test_the_topology_of_a_team_and_of_an_agent(alice: httpx.Client) -> None:
    desk = alice.get("/v1/agents/desk/topology").json()
    assert desk["root"] == "desk"
    kinds = {node["id"]: node["kind"] for node in desk["nodes"]}
    assert kinds == {"desk": "team", "desk/triage": "agent", "desk/billing": "agent"}
    edges = {(e["source"], e["target"], e["kind"]) for e in desk["edges"]}
    assert ("desk", "desk/triage", "member") in edges
    assert ("desk/triage", "desk/billing", "transfer") in edges
    helper = alice.get("/v1/agents/helper/topology").json()
    assert helper["nodes"][0]["tools"] == ["approve", "slow", "block"]
    assert alice.get("/v1/agents/nobody/topology").status_code == 404


def test_the_topology_of_a_coordinator_and_a_graph(alice: httpx.Client) -> None:
    from plait.examples.teams import code_review_coordinator, research_graph
    from plait.server.topology import describe

    team = describe(code_review_coordinator())
    parents = {node.id: node.parent for node in team.nodes}
    assert parents["code_review/review_manager"] == "code_review"
    assert parents["code_review/review_manager/security_reviewer"] == "code_review/review_manager"
    kinds = {(e.source, e.target): e.kind for e in team.edges}
    assert kinds[("code_review/review_manager", "code_review/review_manager/perf_reviewer")] == (
        "agent_tool"
    )
    graph = describe(research_graph())
    names = {node.name: node.kind for node in graph.nodes}
    assert names["__start__"] == "start" and names["__end__"] == "end"
    assert any(e.kind == "graph" and e.source.endswith("__start__") for e in graph.edges)
