"""Ctrl-C stops every command with exit code 130, at a prompt or while it works.

Each command runs as `python -m plait` in a child process: on a pseudo-terminal (Ctrl-C is
the terminal's interrupt character) or, for the servers, sent SIGINT. The moment is chosen
by waiting for what the command shows (its prompt) or for a gate its model or tool reached
(`tests/cli/targets.py`), never by waiting a time. The deadlines are generous: that the stop
takes under a second is measured by `bench/ctrl_c.py`, not asserted here.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.cli.stop import STOP_ENV
from tests.cli.support import ROOT, WAIT, ServeProcess, plait_env, sqlite_url, sse_items, target
from tests.cli.targets import GATES

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.timeout(180)

#: The longest a test waits for what a command shows, or for it to end.
DEADLINE = 60
#: A stop time long enough for a run to be saved on a busy machine.
PATIENT = {STOP_ENV: "60"}


class Gates:
    """The gates of one test: `reached(name)` waits until a call waits at gate `name`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir()

    def reached(self, name: str) -> None:
        mark = self.folder / f"{name}.reached"
        deadline = time.monotonic() + DEADLINE
        while not mark.exists():
            assert time.monotonic() < deadline, f"nothing reached the gate {name!r}"
            time.sleep(0.02)


@pytest.fixture
def gates(tmp_path: Path) -> Gates:
    return Gates(tmp_path / "gates")


@pytest.fixture
def spawn(tmp_path: Path, gates: Gates) -> Iterator[Any]:
    """Return a function that starts `python ARGS` on a terminal (killed after the test)."""
    children: list[Any] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Any:
        extra = {"TERM": "dumb", GATES: str(gates.folder), **(env or {})}
        child = pexpect.spawn(
            sys.executable,
            list(args),
            cwd=str(ROOT),
            env=plait_env(**extra),
            encoding="utf-8",
            timeout=DEADLINE,
            dimensions=(40, 200),
        )
        children.append(child)
        return child

    yield start
    for child in children:
        if child.isalive():
            child.terminate(force=True)
        child.close(force=True)


def _plait(spawn: Any, store: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return spawn("-m", "plait", *args, "--store", sqlite_url(store), env=env)


def _stopped(child: Any) -> str:
    """Wait for the end of a command stopped with Ctrl-C; return all it printed after."""
    child.expect(pexpect.EOF)
    child.close()
    assert (child.exitstatus, child.signalstatus) == (130, None), child.before
    output = str(child.before)
    assert "plait: stopped" in output
    assert "Traceback" not in output
    return output


def _resume_line(output: str, helper: str) -> str:
    found = re.search(rf"plait resume (\w+) {re.escape(helper)}", output)
    assert found, output
    return found.group(1)


def test_ctrl_c_at_the_chat_prompt_stops_at_once(spawn: Any, tmp_path: Path) -> None:
    child = _plait(spawn, tmp_path / "plait.db", "run", target("helper"), "--session", "s")
    child.expect_exact("you> ")
    child.sendintr()
    output = _stopped(child)
    assert "plait resume" not in output  # nothing was running, nothing was saved


def test_ctrl_c_at_the_chat_prompt_after_a_turn_stops_too(spawn: Any, tmp_path: Path) -> None:
    child = _plait(spawn, tmp_path / "plait.db", "run", target("helper"), "--session", "s")
    child.expect_exact("you> ")
    child.sendline("hello")
    child.expect_exact("echo: hello")
    child.expect_exact("you> ")
    child.sendintr()
    _stopped(child)


def test_ctrl_c_at_the_answer_prompt_leaves_the_run_paused_and_says_how_to_resume(
    spawn: Any, tmp_path: Path
) -> None:
    store = tmp_path / "plait.db"
    child = _plait(spawn, store, "run", target("helper"), "approve the refund")
    child.expect_exact("answer (JSON, or plain text)> ")
    child.sendintr()
    output = _stopped(child)
    assert "paused: checkpoint" in output
    checkpoint = _resume_line(output, target("helper"))
    resumed = CliRunner().invoke(
        app, ["resume", checkpoint, target("helper"), "--store", sqlite_url(store), "--value", "ok"]
    )
    assert resumed.exit_code == 0, resumed.stderr
    assert "done: the refund=ok" in resumed.stdout


def test_ctrl_c_at_the_answer_prompt_of_resume_stops_it(spawn: Any, tmp_path: Path) -> None:
    store = tmp_path / "plait.db"
    paused = CliRunner().invoke(
        app, ["run", target("helper"), "approve it", "--store", sqlite_url(store)]
    )
    assert paused.exit_code == 3
    checkpoint = _resume_line(paused.stderr, target("helper"))
    child = _plait(spawn, store, "resume", checkpoint, target("helper"))
    child.expect_exact("answer (JSON, or plain text)> ")
    child.sendintr()
    output = _stopped(child)
    again = _resume_line(output, target("helper"))  # it paused again, under a new id
    resumed = CliRunner().invoke(
        app, ["resume", again, target("helper"), "--store", sqlite_url(store), "--value", "7"]
    )
    assert resumed.exit_code == 0, resumed.stderr
    assert "done: it=7" in resumed.stdout


def test_ctrl_c_during_a_tool_call_saves_the_run_and_prints_the_resume_line(
    spawn: Any, tmp_path: Path
) -> None:
    store = tmp_path / "plait.db"
    child = _plait(spawn, store, "run", target("helper"), "slow", env=PATIENT)
    child.expect_exact("→ slow")
    child.sendintr()
    output = _stopped(child)
    assert "stopped: checkpoint" in output
    checkpoint = _resume_line(output, target("helper"))
    resumed = CliRunner().invoke(
        app, ["resume", checkpoint, target("helper"), "--store", sqlite_url(store)]
    )
    assert resumed.exit_code == 0, resumed.stderr
    assert "done: ran again after a stop" in resumed.stdout


@pytest.mark.parametrize("traced", [False, True], ids=["plain", "traced"])
def test_ctrl_c_during_a_streamed_reply_saves_the_run_and_prints_the_resume_line(
    spawn: Any, tmp_path: Path, traced: bool
) -> None:
    store = tmp_path / "plait.db"
    helper = target("traced_streamer" if traced else "streamer")
    request = f"stream {uuid.uuid4().hex}"  # its own stall (the model notes it by request)
    child = _plait(spawn, store, "run", helper, request, env=PATIENT)
    child.expect_exact("the first words")  # streamed; the model now waits for more
    child.sendintr()
    output = _stopped(child)  # no traceback, with tracing on too
    assert "stopped: checkpoint" in output
    checkpoint = _resume_line(output, helper)
    resumed = CliRunner().invoke(
        app, ["resume", checkpoint, target("streamer"), "--store", sqlite_url(store)]
    )
    assert resumed.exit_code == 0, resumed.stderr
    assert f"resumed: {request} is done" in resumed.stdout


def test_ctrl_c_during_a_tool_call_with_json_keeps_stdout_json(spawn: Any, tmp_path: Path) -> None:
    child = _plait(spawn, tmp_path / "plait.db", "run", target("helper"), "slow", "--json")
    child.expect_exact('"name":"slow"')
    child.sendintr()
    _stopped(child)


def test_ctrl_c_during_a_model_call_that_does_not_return_stops_in_time(
    spawn: Any, gates: Gates, tmp_path: Path
) -> None:
    child = _plait(spawn, tmp_path / "plait.db", "run", target("gated"), "think hard")
    gates.reached("model")
    child.sendintr()
    _stopped(child)


def test_ctrl_c_with_tracing_during_a_model_call_that_does_not_return_stops_cleanly(
    spawn: Any, gates: Gates, tmp_path: Path
) -> None:
    child = _plait(spawn, tmp_path / "plait.db", "run", target("traced_gated"), "think hard")
    gates.reached("model")
    child.sendintr()
    _stopped(child)  # the run's spans are ended in the command's task: no traceback


def test_ctrl_c_during_a_sync_tool_whose_thread_never_ends_stops_in_time(
    spawn: Any, gates: Gates, tmp_path: Path
) -> None:
    child = _plait(spawn, tmp_path / "plait.db", "run", target("gated"), "stuck")
    gates.reached("tool")
    child.sendintr()
    _stopped(child)


def test_ctrl_c_while_the_target_loads_stops(spawn: Any, gates: Gates, tmp_path: Path) -> None:
    child = _plait(spawn, tmp_path / "plait.db", "run", target("slow_to_load"), "hi")
    gates.reached("load")
    child.sendintr()
    _stopped(child)


def test_a_second_ctrl_c_stops_at_once(spawn: Any, gates: Gates, tmp_path: Path) -> None:
    child = _plait(spawn, tmp_path / "plait.db", "run", target("gated"), "stuck", env=PATIENT)
    gates.reached("tool")
    child.sendintr()
    child.sendintr()
    _stopped(child)


def test_ctrl_c_during_the_demo_stops_it(spawn: Any, gates: Gates) -> None:
    code = (
        "import plait.cli.demo as demo, tests.cli.targets as targets; "
        "demo.scripted_models = targets.gated_demo_models; "
        "from plait.cli import main; main()"
    )
    child = spawn("-c", code, "demo", "--scripted")
    gates.reached("model")
    child.sendintr()
    _stopped(child)


def test_an_unusable_stop_time_is_a_usage_error(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "plait", "run", target("helper"), "hi"],
        cwd=ROOT,
        env=plait_env(**{STOP_ENV: "soon"}),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert out.returncode == 2
    assert out.stderr == (f"plait: error: {STOP_ENV}='soon' must be a positive number of seconds\n")


# -- servers: SIGINT is what Ctrl-C sends ------------------------------------------------


def test_ctrl_c_while_serve_loads_its_targets_stops_it(gates: Gates, tmp_path: Path) -> None:
    args = ["serve", target("slow_to_load"), "--store", sqlite_url(tmp_path / "plait.db")]
    process = subprocess.Popen(
        [sys.executable, "-m", "plait", *args, "--port", "0"],
        cwd=ROOT,
        env=plait_env(**{GATES: str(gates.folder)}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        gates.reached("load")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(WAIT)
    assert process.returncode == 130, stderr
    assert stderr.endswith("plait: stopped\n") and "Traceback" not in stderr


def test_ctrl_c_stops_an_idle_server_with_exit_code_130(tmp_path: Path) -> None:
    store = ("--store", sqlite_url(tmp_path / "plait.db"))
    with ServeProcess([target("helper"), *store], tmp_path / "logs") as server:
        assert server.interrupt() == 130, server.stderr
        assert server.stderr.endswith("plait: stopped\n"), server.stderr


def test_ctrl_c_stops_a_serving_server_and_its_running_run_stays_resumable(
    tmp_path: Path,
) -> None:
    store = ("--store", sqlite_url(tmp_path / "plait.db"))
    first = ServeProcess([target("helper"), *store], tmp_path / "logs", env=PATIENT)
    with first, httpx.Client(base_url=first.url, timeout=DEADLINE) as http:
        with http.stream("POST", "/v1/agents/helper/runs", json={"input": "slow"}) as response:
            checkpoint = response.headers["x-plait-checkpoint-id"]
            lines = response.iter_lines()
            _, event = next(sse_items(lines))  # the model's call of the slow tool
            assert event["output"]["message"]["message"]["tool_calls"][0]["name"] == "slow"
            code: list[int] = []
            stopper = threading.Thread(target=lambda: code.append(first.interrupt()))
            stopper.start()
            list(lines)  # the stream ends when the server stops
            stopper.join(DEADLINE)
        assert code == [130], first.stderr
    second = ServeProcess([target("helper"), *store], tmp_path / "logs")
    with second, httpx.Client(base_url=second.url, timeout=DEADLINE) as http:
        summary = http.get(f"/v1/runs/{checkpoint}").json()
        assert summary["status"] == "cancelled", json.dumps(summary)


def test_ctrl_c_stops_the_mcp_server(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    args = ["mcp", target("helper"), "--store", sqlite_url(tmp_path / "plait.db")]
    process = subprocess.Popen(
        [sys.executable, "-m", "plait", *args],
        cwd=ROOT,
        env=plait_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2024-11-05",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        }
        process.stdin.write(json.dumps(hello) + "\n")
        process.stdin.flush()
        answer = json.loads(process.stdout.readline())  # the server is up and reading
        assert answer["id"] == 1
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(WAIT)
    assert process.returncode == 130, stderr
    assert "plait: stopped" in stderr
