"""`plait.protocols.mcp.server` and `plait mcp`: agents as MCP tools, called with the MCP SDK's
own client over a real `plait mcp` process; and `plait run` of an agent with MCP tools."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

import plait
from plait import ChatModelAgent, RunResult
from plait.errors import UsageError
from plait.protocols.mcp import answer, server
from plait.stores import from_url
from plait.testing import FunctionModel
from tests.cli.support import ROOT, ServeProcess, plait_env

AGENTS = Path(__file__).resolve().parent / "mcp_agents.py"


def target(name: str) -> str:
    return f"{AGENTS}:{name}"


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


async def test_plait_mcp_serves_one_tool_per_agent_over_stdio(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'runs.db'}"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "plait", "mcp", target("helper"), target("other"), "--store", store_url],
        env=plait_env(),
        cwd=ROOT,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = {t.name: t for t in (await session.list_tools()).tools}
        assert set(listed) == {"helper", "other"}
        assert listed["helper"].description is not None
        assert listed["helper"].description.startswith("Echoes requests.")
        schema = listed["helper"].input_schema
        assert schema["required"] == ["input"]
        assert schema["properties"]["input"]["type"] == "string"

        done = await session.call_tool("helper", {"input": "hello"})
        assert not done.is_error
        assert _text(done) == "you said: hello"
        assert _text(await session.call_tool("other", {"input": "hi"})) == "other here"

        paused = await session.call_tool("helper", {"input": "approve deploy"})
        assert not paused.is_error
        text = _text(paused)
        assert text.startswith("The run paused") and "approve deploy?" in text
        checkpoint_id = text.rsplit(" ", 1)[1].rstrip(".")

        failed = await session.call_tool("helper", {"input": "fail"})
        assert failed.is_error
        assert "ModelError" in _text(failed) and "the model is down" in _text(failed)

    store = from_url(store_url)
    try:
        assert await store.get_checkpoint(checkpoint_id) is not None
    finally:
        await store.close()


async def test_the_server_names_itself_plait_with_plait_version() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "plait", "mcp", target("other"), "--store", "memory://"],
        env=plait_env(),
        cwd=ROOT,
    )
    async with Client(params, mode="legacy") as client:
        assert client.server_info is not None
        assert (client.server_info.name, client.server_info.version) == ("plait", plait.__version__)


def _mcp_http(tmp_path: Path, *args: str) -> ServeProcess:
    """`plait mcp ... --http 0`, started; its `url` ends in /mcp."""
    process = ServeProcess([*args, "--store", "memory://", "--http", "0"], tmp_path, command="mcp")
    process.args = process.args[:-2]  # `plait mcp` takes --http PORT, not --port
    return process


async def test_plait_mcp_http_serves_streamable_http_on_loopback(tmp_path: Path) -> None:
    with _mcp_http(tmp_path, target("helper"), target("other")) as running:
        assert running.url.startswith("http://127.0.0.1:") and running.url.endswith("/mcp")
        for mode in ("auto", "legacy"):
            async with Client(running.url, mode=mode) as client:
                assert client.server_info is not None
                assert client.server_info.version == plait.__version__
                listed = {t.name for t in (await client.list_tools()).tools}
                assert listed == {"helper", "other"}
                done = await client.call_tool("helper", {"input": "hello"})
                assert _text(done) == "you said: hello"
        assert running.terminate() == 0


def test_plait_mcp_http_answers_only_its_own_hosts(tmp_path: Path) -> None:
    with _mcp_http(tmp_path, target("other")) as running:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        rebound = httpx.post(running.url, json=body, headers={"Host": "evil.example"})
        assert rebound.status_code == 403
        assert "evil.example" in rebound.text
    with _mcp_http(tmp_path, target("other"), "--allowed-host", "agents.example") as running:
        headers = {"Host": "agents.example", "Accept": "application/json, text/event-stream"}
        allowed = httpx.post(running.url, json=body, headers=headers)
        assert allowed.status_code != 403
        assert running.interrupt() == 130  # Ctrl-C stops it as it stops `plait serve`


def test_plait_mcp_host_options_without_http_are_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "plait", "mcp", target("other"), "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        env=plait_env(),
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--host and --allowed-host go with --http" in done.stderr


def test_plait_mcp_with_a_target_that_cannot_load_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "plait", "mcp", f"{AGENTS}:nobody"],
        capture_output=True,
        text=True,
        env=plait_env(),
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 2
    assert "nobody" in done.stderr
    assert done.stdout == ""


def test_plait_run_runs_an_agent_with_mcp_tools() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "plait",
            "run",
            target("adder"),
            "add them",
            "--json",
            "--store",
            "memory://",
        ],
        capture_output=True,
        text=True,
        env=plait_env(),
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    summary = lines[-1]
    assert summary["status"] == "completed"
    assert summary["final_output"] == "the sum is 5"
    tool_messages = [
        line["output"]["message"]["message"]
        for line in lines[:-1]
        if (line.get("output") or {}).get("message", {}).get("message", {}).get("role") == "tool"
    ]
    assert [(m["name"], m["content"]) for m in tool_messages] == [("add", "5")]


def test_the_http_api_shows_mcp_tool_calls_as_ordinary_tool_events() -> None:
    from plait.server import create_app
    from plait.stores import MemoryStore
    from tests.protocols.mcp_agents import adder
    from tests.server.support import ServerThread, client

    with (
        ServerThread(create_app(adder, store=MemoryStore())) as running,
        client(running.url) as http,
    ):
        body = http.post("/v1/agents/adder/runs", json={"input": "go", "stream": False}).json()
    assert body["status"] == "completed" and body["final_output"] == "the sum is 5"
    messages = [e["output"]["message"]["message"] for e in body["events"] if e.get("output")]
    call, result = messages[0], messages[1]
    assert call["tool_calls"][0]["name"] == "add"
    assert json.loads(call["tool_calls"][0]["arguments"]) == {"a": 2, "b": 3}
    assert (result["role"], result["name"], result["content"]) == ("tool", "add", "5")


def test_a_server_is_made_from_a_mapping_renaming_the_agents() -> None:
    agent = ChatModelAgent("has space", FunctionModel(lambda m, t: "x"))
    with pytest.raises(UsageError, match="pass a mapping"):
        server(agent)
    made = server({"ask_it": agent})
    assert made.name == "plait"


@pytest.mark.parametrize(
    ("agents", "match"),
    [
        ([], "at least one agent"),
        ("helper", "takes agents"),
        ([object()], "is not one"),
    ],
)
def test_what_is_not_agents_is_a_usage_error(agents: Any, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        server(agents)


def test_two_agents_of_one_name_are_a_usage_error() -> None:
    one = ChatModelAgent("same", FunctionModel(lambda m, t: "x"))
    with pytest.raises(UsageError, match="two agents are named 'same'"):
        server([one, one])


def test_an_output_that_is_not_text_is_answered_as_json() -> None:
    assert answer(RunResult(final_output={"total": 5})) == '{"total": 5}'
    assert answer(RunResult(final_output=None)) == ""


def test_the_extra_is_checked_before_a_server_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    with pytest.raises(UsageError, match=r"plait\[mcp\]"):
        server(ChatModelAgent("a", FunctionModel(lambda m, t: "x")))
