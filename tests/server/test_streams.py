"""Event streams under load and at their edges: pings, a stopping server, many turns at once."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import plait
from plait.server import create_app
from plait.stores import MemoryStore
from tests.server.support import WAIT, Controls, ServerThread, make_agents, parse_sse

pytestmark = pytest.mark.timeout(90)


def test_a_quiet_stream_gets_ping_comments(
    alice: httpx.Client, controls: Controls, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("plait.server.sse.PING_INTERVAL", 0.05)

    def release_later() -> None:  # pings go out while the tool blocks
        controls.blocked.wait(WAIT)
        time.sleep(0.5)
        controls.release.set()

    releaser = threading.Thread(target=release_later)
    releaser.start()
    with alice.stream("POST", "/v1/agents/helper/runs", json={"input": "block"}) as response:
        lines = list(response.iter_lines())
    releaser.join()
    assert ": ping" in lines
    events = list(parse_sse(iter(lines)))
    assert events[-1][0] == "run_end" and events[-1][1]["status"] == "completed"
    assert lines[-1] == ""  # every event ends with a blank line, pings included


class _CountingStore(MemoryStore):
    """A memory store counting the index's writes. Its first index write waits until every
    turn of the test has written its session (or WAIT passes), so all their changes to the
    index arrive while a write is under way, however the machine schedules the turns."""

    def __init__(self, turns: int) -> None:
        super().__init__()
        self.index_writes = 0
        self.turns = turns
        self.sessions_written = 0

    async def put_session(
        self,
        session_id: str,
        data: bytes,
        *,
        ttl: float | None = None,
        expected_version: int | None = None,
    ) -> int:
        if session_id.endswith("/i"):
            self.index_writes += 1
            first, deadline = self.index_writes == 1, time.monotonic() + WAIT
            while first and self.sessions_written < self.turns:
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.01)
        elif "/s/" in session_id:  # a session (the user's `s/<id>` record)
            self.sessions_written += 1
        return await super().put_session(
            session_id, data, ttl=ttl, expected_version=expected_version
        )


def test_many_turns_at_once_share_the_writes_of_the_session_index() -> None:
    store = _CountingStore(turns=40)
    with ServerThread(create_app(make_agents(Controls()), store=store)) as server:

        async def turns() -> list[Any]:
            async with httpx.AsyncClient(base_url=server.url, timeout=WAIT * 2) as http:
                bodies = [
                    {"input": "hi", "session_id": f"s{i}", "stream": False} for i in range(40)
                ]
                answers = await asyncio.gather(
                    *(http.post("/v1/agents/helper/runs", json=body) for body in bodies)
                )
                listed = (await http.get("/v1/sessions")).json()
            return [*[a.json()["status"] for a in answers], listed]

        *statuses, listed = asyncio.run(turns())
    assert statuses == ["completed"] * 40
    assert sorted(s["session_id"] for s in listed) == sorted(f"s{i}" for i in range(40))
    assert store.index_writes <= 3, store.index_writes  # one a turn would be 40, and retries


def test_two_servers_writing_one_users_sessions_list_all_of_them() -> None:
    store = MemoryStore()
    with (
        ServerThread(create_app(make_agents(Controls()), store=store)) as one,
        ServerThread(create_app(make_agents(Controls()), store=store)) as other,
        httpx.Client(base_url=one.url, timeout=WAIT * 2) as on_one,
        httpx.Client(base_url=other.url, timeout=WAIT * 2) as on_other,
    ):
        # each server starts its next index write from the index it wrote last, which
        # the other server has changed since
        for i, http in enumerate([on_one, on_other, on_one, on_other, on_one]):
            body = {"input": "hi", "session_id": f"s{i}", "stream": False}
            assert http.post("/v1/agents/helper/runs", json=body).json()["status"] == "completed"
        on_other.delete("/v1/sessions/s0")
        body = {"input": "hi", "session_id": "s5", "stream": False}
        assert on_one.post("/v1/agents/helper/runs", json=body).status_code == 200
        for http in (on_one, on_other):
            listed = [s["session_id"] for s in http.get("/v1/sessions").json()]
            assert listed == ["s5", "s4", "s3", "s2", "s1"]


APP = """
import asyncio
import os

from plait import ChatModelAgent, tool
from plait.server import create_app
from plait.stores import from_url
from plait.testing import FunctionModel, call, reply


@tool
async def work() -> str:
    \"\"\"Work for 30 s, until a stop cancels the call (at once on a restarted server).\"\"\"
    if os.environ.get("RESTARTED"):
        return "done"
    await asyncio.sleep(30)
    return "done after 30 s"


def answer(messages, tools):
    if messages[-1].role == "tool":
        return reply("finished after: " + messages[-1].content)
    return call("work")


def build():
    agent = ChatModelAgent("worker", FunctionModel(answer), description="Works.", tools=[work])
    return create_app([agent], store=from_url(os.environ["STORE_URL"]))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _serve(app_dir: Path, store_url: str, **extra: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start `uvicorn` on the test app in a process of its own; return it and its URL."""
    port = _free_port()
    src = Path(plait.__file__).resolve().parents[1]  # the plait this test runs on
    env = {**os.environ, "STORE_URL": store_url, "PYTHONPATH": str(src), **extra}
    argv = [sys.executable, "-m", "uvicorn", "--factory", "--app-dir", str(app_dir)]
    argv += ["app:build", "--port", str(port), "--log-level", "warning"]
    log = app_dir / f"server-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + WAIT * 3
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.05)
    process.kill()
    process.wait()
    raise RuntimeError(f"the server did not start: {log.read_text()[-2000:]}")


def test_a_stopping_server_ends_its_streams_with_runs_a_restart_resumes(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    store_url = f"sqlite:///{tmp_path / 'plait.db'}"
    process, url = _serve(tmp_path, store_url)
    try:
        with (
            httpx.Client(base_url=url, timeout=WAIT * 3) as http,
            http.stream("POST", "/v1/agents/worker/runs", json={"input": "go"}) as response,
        ):
            lines = response.iter_lines()
            first = next(parse_sse(lines))
            assert first[1]["output"]["message"]["message"]["tool_calls"][0]["name"] == "work"
            stopping = time.monotonic()
            process.send_signal(signal.SIGTERM)
            rest = list(parse_sse(lines))
        assert process.wait(WAIT * 2) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal
        assert time.monotonic() - stopping < WAIT
    finally:
        process.kill()
        process.wait()
    # the stop cancels the tool in flight: the event of the cancelled run, then the end
    assert [name for name, _ in rest] == ["agent_event", "run_end"]
    summary = rest[-1][1]
    assert summary["status"] == "cancelled"
    assert summary["error"]["type"] == "RunCancelled" and summary["checkpoint_id"]
    process, url = _serve(tmp_path, store_url, RESTARTED="1")
    try:
        body = {"stream": False}
        with httpx.Client(base_url=url, timeout=WAIT * 3) as http:
            resumed = http.post(f"/v1/runs/{summary['checkpoint_id']}/resume", json=body).json()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(WAIT * 2)
    assert resumed["status"] == "completed"
    assert resumed["final_output"] == "finished after: done"  # the stopped call ran again
