"""`create_app`: what it accepts, its defaults (user "local", the SQLite file), the dev-page
seam, and a stopping server leaving its runs resumable."""

from __future__ import annotations

import gc
import importlib.machinery
import sys
import types
from pathlib import Path

import pytest
from fastapi import FastAPI

from plait import ChatModelAgent
from plait.errors import UsageError
from plait.server import create_app
from plait.stores import MemoryStore, SqliteStore
from plait.testing import FunctionModel
from tests.server.support import WAIT, Controls, ServerThread, client, make_agents, parse_sse

pytestmark = pytest.mark.timeout(60)


def _agent(name: str) -> ChatModelAgent:
    return ChatModelAgent(name, FunctionModel(lambda m, t: "hi"), description=f"{name} agent")


@pytest.mark.parametrize(
    ("agents", "kwargs", "says"),
    [
        ([], {}, "at least one agent"),
        ("helper", {}, "takes agents"),
        ([_agent("a"), object()], {}, "is not one"),
        ([_agent("a"), _agent("a")], {}, "two agents are named 'a'"),
        ({"a/b": _agent("a")}, {}, "no '/'"),
        ([_agent("a")], {"api_keys": {"k": "alice/bob"}}, "no '/'"),
        ([_agent("a")], {"api_keys": {"": "alice"}}, "non-empty"),
        ([_agent("a")], {"api_keys": {}}, "pass None"),
        ([_agent("a")], {"max_request_bytes": 0}, "positive"),
        ([_agent("a")], {"store": "sqlite:///x.db"}, "plait Store"),
        ([_agent("a")], {"gc_young": 0}, "gc_young must be a whole number"),
        ([_agent("a")], {"gc_young": True}, "gc_young must be a whole number"),
    ],
)
def test_what_create_app_refuses(agents: object, kwargs: dict[str, object], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        create_app(agents, **kwargs)  # type: ignore[arg-type]


def test_agents_are_named_by_name_or_by_mapping_key() -> None:
    one = _agent("solo")
    assert isinstance(create_app(one, store=MemoryStore()), FastAPI)
    app = create_app({"public": one, "other": _agent("x")}, store=MemoryStore())
    with ServerThread(app) as server, client(server.url) as http:
        assert [a["name"] for a in http.get("/v1/agents").json()] == ["public", "other"]
        body = {"input": "hey", "stream": False}
        assert http.post("/v1/agents/public/runs", json=body).json()["agent"] == "public"
        assert http.post("/v1/agents/solo/runs", json=body).status_code == 404


def test_while_an_app_serves_its_young_garbage_is_collected_less_often() -> None:
    before = gc.get_threshold()
    app = create_app(_agent("a"), store=MemoryStore())
    with ServerThread(app) as server, client(server.url) as http:
        assert http.get("/healthz").status_code == 200
        assert gc.get_threshold() == (50_000, *before[1:])
        with ServerThread(create_app(_agent("b"), store=MemoryStore(), gc_young=1_000)):
            assert gc.get_threshold()[0] == 50_000  # the largest asked for
        assert gc.get_threshold()[0] == 50_000
    assert gc.get_threshold() == before
    with ServerThread(create_app(_agent("c"), store=MemoryStore(), gc_young=None)):
        assert gc.get_threshold() == before


def test_without_keys_everyone_is_local_and_the_store_is_plait_db(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = create_app(make_agents(Controls()))
    with ServerThread(app) as server:
        with client(server.url) as http:
            body = {"input": "hello", "session_id": "chat", "stream": False}
            assert http.post("/v1/agents/helper/runs", json=body).status_code == 200
        with client(server.url, "any-key") as other:
            assert [s["session_id"] for s in other.get("/v1/sessions").json()] == ["chat"]
    assert (tmp_path / "plait.db").exists()


def test_ui_true_mounts_the_dev_page_module(monkeypatch: pytest.MonkeyPatch) -> None:
    mounted: list[FastAPI] = []
    page = types.ModuleType("plait.server.page")
    page.__spec__ = importlib.machinery.ModuleSpec("plait.server.page", None)
    page.mount = mounted.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "plait.server.page", page)
    app = create_app(_agent("a"), store=MemoryStore(), ui=True)
    assert mounted == [app]
    create_app(_agent("a"), store=MemoryStore())
    assert mounted == [app]


def test_a_stopping_server_leaves_its_running_runs_resumable(tmp_path: Path) -> None:
    controls = Controls()
    path = tmp_path / "plait.db"
    app = create_app(make_agents(controls), store=SqliteStore(path))
    with ServerThread(app) as first, client(first.url) as http:
        with http.stream("POST", "/v1/agents/helper/runs", json={"input": "slow"}) as r:
            checkpoint_id = r.headers["x-plait-checkpoint-id"]
            next(parse_sse(r.iter_lines()))
        assert controls.slow_started.wait(WAIT)
    # the first server has stopped: its run was asked to stop at its next safe point
    app = create_app(make_agents(controls), store=SqliteStore(path))
    with ServerThread(app) as second, client(second.url) as http:
        summary = http.get(f"/v1/runs/{checkpoint_id}").json()
        assert summary["status"] == "cancelled"
        resumed = http.post(f"/v1/runs/{summary['checkpoint_id']}/resume", json={"stream": False})
        assert resumed.json()["final_output"] == "done: slow work done"


def test_apps_made_and_first_served_at_once_in_threads_all_answer() -> None:
    """Servers in threads of one process: their first requests come at once, and FastAPI's
    table of routes (with its process-wide warning filters) is built with the app."""
    import threading

    from fastapi.testclient import TestClient

    count = 6
    patience = 120.0  # six apps built at once on two busy cores take a while: a bound only
    barrier = threading.Barrier(count)
    answers: list[int] = []
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            barrier.wait(patience)
            agent = ChatModelAgent("Echo", FunctionModel(lambda m, t: "hi"))
            app = create_app(agent, store=MemoryStore())
            barrier.wait(patience)
            with TestClient(app, base_url="http://127.0.0.1") as http:
                answers.append(http.get("/v1/runs", params={"agent": "Echo"}).status_code)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=serve) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(patience)
    assert errors == [] and answers == [200] * count
