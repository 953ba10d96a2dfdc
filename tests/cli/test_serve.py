"""`plait serve`: a real server process, its API keys file, its start and its stop."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from plait.cli import app
from tests.cli.support import ServeProcess, sqlite_url, sse_items, target

pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")

pytestmark = pytest.mark.timeout(120)


def _serve(tmp_path: Path, *args: str) -> ServeProcess:
    store = ("--store", sqlite_url(tmp_path / "plait.db"))
    return ServeProcess([*args, *(() if "--store" in args else store)], tmp_path / "logs")


def test_serve_answers_health_checks_and_streams_a_run(tmp_path: Path) -> None:
    with (
        _serve(tmp_path, target("helper"), target("desk")) as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        assert http.get("/healthz").json() == {"status": "ok"}
        names = [a["name"] for a in http.get("/v1/agents").json()]
        assert names == ["helper", "desk"]
        body = {"input": "hello there", "session_id": "s1"}
        with http.stream("POST", "/v1/agents/helper/runs", json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            items = list(sse_items(response.iter_lines()))
        assert [name for name, _ in items] == ["agent_event", "run_end"]
        event, summary = items[0][1], items[1][1]
        assert event["output"]["message"]["message"]["content"] == "echo: hello there"
        assert summary["status"] == "completed"
        assert summary["final_output"] == "echo: hello there"
        assert summary["session_id"] == "s1"
        assert "plait: serving helper, desk at http://127.0.0.1:" in server.stderr


def test_a_keyless_server_answers_its_own_names_and_allowed_hosts_only(tmp_path: Path) -> None:
    with (
        _serve(tmp_path, target("helper"), "--allowed-host", "agents.example") as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        assert http.get("/v1/agents").status_code == 200
        assert http.get("/v1/agents", headers={"host": "agents.example"}).status_code == 200
        rebound = http.get("/v1/sessions", headers={"host": "evil.example"})
        assert rebound.status_code == 403
        assert "evil.example" in rebound.json()["error"]["message"]


def test_with_an_api_keys_file_every_route_but_healthz_needs_a_key(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("# who may call\nkey-ana ana\n\n  key-bo   bo   # a comment\n")
    with (
        _serve(tmp_path, target("helper"), "--api-keys", str(keys)) as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        assert http.get("/healthz").status_code == 200
        assert http.get("/v1/agents").status_code == 401
        wrong = http.get("/v1/agents", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        for key in ("key-ana", "key-bo"):
            found = http.get("/v1/agents", headers={"authorization": f"Bearer {key}"})
            assert found.status_code == 200
        assert "API keys required" in server.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key-ana ana\nkey-bo\n", "line 2: expected 'KEY USER_ID', got 1 fields"),
        ("# keys\nk1 ana extra\n", "line 2: expected 'KEY USER_ID', got 3 fields"),
        ("k1 ana\nk1 bo\n", "line 2: this key is already given to user 'ana'"),
        ("k1 a/b\n", "line 1: user id 'a/b' must be 1 to 64 letters"),
        ("# nothing here\n\n", "holds no keys; write one 'KEY USER_ID' per line"),
    ],
)
def test_a_malformed_api_keys_file_is_a_usage_error_naming_the_line(
    tmp_path: Path, text: str, expected: str
) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text(text)
    store = sqlite_url(tmp_path / "plait.db")
    args = ["serve", target("helper"), "--api-keys", str(keys), "--store", store]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"plait: error: --api-keys {keys}"), result.stderr
    assert expected in result.stderr and result.stderr.count("\n") == 1
    assert "k1" not in result.stderr and "key-ana" not in result.stderr  # keys stay secret


def test_a_missing_api_keys_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    result = CliRunner().invoke(app, ["serve", target("helper"), "--api-keys", str(missing)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"plait: error: --api-keys {missing}: cannot read it (No such file or directory)\n"
    )


def test_a_port_in_use_is_a_usage_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        store = sqlite_url(tmp_path / "plait.db")
        args = ["serve", target("helper"), "--port", str(port), "--store", store]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"plait: error: cannot listen on 127.0.0.1:{port}: ")
    assert result.stderr.endswith("; pass another --port (or --host)\n")


def test_two_targets_of_one_name_are_a_usage_error(tmp_path: Path) -> None:
    args = ["serve", target("helper"), target("make_helper")]
    result = CliRunner().invoke(app, [*args, "--store", sqlite_url(tmp_path / "plait.db")])
    assert result.exit_code == 2
    assert "are both an agent named 'helper'" in result.stderr


def test_a_run_lease_that_is_not_positive_is_a_usage_error(tmp_path: Path) -> None:
    args = ["serve", target("helper"), "--run-lease", "0"]
    result = CliRunner().invoke(app, [*args, "--store", sqlite_url(tmp_path / "plait.db")])
    assert result.exit_code == 2
    assert result.stderr == "plait: error: --run-lease 0 must be a positive number of seconds\n"


def test_sigterm_stops_the_server_and_leaves_a_running_run_resumable(tmp_path: Path) -> None:
    """A stopping server asks its runs to stop at a safe point: the run is cancelled with a
    checkpoint, its summary is in the store, and another server resumes it."""
    with (
        _serve(tmp_path, target("helper")) as first,
        httpx.Client(base_url=first.url, timeout=30) as http,
    ):
        with http.stream("POST", "/v1/agents/helper/runs", json={"input": "slow"}) as response:
            checkpoint = response.headers["x-plait-checkpoint-id"]
            lines = response.iter_lines()
            _, event = next(sse_items(lines))  # the model's call of the slow tool
            assert event["output"]["message"]["message"]["tool_calls"][0]["name"] == "slow"
            code: list[int] = []
            stopper = threading.Thread(target=lambda: code.append(first.terminate()))
            stopper.start()
            list(lines)  # the stream ends when the server stops
            stopper.join(60)
        assert code == [0], first.stderr
        assert "Finished server process" in first.stderr
    with (
        _serve(tmp_path, target("helper")) as second,
        httpx.Client(base_url=second.url, timeout=30) as http,
    ):
        summary = http.get(f"/v1/runs/{checkpoint}").json()
        assert summary["status"] == "cancelled", summary
        resumed = http.post(
            f"/v1/runs/{summary['checkpoint_id']}/resume", json={"stream": False}
        ).json()
        assert resumed["status"] == "completed", json.dumps(resumed)
        assert resumed["final_output"] == "done: ran again after a stop"


def test_web_serves_without_a_display_and_says_where_the_page_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    store = ("--store", sqlite_url(tmp_path / "plait.db"))
    web = ServeProcess([target("helper"), *store], tmp_path / "logs", command="web")
    with web, httpx.Client(base_url=web.url, timeout=30) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        deadline = time.monotonic() + 10
        while "plait: open" not in web.stderr and "no dev page" not in web.stderr:
            assert time.monotonic() < deadline, web.stderr
            time.sleep(0.05)
        if "no dev page" not in web.stderr:
            assert f"plait: open {web.url}/ in a browser" in web.stderr
            assert http.get("/").status_code == 200
