"""What the command line prints: whole events in `resume --json`, a resumed run's handoffs
(the same in `RunResult`, the server's summary and the CLI), graph state as text, the demo's
last line."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, TypedDict

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner

from plait import END, START, Message, Runner, StateGraph
from plait.cli import app
from plait.cli.render import LiveView, shown_value
from plait.graph import append
from plait.messages import ToolCall
from plait.server import create_app
from plait.stores import SqliteStore
from tests.cli.support import sqlite_url, target
from tests.cli.targets import refund_desk
from tests.server.support import ServerThread

pytestmark = pytest.mark.timeout(60)


def _plait(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [*args, "--store", sqlite_url(store)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _checkpoint(stderr: str) -> str:
    found = re.search(r"paused: checkpoint (\w+)", stderr)
    assert found, stderr
    return found.group(1)


# -- resume --json ------------------------------------------------------------------------


def test_resume_json_prints_whole_events_when_the_paused_run_streamed(tmp_path: Path) -> None:
    store = tmp_path / "plait.db"
    code, _, stderr = _plait(store, "run", target("helper"), "approve it")  # streams
    assert code == 3
    code, stdout, stderr = _plait(
        store, "resume", _checkpoint(stderr), target("helper"), "--value", '"yes"', "--json"
    )
    assert code == 0, stderr
    *events, summary = [json.loads(line) for line in stdout.splitlines()]
    messages = [e["output"]["message"] for e in events if e["output"] and e["output"]["message"]]
    assert messages, events
    for variant in messages:
        assert variant["is_streaming"] is False and variant["stream"] is None, variant
        assert variant["message"] is not None
    assert messages[-1]["message"]["content"] == "done: it=yes"
    assert summary["status"] == "completed" and summary["final_output"] == "done: it=yes"


# -- a resumed run's handoffs: the whole run's ---------------------------------------------

_WHOLE_RUN = [("triage", "clerk"), ("clerk", "END")]


def _pairs(handoffs: Any) -> list[tuple[str, str]]:
    return [
        (h["from_agent"], h["to_agent"]) if isinstance(h, dict) else (h.from_agent, h.to_agent)
        for h in handoffs
    ]


def test_a_resumed_run_result_lists_the_handoffs_before_its_pause() -> None:
    runner = Runner(refund_desk())
    paused = runner.query_sync("refund A-1")
    assert _pairs(paused.handoffs) == [("triage", "clerk")]
    assert paused.checkpoint_id is not None
    done = runner.resume_sync(paused.checkpoint_id, value="yes")
    assert done.final_output == "refunded: the refund=yes"
    assert _pairs(done.handoffs) == _WHOLE_RUN
    assert done.handoffs[0] == paused.handoffs[0]
    assert [e.handoff for e in done.events if e.handoff is not None] == [done.handoffs[1]]


def test_a_resumed_run_summary_of_the_server_lists_the_whole_runs_handoffs(
    tmp_path: Path,
) -> None:
    app_ = create_app(refund_desk(), store=SqliteStore(tmp_path / "plait.db"))
    with ServerThread(app_) as running, httpx.Client(base_url=running.url, timeout=30) as http:
        body = {"input": "refund A-1", "stream": False}
        paused = http.post("/v1/agents/refunds/runs", json=body).json()
        assert paused["status"] == "paused" and _pairs(paused["handoffs"]) == _WHOLE_RUN[:1]
        done = http.post(
            f"/v1/runs/{paused['checkpoint_id']}/resume", json={"value": "yes", "stream": False}
        ).json()
        assert done["status"] == "completed", done
        assert _pairs(done["handoffs"]) == _WHOLE_RUN
        run_id = paused["checkpoint_id"]
        latest = http.get(f"/v1/runs/{run_id}").json()
        assert _pairs(latest["handoffs"]) == _WHOLE_RUN


def test_a_resumed_run_summary_of_the_cli_lists_the_whole_runs_handoffs(
    tmp_path: Path,
) -> None:
    store = tmp_path / "plait.db"
    code, stdout, stderr = _plait(store, "run", target("refund_desk"), "refund A-1", "--json")
    assert code == 3
    assert _pairs(json.loads(stdout.splitlines()[-1])["handoffs"]) == _WHOLE_RUN[:1]
    checkpoint = _checkpoint(stderr)
    code, stdout, stderr = _plait(
        store, "resume", checkpoint, target("refund_desk"), "--value", '"yes"', "--json"
    )
    assert code == 0, stderr
    summary = json.loads(stdout.splitlines()[-1])
    assert _pairs(summary["handoffs"]) == _WHOLE_RUN


# -- graph output as text ----------------------------------------------------------------


class Chat(TypedDict, total=False):
    messages: Annotated[list[Any], append]


def test_a_message_is_shown_as_its_text() -> None:
    asked = Message(role="user", content="what is 2 + 2?")
    called = Message(
        role="assistant", tool_calls=(ToolCall(id="c1", name="add", arguments='{"a": 2}'),)
    )
    assert shown_value(asked) == "user: what is 2 + 2?"
    shown = shown_value({"messages": [asked, called], "count": 2})
    assert json.loads(shown) == {
        "messages": ["user: what is 2 + 2?", 'assistant: → add({"a": 2})'],
        "count": 2,
    }


async def test_a_graphs_state_is_shown_with_its_messages_as_text() -> None:
    def answer(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [Message(role="assistant", content="four")]}

    graph = StateGraph(Chat)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    agent = graph.compile(name="calc")
    console = Console(record=True, width=200, color_system=None)
    view = LiveView(console)
    stream = Runner(agent).query("what is 2 + 2?")
    async for event in stream:
        await view.show(event)
    text = console.export_text()
    assert "assistant: four" in text
    assert "Message(" not in text


# -- the demo's session ------------------------------------------------------------------


def test_the_demo_says_where_its_turns_were_kept_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["demo", "--scripted"])
    assert result.exit_code == 0, result.output
    assert (
        "session 'demo': 3 turns kept in a temporary SQLite store, deleted as the demo ends"
        in " ".join(result.stdout.split())
    )
    assert "plait-demo.db" not in result.stdout
    assert os.listdir(tmp_path) == []
