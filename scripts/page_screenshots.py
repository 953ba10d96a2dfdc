"""Save screenshots of the dev page into docs/images/ (the pictures of docs/server.md).

    PYTHONPATH=src python scripts/page_screenshots.py [OUT_DIR]

Serves the offline code-review team of `plait.examples.teams` (scripted models: no model,
extra or key) and a small release agent that asks a person before shipping, on a SQLite file
in a temporary directory, and drives the page in the system's headless Chromium (Playwright):

- `page-inbox.png`: a paused run reopened from the inbox after a reload;
- `page-topology.png`: a code review with the picture of the team's agents;
- `page-raw-json.png`: one event's raw JSON;
- `page-state.png`: the session values and team state as of an event.
"""

from __future__ import annotations

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

from plait import ChatModelAgent, interrupt, run_context, tool
from plait.examples.teams import PR, code_review_coordinator
from plait.server import create_app
from plait.stores import SqliteStore
from plait.testing import ScriptedModel, call, reply

VIEWPORT = {"width": 1360, "height": 900}
WAIT_MS = 20_000


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
def ship(version: str) -> str:
    """Ship a release once a person approves.

    Args:
        version: The version to ship.
    """
    answer = interrupt({"question": f"Ship {version} to production?", "version": version})
    return "shipped" if answer == "approve" else f"not shipped ({json.dumps(answer)})"


def release_agent() -> ChatModelAgent:
    """An agent that prepares a release, then asks a person before shipping it."""
    script = [
        call("prepare", {"version": "2.4.0"}),
        call("ship", {"version": "2.4.0"}),
        reply("Release 2.4.0 is out."),
    ]
    return ChatModelAgent(
        "release",
        ScriptedModel(script, per_run=True),
        description="Prepares a release and asks before shipping it.",
        tools=[prepare, ship],
    )


class Server:
    """uvicorn on a free port, in a thread."""

    def __init__(self, db: Path) -> None:
        app = create_app(
            {"code_review": code_review_coordinator(), "release": release_agent()},
            store=SqliteStore(db),
            ui=True,
        )
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
        self.server.should_exit = True
        self.thread.join(30)


def _send(page: Any, agent: str, text: str) -> None:
    page.select_option("#agent", agent)
    page.fill("#input", text)
    page.click("#send")


def _shots(page: Any, url: str, out: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    page.goto(url + "/")
    expect(page.locator("#agent option")).not_to_have_count(0)
    _send(page, "release", "Ship version 2.4.0, please")
    expect(page.locator("#interrupts form")).to_have_count(1)
    page.reload()
    page.locator("#inbox button").first.click()
    expect(page.locator("#interrupts form")).to_have_count(1)
    page.screenshot(path=out / "page-inbox.png")

    page.click("#interrupts button.approve")
    expect(page.locator("#events .final")).to_contain_text("Release 2.4.0 is out.")
    page.locator("#events .tool-result").first.click()
    expect(page.locator("#state-values")).to_contain_text("2.4.0")
    page.screenshot(path=out / "page-state.png")

    _send(page, "code_review", "Please review this PR:\n" + PR)
    expect(page.locator("#events .final")).to_be_visible()
    page.screenshot(path=out / "page-topology.png")

    page.locator("#events .tool-call").first.locator("button.raw").click()
    raw = page.locator("#events .raw-json")
    expect(raw).to_have_count(1)
    raw.scroll_into_view_if_needed()
    page.screenshot(path=out / "page-raw-json.png")


def main(out: Path) -> None:
    """Save the four screenshots into `out`."""
    from playwright.sync_api import sync_playwright

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
    with (
        tempfile.TemporaryDirectory() as tmp,
        Server(Path(tmp) / "plait.db") as url,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=executable, args=args)
        try:
            _shots(browser.new_page(viewport=VIEWPORT), url, out)
        finally:
            browser.close()
    for name in ("page-inbox", "page-state", "page-topology", "page-raw-json"):
        print(out / f"{name}.png")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images"))
