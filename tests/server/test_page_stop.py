"""Stop on the dev page, in a real headless Chromium: a stopped run is drawn as stopped (not as
a pause, not as running), says "stopping…" until it stops, can be resumed with Resume (also
after a reload, from the inbox), and a reply cut short is no longer drawn as being written."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from plait import ChatModelAgent, Message, tool
from plait.core.agent import Agent
from plait.server import create_app
from plait.stores import SqliteStore
from plait.testing import FunctionModel, ScriptedModel, call, reply
from plait.tools.base import ToolInfo
from tests.server.page_browser import KEY, send, sign_in
from tests.server.support import WAIT, ServerThread

pytestmark = pytest.mark.timeout(120)

STARTED = threading.Event()  # a tool of the run in view has started
RELEASE = threading.Event()  # lets the work tool finish
FINISH = threading.Event()  # lets the careful tool end its step once it was asked to stop


@pytest.fixture(autouse=True)
def switches() -> Iterator[None]:
    """Put the tools' switches back before each test (and release them after it)."""
    for switch in (STARTED, RELEASE, FINISH):
        switch.clear()
    yield
    RELEASE.set()
    FINISH.set()


@tool
async def work() -> str:
    """Work until released (Stop cuts it short; it runs again when the run is resumed)."""
    STARTED.set()
    await asyncio.to_thread(RELEASE.wait, WAIT)
    return "worked"


@tool
async def careful() -> str:
    """Work until the run is asked to stop, then end the step at hand (once FINISH is set)."""
    STARTED.set()
    try:
        await asyncio.sleep(WAIT)
    except asyncio.CancelledError:
        await asyncio.to_thread(FINISH.wait, WAIT)
        raise
    return "worked"


class BrokenStream(FunctionModel):
    """Streams "Half a rep" and then fails."""

    def __init__(self) -> None:
        super().__init__(lambda messages, tools: reply("unused"))

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        yield Message(role="assistant", content="Half a rep")
        raise RuntimeError("the connection dropped")


def _agents() -> dict[str, Agent]:
    script = [call("work", {}), reply("resumed and done")]
    return {
        "worker": ChatModelAgent(
            "worker", ScriptedModel(script, per_run=True), tools=[work], description="Works."
        ),
        "careful": ChatModelAgent(
            "careful",
            ScriptedModel([call("careful", {}), reply("done")], per_run=True),
            tools=[careful],
        ),
        "stammer": ChatModelAgent("stammer", BrokenStream(), description="Breaks off."),
    }


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = Path(tmp_path_factory.mktemp("page-stop")) / "plait.db"
    app = create_app(_agents(), store=SqliteStore(db), api_keys={KEY: "alice"}, ui=True)
    with ServerThread(app) as running:
        yield running.url


def _status(page: Any) -> Any:
    return page.locator('#run-facts dd[data-fact="status"]')


def _stop_the_worker(page: Any) -> str:
    """Send the worker a message, stop it while its tool works; return the run id."""
    from playwright.sync_api import expect

    send(page, "worker", "work hard")
    expect(page.locator("#events .tool-call")).to_contain_text("work")  # the page has the id
    assert STARTED.wait(WAIT)
    page.click("#stop")
    expect(_status(page)).to_have_text("cancelled")
    RELEASE.set()  # the resumed run's call of the tool finishes
    return str(page.locator('#run-facts dd[data-fact="run"]').inner_text())


def _expect_stopped(page: Any) -> None:
    """The run in view is drawn as stopped, with Resume and no Stop."""
    from playwright.sync_api import expect

    events = page.locator("#events")
    expect(events.locator(".interrupt")).to_have_count(0)
    expect(events).not_to_contain_text("asks a person")
    expect(events.locator(".stopped")).to_have_count(1)
    expect(events.locator(".stopped")).to_contain_text("stopped")
    expect(events.locator(".error")).to_have_count(0)
    expect(page.locator("#interrupts form")).to_have_count(0)
    expect(page.locator("#interrupts button.continue")).to_have_text("Resume")
    expect(page.locator("#stop")).to_be_hidden()


def _expect_resumed(page: Any) -> None:
    from playwright.sync_api import expect

    page.click("#interrupts button.continue")
    expect(page.locator("#events .final")).to_contain_text("resumed and done")
    expect(_status(page)).to_have_text("completed")
    expect(page.locator("#interrupts .stopped")).to_have_count(0)
    expect(page.locator("#stop")).to_be_hidden()
    expect(page.locator("#send")).to_be_enabled()


def test_a_stopped_run_is_drawn_stopped_and_resume_goes_on(page: Any, base_url: str) -> None:
    sign_in(page, base_url)
    _stop_the_worker(page)
    _expect_stopped(page)
    _expect_resumed(page)


def test_a_stopped_run_is_in_the_inbox_and_resumes_after_a_reload(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    run_id = _stop_the_worker(page)
    entry = page.locator(f'#inbox button[data-run="{run_id}"]')
    expect(entry).to_contain_text("stopped")
    page.reload()
    entry.click()
    expect(page.locator("#agent")).to_have_value("worker")
    expect(_status(page)).to_have_text("cancelled")
    _expect_stopped(page)
    _expect_resumed(page)
    expect(entry).to_have_count(0)


def test_stop_says_stopping_until_the_run_stops(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "careful", "work carefully")
    expect(page.locator("#events .tool-call")).to_contain_text("careful")
    assert STARTED.wait(WAIT)
    page.click("#stop")
    expect(_status(page)).to_have_text("stopping…")
    expect(page.locator("#stop")).to_be_disabled()
    FINISH.set()
    expect(_status(page)).to_have_text("cancelled")
    expect(page.locator("#stop")).to_be_hidden()
    expect(page.locator("#interrupts button.continue")).to_have_count(1)


def test_a_reply_cut_short_is_no_longer_drawn_as_being_written(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "stammer", "tell me everything")
    expect(_status(page)).to_have_text("failed")
    cut = page.locator("#events .row.cut")
    expect(cut).to_have_text("Half a rep")
    expect(page.locator("#events .row.streaming")).to_have_count(0)
    expect(page.locator("#events .row.event")).to_have_count(0)  # its event is that row's
    cut.locator("button.raw").click()
    expect(page.locator("#events .raw-json")).to_contain_text('"agent_name": "stammer"')
    expect(page.locator("#events .error")).to_contain_text("the connection dropped")
