"""`plait dev`: a real watcher process that reloads the app when a source file changes, keeps
the store (a paused run resumes on the new code), survives a broken edit and stops its app."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from plait.cli import app
from tests.cli.support import WAIT, ServeProcess, plait_env

pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")
pytest.importorskip("watchfiles")

pytestmark = pytest.mark.timeout(180)

AGENT = '''
from plait import ChatModelAgent, Message, interrupt, tool
from plait.testing import ScriptedModel, call

VERSION = "v1"


@tool
def ship(order: str) -> str:
    """Ship an order once a person approves.

    Args:
        order: The order id.
    """
    decision = interrupt({"question": f"Ship {order}?"})
    return f"{VERSION}: shipped {order} ({decision})"


def _answer(messages, tools):
    return Message.assistant(next(m.content for m in reversed(messages) if m.role == "tool"))


def build():
    model = ScriptedModel([lambda m, t: call("ship", {"order": "A-1"}), _answer], per_run=True)
    return ChatModelAgent("shipper", model, description=f"ships ({VERSION})", tools=[ship])
'''


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent.py").write_text(AGENT)
    return project


def _dev(tmp_path: Path, project: Path) -> ServeProcess:
    return ServeProcess(["agent.py:build"], tmp_path / "logs", command="dev", cwd=project)


def _edit(project: Path, old: str, new: str) -> None:
    path = project / "agent.py"
    path.write_text(path.read_text().replace(old, new))


def _until(check: Callable[[], Any], what: str, dev: ServeProcess) -> Any:
    """Poll `check` until it returns something true (the process must stay alive)."""
    deadline = time.monotonic() + WAIT * 2
    while time.monotonic() < deadline:
        assert dev.process is not None and dev.process.poll() is None, dev.stderr
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen: {dev.stderr}")


def _description(http: httpx.Client) -> str:
    try:
        (agent,) = http.get("/v1/agents", timeout=5).json()
    except httpx.HTTPError:  # the app is between two processes: ask again
        return ""
    return str(agent["description"])


def _pause(http: httpx.Client) -> str:
    body = {"input": "ship A-1", "stream": False}
    paused = http.post("/v1/agents/shipper/runs", json=body).json()
    assert paused["status"] == "paused", paused
    assert paused["interrupts"][0]["info"] == {"question": "Ship A-1?"}
    return str(paused["checkpoint_id"])


def _resume(http: httpx.Client, checkpoint_id: str) -> dict[str, Any]:
    body = {"value": "approved", "stream": False}
    resumed: dict[str, Any] = http.post(f"/v1/runs/{checkpoint_id}/resume", json=body).json()
    return resumed


def test_an_edit_reloads_the_app_and_a_paused_run_resumes_on_the_new_code(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path)
    with _dev(tmp_path, project) as dev, httpx.Client(base_url=dev.url, timeout=30) as http:
        assert http.get("/").status_code == 200  # the dev page
        assert _description(http) == "ships (v1)"
        checkpoint_id = _pause(http)
        _edit(project, 'VERSION = "v1"', 'VERSION = "v2"')
        _until(lambda: _description(http) == "ships (v2)", "the reload", dev)
        resumed = _resume(http, checkpoint_id)
        assert resumed["status"] == "completed", resumed
        assert resumed["final_output"] == "v2: shipped A-1 (approved)"
        # the store was kept: the run is listed on the new app, completed
        assert http.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "completed"
        assert "plait: dev: agent.py changed; reloading" in dev.stderr
        # the new app's start line is printed just after it is up: wait for it
        _until(lambda: len(re.findall(r"plait: serving shipper at ", dev.stderr)) == 2,
               "the start line of the new app", dev)  # fmt: skip
        assert dev.terminate() == 0


def test_a_broken_edit_is_reported_and_the_next_edit_is_served(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with _dev(tmp_path, project) as dev, httpx.Client(base_url=dev.url, timeout=30) as http:
        checkpoint_id = _pause(http)
        _edit(project, "def build():", "def build(:")
        _until(lambda: "the app stopped (exit 2)" in dev.stderr, "the report", dev)
        assert "SyntaxError" in dev.stderr and "agent.py" in dev.stderr
        _edit(project, "def build(:", "def build():")
        _edit(project, 'VERSION = "v1"', 'VERSION = "v3"')
        _until(lambda: _description(http) == "ships (v3)", "the reload after the fix", dev)
        assert _resume(http, checkpoint_id)["final_output"] == "v3: shipped A-1 (approved)"


def _refused(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return False
    except OSError:
        return True


def _until_refused(url: str) -> None:
    deadline = time.monotonic() + WAIT
    while not _refused(url):
        assert time.monotonic() < deadline, f"{url} still answers"
        time.sleep(0.1)


def test_the_app_stops_with_the_watcher_even_when_it_is_killed(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with _dev(tmp_path, project) as dev:
        assert dev.process is not None
        assert httpx.get(f"{dev.url}/healthz", timeout=30).status_code == 200
        dev.process.send_signal(signal.SIGKILL)
        dev.process.wait(WAIT)
        _until_refused(dev.url)  # the app's process saw the watcher gone and stopped
        assert "Shutting down" in dev.stderr


def test_sigterm_stops_the_watcher_and_its_app(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with _dev(tmp_path, project) as dev:
        assert httpx.get(f"{dev.url}/healthz", timeout=30).status_code == 200
        assert dev.terminate() == 0
        assert _refused(dev.url)


def test_a_target_that_cannot_load_at_the_start_ends_dev_with_exit_2(tmp_path: Path) -> None:
    project = _project(tmp_path)
    command = [sys.executable, "-m", "plait", "dev", "agent.py:nothing", "--port", "0"]
    done = subprocess.run(
        command, cwd=project, env=plait_env(), capture_output=True, text=True, timeout=WAIT * 2
    )
    assert done.returncode == 2, done.stderr
    assert "plait: error: TARGET 'agent.py:nothing'" in done.stderr
    assert "Traceback" not in done.stderr


def test_dev_without_watchfiles_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "watchfiles", None)
    result = CliRunner().invoke(app, ["dev", "agent.py:build", "--store", "memory://"])
    assert result.exit_code == 2
    assert (
        result.stderr == 'plait: error: plait dev needs watchfiles: pip install "plait[server]"\n'
    )
