"""Save screenshots of the dev page into docs/images/ (the pictures of docs/server.md).

    PYTHONPATH=src python scripts/page_screenshots.py [OUT_DIR]

Serves offline agents (scripted models: no model, extra or key) — the code-review team and
the research graph of `plait.examples.teams`, a release agent that asks before shipping, a
helper whose instruction reads session values and recalls memories, and a long job — on a
SQLite file in a temporary directory, and drives the page in the system's headless Chromium
(Playwright):

- `page-live.png`: a run in flight, followed again after a reload, with the running runs;
- `page-inbox.png`: a paused run reopened from the inbox: the question beside the request,
  the agent path, the tool and its arguments;
- `page-topology.png`: a code review with the picture of the team's agents unfolded;
- `page-raw-json.png`: one event's raw JSON, in place;
- `page-state.png`: the state as of an event, ready to be edited and forked;
- `page-graph.png`: a graph's run: its answer, and the picture in the order it runs;
- `page-inputs.png`: the input form built from the agent's schema, and past inputs;
- `page-assistants.png`: an assistant, edited into a second version;
- `page-store.png`, `page-memory.png`, `page-usage.png`: those views.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from plait import ChatModelAgent, Message, interrupt, run_context, tool
from plait.examples.teams import PR, code_review_coordinator, research_graph
from plait.memory import RecallTool, SqliteMemoryService
from plait.server import create_app
from plait.stores import SqliteStore
from plait.testing import FunctionModel, ScriptedModel, call, reply
from plait.tools.base import ToolInfo

VIEWPORT = {"width": 1360, "height": 900}
WAIT_MS = 20_000
SHOTS = (
    *("page-live", "page-inbox", "page-topology", "page-raw-json", "page-state", "page-graph"),
    *("page-inputs", "page-assistants", "page-store", "page-memory", "page-usage"),
)
GO = threading.Event()  # lets the long job finish


@tool
def prepare(version: str) -> str:
    """Prepare a release: note its version in the session values and the team state.

    Args:
        version: The version to ship.
    """
    ctx = run_context()
    ctx.session_values["version"] = version
    ctx.state["prepared"] = [version]
    return f"release {version} prepared"


@tool
def ship(version: str, env: str) -> str:
    """Ship a release once a person approves.

    Args:
        version: The version to ship.
        env: Where to ship it.
    """
    answer = interrupt({"question": f"Ship {version} to {env}?", "version": version})
    return "shipped" if answer == "approve" else f"not shipped ({json.dumps(answer)})"


@tool
async def rebuild(index: str) -> str:
    """Rebuild a search index (a long job).

    Args:
        index: The index to rebuild.
    """
    await asyncio.to_thread(GO.wait, 60)
    return f"index {index} rebuilt"


def _echo(messages: list[Message], tools: list[ToolInfo]) -> Message:
    system = next((m.content for m in messages if m.role == "system"), "")
    said = next(m.content for m in reversed(messages) if m.role == "user")
    return reply(f"({system}) {said}")


def agents(memory: Path) -> dict[str, Any]:
    """The agents the pictures show (fresh objects)."""
    release_script = [
        call("prepare", {"version": "2.4.0"}),
        call("ship", {"version": "2.4.0", "env": "production"}),
        reply("Release 2.4.0 is out."),
    ]
    release = ChatModelAgent(
        "release",
        ScriptedModel(release_script, per_run=True),
        description="Prepares a release and asks before shipping it.",
        tools=[prepare, ship],
    )
    indexer = ChatModelAgent(
        "indexer",
        ScriptedModel([call("rebuild", {"index": "docs"}), reply("Rebuilt.")], per_run=True),
        description="Rebuilds search indexes.",
        tools=[rebuild],
    )
    helper = ChatModelAgent(
        "helper",
        FunctionModel(_echo),
        instruction="You help {customer} in a {tone?} tone.",
        description="Helps a customer, remembering what they said.",
        tools=[RecallTool(SqliteMemoryService(memory))],
    )
    return {
        "code_review": code_review_coordinator(),
        "release": release,
        "research": research_graph(),
        "helper": helper,
        "indexer": indexer,
    }


class Server:
    """uvicorn on a free port, in a thread."""

    def __init__(self, db: Path, memory: Path) -> None:
        app = create_app(agents(memory), store=SqliteStore(db), ui=True)
        self.server = uvicorn.Server(uvicorn.Config(app, port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise SystemExit("the server did not start")
            time.sleep(0.02)
        host, port = self.server.servers[0].sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def __exit__(self, *exc: object) -> None:
        GO.set()
        self.server.should_exit = True
        self.thread.join(30)


async def _remember(path: Path) -> None:
    memory = SqliteMemoryService(path)
    try:
        await memory.add("local", "Ann prefers short answers and a warm tone.", {"session": "s1"})
        await memory.add("local", "Ann's order A-17 shipped on Monday.", {"session": "s2"})
    finally:
        await memory.close()


def _send(page: Any, agent: str, text: str) -> None:
    page.select_option("#agent", agent)
    page.fill("#input", text)
    page.click("#send")


def _view(page: Any, name: str) -> None:
    page.click(f'#views button[data-view="{name}"]')


def _run_shots(page: Any, out: Path) -> None:
    from playwright.sync_api import expect

    _send(page, "indexer", "Rebuild the docs index")
    expect(page.locator("#events .tool-call")).to_contain_text("rebuild")
    page.reload()
    expect(page.locator("#events .fork")).to_contain_text("re-attached to run")
    expect(page.locator("#live button.live-run")).to_have_count(1)
    page.screenshot(path=out / "page-live.png")
    GO.set()
    expect(page.locator("#events .final")).to_contain_text("Rebuilt.")

    _send(page, "release", "Ship version 2.4.0, please")
    expect(page.locator("#interrupts form")).to_have_count(1)
    page.reload()
    page.locator('#inbox button[data-kind="question"]').first.click()
    expect(page.locator("#interrupts .arguments")).to_contain_text("production")
    page.screenshot(path=out / "page-inbox.png")
    page.click("#interrupts button.approve")
    expect(page.locator("#events .final")).to_contain_text("Release 2.4.0 is out.")
    page.locator("#events .tool-result").nth(1).click()
    expect(page.locator("#state-values")).to_contain_text("2.4.0")
    page.fill("#state-edit", '{"version": "2.4.1"}')
    page.screenshot(path=out / "page-state.png")

    _send(page, "code_review", "Please review this PR:\n" + PR)
    expect(page.locator("#events .final")).to_be_visible()
    page.click("#topology summary")
    page.screenshot(path=out / "page-topology.png")
    page.click("#topology summary")
    page.locator("#events .tool-call").nth(1).locator("button.raw").click()
    expect(page.locator("#events .raw-json")).to_have_count(1)
    page.screenshot(path=out / "page-raw-json.png")

    _send(page, "research", "durable agents")
    expect(page.locator("#events .final")).to_be_visible()
    page.click("#topology summary")
    page.locator("#events .custom").nth(1).click()
    page.screenshot(path=out / "page-graph.png")


def _view_shots(page: Any, out: Path) -> None:
    from playwright.sync_api import expect

    page.select_option("#agent", "helper")
    page.fill("#field-customer", "Ann")
    page.fill("#field-tone", "warm")
    page.fill("#input", "Where is my order?")
    page.click("#send")
    expect(page.locator("#events .final")).to_be_visible()
    page.fill("#input", "And the invoice?")
    page.click("#history-toggle")
    page.screenshot(path=out / "page-inputs.png")

    _view(page, "assistants")
    page.fill("#assistant-name", "terse")
    page.fill("#assistant-instruction", "Answer {customer} in one sentence.")
    page.fill("#assistant-iterations", "3")
    page.click("#assistant-save")
    card = page.locator("#assistants-list li.assistant", has_text="terse")
    card.locator("button.edit").click()
    page.fill("#assistant-instruction", "Answer {customer} in one short sentence.")
    page.click("#assistant-save")
    expect(card).to_contain_text("version 2")
    card.locator("button.versions").click()
    expect(card.locator(".assistant-versions li")).to_have_count(2)
    page.screenshot(path=out / "page-assistants.png")

    _view(page, "store")
    for key, value in (("ann", {"tone": "warm", "plan": "pro"}), ("bo", {"tone": "brief"})):
        page.fill("#store-namespace", "customers/prefs")
        page.fill("#store-key", key)
        page.fill("#store-value", json.dumps(value))
        page.click("#store-put button")
        expect(page.locator(f'#store-items tr[data-key="{key}"]')).to_have_count(1)
    page.screenshot(path=out / "page-store.png")

    _view(page, "memory")
    page.fill("#memory-query", "Ann order")
    page.click("#memory-form button")
    expect(page.locator("#memory-items li")).not_to_have_count(0)
    page.screenshot(path=out / "page-memory.png")

    _view(page, "usage")
    page.select_option("#usage-group", "agent")
    page.click("#usage-form button")
    expect(page.locator("#usage-table tbody tr")).not_to_have_count(0)
    page.screenshot(path=out / "page-usage.png")


def main(out: Path) -> None:
    """Save the screenshots into `out`."""
    from playwright.sync_api import expect, sync_playwright

    executable = next(
        (
            shutil.which(n)
            for n in ("chromium", "chromium-browser", "google-chrome")
            if shutil.which(n)
        ),
        None,
    )
    if executable is None:
        raise SystemExit("no Chromium on PATH: apt-get install chromium")
    out.mkdir(parents=True, exist_ok=True)
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    expect.set_options(timeout=WAIT_MS)
    with tempfile.TemporaryDirectory() as tmp:
        memory = Path(tmp) / "memory.db"
        asyncio.run(_remember(memory))
        with Server(Path(tmp) / "plait.db", memory) as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=args)
            try:
                page = browser.new_page(viewport=VIEWPORT)
                page.goto(url + "/")
                expect(page.locator("#agent option")).not_to_have_count(0)
                _run_shots(page, out)
                _view_shots(page, out)
            finally:
                browser.close()
    for name in SHOTS:
        print(out / f"{name}.png")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images"))
