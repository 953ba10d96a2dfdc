"""`MCPToolset`: an MCP server's tools offered to an agent, against real server processes
(`tests/protocols/mcp_servers/`): stdio and streamable HTTP, filters and prefixes, tool errors,
servers that cannot start, die, or misbehave, and one session kept across runs."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from plait import AgentContext, ChatModelAgent, Message, Runner, RunOption, RunResult, tool
from plait.errors import ToolError, UsageError
from plait.protocols.mcp_client import MAX_RESULT_CHARS
from plait.testing import ScriptedModel, call, reply
from plait.tools import MCPToolset, Tool, Toolset

SERVERS = Path(__file__).parent / "mcp_servers"
SERVER = str(SERVERS / "server.py")
HOSTILE = str(SERVERS / "hostile.py")


def stdio(**options: Any) -> MCPToolset:
    return MCPToolset(sys.executable, args=[SERVER], **options)


def hostile(mode: str, **options: Any) -> MCPToolset:
    return MCPToolset(sys.executable, args=[HOSTILE, mode], **options)


async def run(toolset: Toolset, *script: Message | str, **options: Any) -> RunResult:
    agent = ChatModelAgent("assistant", ScriptedModel(list(script)), tools=[toolset], **options)
    return await Runner(agent).query("go").collect()


def tool_results(result: RunResult) -> list[str]:
    """The contents of the tool messages of a run, in order."""
    return [
        e.output.message.message.content
        for e in result.events
        if e.output is not None
        and e.output.message is not None
        and e.output.message.message is not None
        and e.output.message.message.role == "tool"
    ]


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


async def gone(*pids: int, within: float = 30) -> bool:
    """Wait until none of `pids` runs (polling, at most `within` seconds)."""
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


# --- stdio: calls, schemas, filters -----------------------------------------------------


async def test_an_agent_calls_an_mcp_tool_and_answers() -> None:
    result = await run(stdio(), call("add", {"a": 2, "b": 3}), reply("2 + 3 = 5"))
    assert result.error is None
    assert tool_results(result) == ["5"]
    assert result.final_output == "2 + 3 = 5"


async def test_the_server_tools_are_offered_with_their_json_schemas() -> None:
    model = ScriptedModel([reply("ok")])
    agent = ChatModelAgent("assistant", model, tools=[stdio()])
    assert agent.tools == ()  # known once a run opens the server
    await Runner(agent).query("go").collect()
    offered = {t.name: t for t in model.requests[0].tools}
    assert set(offered) == {"add", "echo", "fail", "pid", "env", "die", "huge", "hang", "header"}
    add = offered["add"]
    assert add.description == "Add two numbers."
    assert add.parameters["type"] == "object"
    assert add.parameters["required"] == ["a", "b"]
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert agent.tools == ()  # the agent itself is left as it was


async def test_a_name_list_filter_and_a_prefix_choose_and_rename_the_tools() -> None:
    model = ScriptedModel([call("calc_add", {"a": 1, "b": 1}), reply("2")])
    toolset = stdio(tool_filter=["add", "echo"], prefix="calc")
    agent = ChatModelAgent("assistant", model, tools=[toolset])
    result = await Runner(agent).query("go").collect()
    assert [t.name for t in model.requests[0].tools] == ["calc_add", "calc_echo"]
    assert tool_results(result) == ["2"]


async def test_a_predicate_filter_sees_the_server_names() -> None:
    model = ScriptedModel([reply("ok")])
    toolset = stdio(tool_filter=lambda name: name.startswith("h"), prefix="s")
    await Runner(ChatModelAgent("assistant", model, tools=[toolset])).query("go").collect()
    assert sorted(t.name for t in model.requests[0].tools) == ["s_hang", "s_header", "s_huge"]


async def test_the_toolset_tools_come_after_the_agent_own_and_return_directly_works() -> None:
    @tool
    def local() -> str:
        """A local tool."""
        return "local"

    model = ScriptedModel([call("echo", {"text": "straight back"})])
    agent = ChatModelAgent("assistant", model, tools=[local, stdio()], return_directly=["echo"])
    result = await Runner(agent).query("go").collect()
    assert [t.name for t in model.requests[0].tools][:2] == ["local", "add"]
    assert result.final_output == "straight back"


async def test_return_directly_naming_no_tool_of_the_server_ends_the_run() -> None:
    agent = ChatModelAgent(
        "assistant", ScriptedModel([reply("x")]), tools=[stdio()], return_directly=["nope"]
    )
    result = await Runner(agent).query("go").collect()
    assert isinstance(result.error, UsageError)
    assert "nope" in str(result.error)


# --- failures -------------------------------------------------------------------------


async def test_a_tool_error_is_told_to_the_model() -> None:
    result = await run(stdio(), call("fail", {"reason": "disk full"}), reply("sorry"))
    assert result.error is None
    [told] = tool_results(result)
    assert told.startswith("Error:") and "disk full" in told
    assert result.final_output == "sorry"


async def test_a_tool_error_ends_the_run_with_tool_errors_raise() -> None:
    result = await run(stdio(), call("fail", {"reason": "disk full"}), tool_errors="raise")
    assert isinstance(result.error, ToolError)
    assert "disk full" in str(result.error)


async def test_arguments_that_are_not_a_json_object_are_told_to_the_model() -> None:
    result = await run(stdio(), call("add", "[1, 2]"), reply("oops"))
    [told] = tool_results(result)
    assert "must be a JSON object" in told


async def test_a_command_that_does_not_exist_ends_the_run_with_a_tool_error_naming_it() -> None:
    started = time.monotonic()
    result = await run(MCPToolset("no-such-mcp-server-x1"), reply("never"))
    assert time.monotonic() - started < 10
    assert isinstance(result.error, ToolError)
    assert "no-such-mcp-server-x1" in str(result.error)
    assert "could not start" in str(result.error)


async def test_a_server_that_never_answers_the_handshake_fails_within_the_connect_timeout() -> None:
    started = time.monotonic()
    result = await run(hostile("silent", connect_timeout=1), reply("never"))
    assert time.monotonic() - started < 10
    assert isinstance(result.error, ToolError)
    assert "hostile.py silent" in str(result.error)
    assert "within 1 s" in str(result.error)


async def test_the_connect_timeout_is_30_s_and_its_error_names_it_and_the_command() -> None:
    assert stdio().connect_timeout == 30
    result = await run(hostile("silent", connect_timeout=0.5), reply("never"))
    assert isinstance(result.error, ToolError)
    message = str(result.error)
    assert "hostile.py silent" in message
    assert "within 0.5 s" in message and "connect_timeout" in message


async def test_a_server_given_up_on_is_stopped_with_the_processes_it_started(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "pids"
    toolset = MCPToolset(sys.executable, args=[HOSTILE, "silent-parent", str(pidfile)])
    toolset.connect_timeout = 2
    result = await run(toolset, reply("never"))
    assert isinstance(result.error, ToolError)
    assert "connect_timeout" in str(result.error)
    leader, child = (int(pid) for pid in pidfile.read_text().split())
    assert await gone(leader, child)  # its child too, though the server itself had exited


async def test_a_server_that_dies_mid_run_fails_that_call_and_the_next_run_starts_it() -> None:
    toolset = stdio()
    result = await run(toolset, call("die"), call("add", {"a": 1, "b": 1}), reply("it died"))
    assert result.error is None
    died, after = tool_results(result)
    assert died.startswith("Error:") and "closed the connection" in died
    assert after.startswith("Error:") and "cannot be called" in after
    again = await run(toolset, call("add", {"a": 1, "b": 1}), reply("2"))
    assert tool_results(again) == ["2"]


# --- sessions across runs ----------------------------------------------------------------


async def test_each_run_starts_the_server_and_stops_it_when_the_run_ends() -> None:
    toolset = stdio()
    first = await run(toolset, call("pid"), reply("a"))
    second = await run(toolset, call("pid"), reply("b"))
    [pid1], [pid2] = tool_results(first), tool_results(second)
    assert pid1 != pid2
    assert not alive(int(pid1)) and not alive(int(pid2))


async def test_async_with_keeps_one_server_process_across_runs() -> None:
    toolset = stdio()
    async with toolset:
        first = await run(toolset, call("pid"), reply("a"))
        second = await run(toolset, call("pid"), reply("b"))
        [pid1], [pid2] = tool_results(first), tool_results(second)
        assert pid1 == pid2
        assert alive(int(pid1))
    assert not alive(int(pid1))


async def test_async_with_starts_a_dead_server_again_for_the_next_run() -> None:
    toolset = stdio()
    async with toolset:
        first = await run(toolset, call("pid"), call("die"), reply("a"))
        second = await run(toolset, call("pid"), reply("b"))
    pid1, died = tool_results(first)
    [pid2] = tool_results(second)
    assert "closed the connection" in died
    assert pid2.isdigit() and pid2 != pid1


async def test_async_with_starts_a_server_killed_between_runs_again() -> None:
    toolset = stdio()
    async with toolset:
        [pid1] = tool_results(await run(toolset, call("pid"), reply("a")))
        os.kill(int(pid1), signal.SIGKILL)
        for _ in range(1500):  # polling until the process is gone (30 s at most)
            if not alive(int(pid1)):
                break
            await asyncio.sleep(0.02)
        [pid2] = tool_results(await run(toolset, call("pid"), reply("b")))
    assert pid2.isdigit() and pid2 != pid1


async def test_env_is_given_to_the_server_process() -> None:
    result = await run(
        stdio(env={"PLAIT_MCP_FLAG": "on"}), call("env", {"name": "PLAIT_MCP_FLAG"}), reply("x")
    )
    assert tool_results(result) == ["on"]


async def test_async_with_a_server_that_cannot_start_raises_a_tool_error() -> None:
    toolset = MCPToolset("no-such-mcp-server-x2")
    with pytest.raises(ToolError, match="no-such-mcp-server-x2"):
        async with toolset:
            pass


# --- hostile servers ---------------------------------------------------------------------


async def test_a_server_listing_too_many_tools_ends_the_run() -> None:
    result = await run(hostile("many"), reply("never"))
    assert isinstance(result.error, ToolError)
    assert "more than 1000 tools" in str(result.error)


@pytest.mark.parametrize("mode", ["bad-schema", "bad-properties"])
async def test_a_tool_whose_schema_is_not_an_object_schema_ends_the_run_naming_it(
    mode: str,
) -> None:
    result = await run(hostile(mode), reply("never"))
    assert isinstance(result.error, ToolError)
    assert f"hostile.py {mode}" in str(result.error)
    assert "tool 'broken'" in str(result.error)
    assert "inputSchema" in str(result.error)


async def test_a_huge_result_is_cut_with_a_note() -> None:
    result = await run(stdio(), call("huge", {"chars": MAX_RESULT_CHARS + 50}), reply("big"))
    [told] = tool_results(result)
    assert told.startswith("x" * 100)
    assert told.endswith("[the result was cut here: 50 more characters]")
    assert len(told) < MAX_RESULT_CHARS + 100


async def test_a_call_that_never_answers_is_stopped_at_the_timeout() -> None:
    result = await run(stdio(timeout=0.5), call("hang"), call("echo", {"text": "hi"}), reply("ok"))
    hung, echoed = tool_results(result)
    assert "did not finish within 0.5 s" in hung
    assert echoed == "hi"  # the session still serves the next call


async def test_without_its_own_timeout_a_call_has_the_agent_tool_timeout() -> None:
    result = await run(stdio(timeout=None), call("hang"), reply("ok"), tool_timeout=0.5)
    [hung] = tool_results(result)
    assert "did not finish within 0.5 s" in hung


# --- streamable HTTP ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)  # polling the port, not waiting for a fixed time
    raise RuntimeError(f"the MCP server did not listen on port {port}")


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen([sys.executable, SERVER, "--http", str(port)])
    try:
        _wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def test_a_tool_is_called_over_streamable_http_with_the_headers(http_url: str) -> None:
    toolset = MCPToolset(url=http_url, headers={"x-team": "blue"})
    result = await run(
        toolset, call("add", {"a": 20, "b": 22}), call("header", {"name": "x-team"}), reply("ok")
    )
    assert result.error is None
    assert tool_results(result) == ["42", "blue"]


async def test_async_with_keeps_one_http_session_across_runs(http_url: str) -> None:
    toolset = MCPToolset(url=http_url)
    async with toolset:
        first = await run(toolset, call("echo", {"text": "one"}), reply("a"))
        second = await run(toolset, call("echo", {"text": "two"}), reply("b"))
    assert tool_results(first) + tool_results(second) == ["one", "two"]


async def test_a_url_nothing_answers_at_ends_the_run_with_a_tool_error_naming_it() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    started = time.monotonic()
    result = await run(MCPToolset(url=url, connect_timeout=3), reply("never"))
    assert time.monotonic() - started < 10
    assert isinstance(result.error, ToolError)
    assert url in str(result.error)


# --- a server from PyPI ------------------------------------------------------------------


async def test_the_mcp_server_time_package_lists_and_converts_offline() -> None:
    command = shutil.which("mcp-server-time") or str(
        Path(sys.executable).parent / "mcp-server-time"
    )
    toolset = MCPToolset(command, args=["--local-timezone", "UTC"], tool_filter=["convert_time"])
    args = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    model = ScriptedModel([call("convert_time", args), reply("21:00 in Tokyo")])
    result = await Runner(ChatModelAgent("clock", model, tools=[toolset])).query("go").collect()
    assert [t.name for t in model.requests[0].tools] == ["convert_time"]
    assert "target_timezone" in model.requests[0].tools[0].parameters["properties"]
    [told] = tool_results(result)
    assert json.loads(told)["target"]["datetime"].endswith("T21:00:00+09:00")


# --- the toolset concept, usage errors, the extra -----------------------------------------


class Counting:
    """A toolset of one tool, counting how often it is opened and closed."""

    def __init__(self) -> None:
        self.opened = 0
        self.closed = 0

    @contextlib.asynccontextmanager
    async def open_tools(self, ctx: AgentContext) -> AsyncIterator[Sequence[Tool]]:
        self.opened += 1

        @tool
        def count() -> str:
            """Say how often the toolset was opened."""
            return str(self.opened)

        try:
            yield [count]
        finally:
            self.closed += 1


async def test_a_toolset_is_opened_for_each_run_and_closed_when_it_ends() -> None:
    toolset = Counting()
    assert isinstance(toolset, Toolset)
    first = await run(toolset, call("count"), reply("a"))
    second = await run(toolset, call("count"), reply("b"))
    assert tool_results(first) + tool_results(second) == ["1", "2"]
    assert toolset.closed == 2


async def test_a_toolset_given_as_a_run_option_replaces_the_agent_tools() -> None:
    toolset = Counting()
    model = ScriptedModel([call("count"), reply("done")])
    agent = ChatModelAgent("assistant", model)
    result = await Runner(agent).query("go", options=[RunOption(tools=[toolset])]).collect()
    assert tool_results(result) == ["1"]
    assert toolset.closed == 1


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ({}, "exactly one of"),
        ({"command": "x", "url": "http://h/mcp"}, "exactly one of"),
        ({"url": "ftp://h"}, "http:// or https://"),
        ({"url": "http://h/mcp", "args": ["a"]}, "go with command="),
        ({"command": "x", "headers": {"a": "b"}}, "go with url="),
        ({"command": "x", "args": "a b"}, "list of strings"),
        ({"command": "x", "tool_filter": "add"}, "not a string"),
        ({"command": "x", "tool_filter": 3}, "list of names or a predicate"),
        ({"command": "x", "prefix": ""}, "prefix"),
        ({"command": "x", "timeout": 0}, "timeout"),
    ],
)
def test_a_bad_configuration_is_a_usage_error(given: dict[str, Any], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        MCPToolset(**given)


def test_without_the_sdk_a_usage_error_says_to_install_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    with pytest.raises(UsageError, match=r"plait\[mcp\]"):
        MCPToolset("server")


def test_importing_plait_does_not_import_the_sdk() -> None:
    code = "import sys, plait, plait.tools; print('mcp' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"
