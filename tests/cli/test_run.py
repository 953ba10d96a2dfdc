"""`plait run` and `plait resume` without a terminal: live output, exit codes, JSON lines.

(stdin is not a terminal under `CliRunner`: a pause prints the checkpoint id and exits 3.
The answer typed on a real terminal is tested in test_interactive.py.)
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from plait import Runner
from plait.cli import app
from plait.run.summary import run_summary
from plait.stores import SqliteStore
from tests.cli.support import sqlite_url, target

pytestmark = pytest.mark.timeout(60)


class Cli:
    """`plait` in this process, on one SQLite store."""

    def __init__(self, tmp_path: Path) -> None:
        self.db = tmp_path / "plait.db"
        self.store = sqlite_url(self.db)

    def __call__(self, *args: str, input: str | None = None) -> tuple[int, str, str]:
        result = CliRunner().invoke(app, [*args, "--store", self.store], input=input)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _lines(stdout: str) -> list[dict[str, Any]]:
    """Parse stdout as JSON lines (every line must be one)."""
    return [json.loads(line) for line in stdout.splitlines()]


def _checkpoint(stderr: str) -> str:
    found = re.search(r"paused: checkpoint (\w+)", stderr)
    assert found, stderr
    return found.group(1)


def test_a_completed_run_shows_the_agent_its_text_and_usage_and_exits_0(cli: Cli) -> None:
    code, stdout, stderr = cli("run", target("helper"), "hello world")
    assert code == 0, stderr
    assert stdout.splitlines() == [
        "helper",
        "  echo: hello world",
        "completed · usage: 2 input + 3 output tokens",
    ]


def test_tool_calls_show_their_arguments_and_results(cli: Cli) -> None:
    code, stdout, _ = cli("run", target("scripted_support"), "where is my order?")
    assert code == 0
    assert '  → lookup({"order": "A-1"})' in stdout
    assert "  ← lookup order A-1: shipped" in stdout
    assert "  Your order has shipped." in stdout


def test_transfers_and_handoffs_are_shown(cli: Cli) -> None:
    code, stdout, _ = cli("run", target("desk"), "my bill")
    assert code == 0
    assert "  transfer → billing: a bill question" in stdout
    assert re.search(r"  handoff \[[\d:]+\] triage → billing \(1 step, 0 tokens\)\n", stdout)
    assert stdout.index("triage") < stdout.index("billing\n") < stdout.index("Your bill is 10.")


def test_agents_called_as_tools_are_indented_by_depth(cli: Cli) -> None:
    code, stdout, _ = cli("run", target("manager"), "delegate")
    assert code == 0
    assert stdout.splitlines() == [
        "manager",
        '  → helper({"request": "from the manager"})',
        "  helper",
        "    echo: from the manager",
        "manager",
        "  ← helper echo: from the manager",
        "  The helper answered.",
        "completed · usage: 2 input + 3 output tokens",
    ]


def test_a_failed_run_shows_the_error_and_exits_1(cli: Cli) -> None:
    code, stdout, stderr = cli("run", target("helper"), "fail now")
    assert code == 1, stderr
    assert "error ModelError: model call failed: RuntimeError: the model is down" in stdout
    assert stdout.splitlines()[-1].startswith("failed · usage:")


def test_a_pause_without_a_terminal_prints_the_checkpoint_and_exits_3(cli: Cli) -> None:
    code, stdout, stderr = cli("run", target("helper"), "approve the refund")
    assert code == 3
    assert '? {"question": "approve the refund?"}' in stdout
    checkpoint = _checkpoint(stderr)
    assert f"plait resume {checkpoint} {target('helper')} --store {cli.store} --value JSON" in (
        stderr
    )


def test_resume_answers_the_interrupt_with_json_or_plain_text(cli: Cli) -> None:
    _, _, stderr = cli("run", target("helper"), "approve the refund")
    code, stdout, _ = cli("resume", _checkpoint(stderr), target("make_helper"), "--value", "yes")
    assert code == 0
    assert "  done: the refund=yes" in stdout
    assert "usage: 11 input + 4 output tokens" in stdout
    _, _, stderr = cli("run", target("helper"), "approve the refund")
    code, stdout, _ = cli("resume", _checkpoint(stderr), target("helper"), "--value", "[1, 2]")
    assert code == 0
    assert "  done: the refund=[1, 2]" in stdout


def test_resume_with_targets_answers_each_interrupt_by_id(cli: Cli) -> None:
    code, stdout, stderr = cli("run", target("helper"), "two approvals", "--json")
    assert code == 3
    summary = _lines(stdout)[-1]
    assert "--targets '{" in stderr
    first, second = (i["id"] for i in summary["interrupts"])
    answers = json.dumps({first: "ok", second: 2})
    code, stdout, _ = cli(
        "resume", summary["checkpoint_id"], target("helper"), "--targets", answers
    )
    assert code == 0
    assert "done: a=ok | b=2" in stdout


def test_resume_refusals_are_usage_errors(cli: Cli) -> None:
    _, _, stderr = cli("run", target("helper"), "approve it")
    checkpoint = _checkpoint(stderr)
    assert cli("resume", checkpoint, target("helper"), "--value", "1")[0] == 0
    code, stdout, stderr = cli("resume", checkpoint, target("helper"), "--value", "1")
    assert code == 2 and stdout == ""
    assert stderr.startswith("plait: error: checkpoint") and "already resumed" in stderr
    code, _, stderr = cli("resume", "nope", target("helper"))
    assert code == 2
    assert stderr == (
        f"plait: error: no checkpoint 'nope' in the store {cli.store}; check the id, and "
        "pass the --store the run was made with\n"
    )
    code, _, stderr = cli("resume", "x", target("helper"), "--value", "1", "--targets", "{}")
    assert (code, stderr) == (2, "plait: error: give --value or --targets, not both\n")
    code, _, stderr = cli("resume", "x", target("helper"), "--targets", "[1]")
    assert code == 2 and "--targets must be a JSON object" in stderr


@pytest.mark.parametrize(
    ("query", "code", "status"),
    [("hello", 0, "completed"), ("fail", 1, "failed"), ("approve it", 3, "paused")],
)
def test_json_prints_only_json_lines_events_then_the_summary(
    cli: Cli, query: str, code: int, status: str
) -> None:
    exit_code, stdout, stderr = cli("run", target("helper"), query, "--json")
    assert exit_code == code
    *events, summary = _lines(stdout)  # every stdout line is JSON
    assert events and all(e["agent_name"] == "helper" for e in events)
    assert summary["status"] == status
    assert summary["agent"] == "helper" and summary["session_id"] is None
    assert set(summary) == {
        "status", "checkpoint_id", "final_output", "interrupts", "error", "usage",
        "handoffs", "agent", "session_id", "metadata",
    }  # fmt: skip
    assert summary["metadata"] == {}
    if status == "completed":
        assert summary["final_output"] == "echo: hello"
        assert summary["usage"] == {"input_tokens": 2, "output_tokens": 3}
        assert events[0]["output"]["message"]["message"]["content"] == "echo: hello"
    if status == "failed":
        assert summary["error"]["type"] == "ModelError"
        assert events[-1]["error"]["type"] == "ModelError"
    if status == "paused":
        assert summary["interrupts"][0]["info"] == {"question": "approve it?"}
        assert f"paused: checkpoint {summary['checkpoint_id']}" in stderr


def test_a_resume_with_json_prints_json_lines_too(cli: Cli) -> None:
    _, _, stderr = cli("run", target("helper"), "approve it")
    code, stdout, _ = cli("resume", _checkpoint(stderr), target("helper"), "--json", "--value", "1")
    assert code == 0
    *events, summary = _lines(stdout)
    assert summary["status"] == "completed" and summary["final_output"] == "done: it=1"
    assert [e["output"]["message"]["role"] for e in events] == ["tool", "assistant"]


def test_the_summary_has_the_shape_of_the_servers(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from plait.cli.target import load_target
    from plait.server.summary import summarize

    async def results() -> list[Any]:
        async with SqliteStore(tmp_path / "parity.db") as store:
            helper = Runner(load_target(target("helper")), store=store)
            desk = Runner(load_target(target("desk")), store=store)
            return [
                await helper.query("approve it").collect(),
                await helper.query("fail").collect(),
                await helper.query("hi", session_id="s").collect(),
                await desk.query("a bill").collect(),
            ]

    for result in asyncio.run(results()):
        server = summarize(result, agent="x", session_id="s").model_dump(mode="json")
        assert run_summary(result, agent="x", session_id="s") == server


def test_without_a_query_it_is_a_chat_on_one_session(cli: Cli) -> None:
    code, stdout, stderr = cli("run", target("helper"), "--session", "s1", input="hi\n\nagain\n")
    assert code == 0, stderr
    assert "echo: hi" in stdout and "echo: again" in stdout
    code, stdout, _ = cli("run", target("helper"), "--session", "s1", input="more\nexit\nlost\n")
    assert code == 0
    assert "echo: more" in stdout and "lost" not in stdout

    async def users() -> list[str]:
        async with SqliteStore(cli.db) as store:
            saved = json.loads(await store.get_session("s1") or b"{}")
        return [m["content"] for author, m in saved["messages"] if author == "user"]

    assert asyncio.run(users()) == ["hi", "again", "more"]


def test_a_chat_without_session_makes_one_up_and_stops_at_a_pause(cli: Cli) -> None:
    code, stdout, stderr = cli("run", target("helper"), input="hi\napprove x\nnever\n")
    assert code == 3
    assert re.search(r"session \w{12} · type a request", stderr)
    assert "echo: hi" in stdout and "never" not in stdout
    assert "paused: checkpoint" in stderr


def test_a_chat_with_json_keeps_stdout_json(cli: Cli) -> None:
    code, stdout, _ = cli("run", target("helper"), "--json", input="one\nthree\n")
    assert code == 0
    lines = _lines(stdout)
    summaries = [line for line in lines if "status" in line]
    assert [s["final_output"] for s in summaries] == ["echo: one", "echo: three"]
    assert summaries[0]["session_id"] == summaries[1]["session_id"] is not None


@pytest.mark.parametrize(
    ("store", "expected"),
    [
        (
            "postgresql://postgres@127.0.0.1:1/test",
            "cannot reach the store postgresql://postgres@127.0.0.1:1/test: ",
        ),
        (
            "postgresql://me:hunter2@127.0.0.1:1/test",
            "cannot reach the store postgresql://me:***@127.0.0.1:1/test: ",
        ),
        ("redis://127.0.0.1:1/0", "cannot reach the store redis://127.0.0.1:1/0: "),
        ("sqlite:////no/such/folder/plait.db", "cannot reach the store sqlite:////no/such/"),
        ("ftp://example.com", "unknown store URL scheme 'ftp'"),
    ],
)
@pytest.mark.parametrize("command", ["run", "resume", "serve"])
def test_a_store_out_of_reach_is_one_line_and_exit_2(
    command: str, store: str, expected: str
) -> None:
    if store.startswith("postgresql"):
        pytest.importorskip("psycopg")
    if store.startswith("redis"):
        pytest.importorskip("redis")
    args = {
        "run": ["run", target("helper"), "hi"],
        "resume": ["resume", "some-id", target("helper"), "--value", "1"],
        "serve": ["serve", target("helper"), "--port", "0"],
    }[command]
    result = CliRunner().invoke(app, [*args, "--store", store])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"plait: error: {expected}"), result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "hunter2" not in result.stderr
    if "cannot reach" in expected:
        assert "pass another --store" in result.stderr


@pytest.mark.parametrize(
    "args",
    [["run"], ["resume", "only-an-id"], ["serve"], ["run", "x.py:a", "--session"]],
)
def test_missing_arguments_are_usage_errors(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stdout == ""
