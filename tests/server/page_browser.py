"""Driving the dev page in a real headless Chromium (Playwright, with the system's Chromium).

`python -m tests.server.page_browser review.png` (with `src` and the repository root on
PYTHONPATH) runs the code review of the tests on the page and saves a screenshot of it (the
pictures of docs/server.md come from scripts/page_screenshots.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from plait.server import create_app
from plait.stores import SqliteStore
from tests.server.review_team import page_agents
from tests.server.support import WAIT, ServerThread

KEY = "page-key"
REVIEW_REQUEST = "Please review PR 7: the users query"
VIEWPORT = {"width": 1360, "height": 1100}
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
NO_CHROMIUM = (
    "no Chromium on PATH (looked for chromium, chromium-browser, google-chrome); "
    "install one to run the dev page's browser tests: apt-get install chromium"
)


def find_chromium() -> str | None:
    """Return the path of a Chromium (or Chrome) on PATH, if there is one."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


@contextlib.contextmanager
def page_server(db: Path) -> Iterator[str]:
    """Serve the page's test agents with the dev page and one API key; yield the URL."""
    app = create_app(page_agents(), store=SqliteStore(db), api_keys={KEY: "alice"}, ui=True)
    with ServerThread(app) as running:
        yield running.url


@contextlib.contextmanager
def chromium(executable: str) -> Iterator[Any]:
    """Launch a headless Chromium through Playwright; yield the browser."""
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium's sandbox refuses root
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=args)
        try:
            yield browser
        finally:
            browser.close()


def sign_in(page: Any, base_url: str, key: str = KEY) -> None:
    """Open the page, type the API key and wait for the agents to load."""
    from playwright.sync_api import expect

    page.goto(base_url + "/")
    page.fill("#api-key", key)
    page.click("#key-form button")
    expect(page.locator("#agent option")).not_to_have_count(0, timeout=WAIT * 1000)


def send(page: Any, agent: str, text: str) -> None:
    """Pick an agent and send a message."""
    page.select_option("#agent", agent)
    page.fill("#input", text)
    page.click("#send")


def start_review(page: Any, base_url: str) -> None:
    """Sign in and send the code review; return once the run pauses for approval."""
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "code_review", REVIEW_REQUEST)
    expect(page.locator("#interrupts form")).to_have_count(1, timeout=WAIT * 1000)


def main(target: str) -> None:
    """Save a screenshot of the code review, paused for approval, to `target`."""
    executable = find_chromium()
    if executable is None:
        raise SystemExit(NO_CHROMIUM)
    with (
        tempfile.TemporaryDirectory() as tmp,
        page_server(Path(tmp) / "plait.db") as url,
        chromium(executable) as browser,
    ):
        page = browser.new_page(viewport=VIEWPORT)
        start_review(page, url)
        page.screenshot(path=target)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "review.png")
