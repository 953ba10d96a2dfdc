"""The dev page's live runs, in a real headless Chromium: the runs that go on are listed; one in
flight survives a reload of the page (its stream is re-attached and goes on), any listed run is
followed and stopped from the list; and an open page follows a `plait dev` reload by itself."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import ChatModelAgent, tool
from plait.server import create_app
from plait.stores import SqliteStore
from plait.testing import ScriptedModel, call, reply
from tests.server.page_browser import KEY, send, sign_in
from tests.server.support import WAIT, BackgroundStream, ServerThread, client

pytestmark = pytest.mark.timeout(120)

GO = threading.Event()  # lets `crunch` finish
CRUNCHING = threading.Event()  # `crunch` has started


@tool
async def crunch(rows: int) -> str:
    """Crunch rows until let go (or until the run is stopped).

    Args:
        rows: How many rows.
    """
    CRUNCHING.set()
    await asyncio.to_thread(GO.wait, WAIT)
    return f"crunched {rows} rows"


@tool
def tally() -> str:
    """Count the rows to crunch."""
    return "7 rows"


def _cruncher() -> ChatModelAgent:
    script = [call("tally", {}), call("crunch", {"rows": 7}), reply("All 7 rows crunched.")]
    model = ScriptedModel(script, per_run=True)
    return ChatModelAgent("cruncher", model, tools=[tally, crunch], description="Crunches.")


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("page-live") / "plait.db"
    app = create_app(
        {"cruncher": _cruncher()},
        store=SqliteStore(db),
        api_keys={KEY: "alice"},
        ui=True,
        cancel_poll=0.05,
    )
    with ServerThread(app) as running:
        yield running.url


@pytest.fixture
def gate() -> Iterator[None]:
    GO.clear()
    CRUNCHING.clear()
    yield
    GO.set()


def _rows(page: Any, selector: str) -> Any:
    return page.locator(f"#events {selector}")


def test_a_run_in_flight_survives_a_reload_and_goes_on(
    page: Any, base_url: str, gate: None
) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "cruncher", "crunch the table")
    expect(_rows(page, ".tool-call")).to_have_count(2)  # tally, then crunch
    run_id = page.locator('#run-facts dd[data-fact="run"]').inner_text()
    listed = page.locator(f'#live button.live-run[data-run="{run_id}"]')
    expect(listed).to_contain_text("cruncher")

    page.reload()  # the page starts again, mid-run: it follows the run again by itself
    expect(_rows(page, ".user")).to_contain_text("crunch the table")
    expect(_rows(page, ".fork")).to_have_text(f"re-attached to run {run_id}")
    expect(_rows(page, ".tool-call")).to_have_count(2)  # what came before the reload
    expect(page.locator('#run-facts dd[data-fact="status"]')).to_have_text("running")
    expect(page.locator("#stop")).to_be_visible()
    GO.set()  # the run goes on: what comes now is drawn as it comes
    expect(_rows(page, ".tool-result").last).to_contain_text("crunched 7 rows")
    expect(_rows(page, ".final")).to_contain_text("All 7 rows crunched.")
    expect(page.locator('#run-facts dd[data-fact="status"]')).to_have_text("completed")
    expect(listed).to_have_count(0)
    page.reload()  # an ended run is not followed again
    expect(page.locator("#agent option")).not_to_have_count(0)
    expect(_rows(page, ".fork")).to_have_count(0)


def test_a_listed_run_is_followed_and_stopped_from_the_list(
    page: Any, base_url: str, gate: None
) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    with client(base_url, KEY) as http:  # a run another client started
        body = {"input": "crunch elsewhere", "session_id": "elsewhere", "deltas": True}
        other = BackgroundStream(http, "/v1/agents/cruncher/runs", body)
        assert other.started.wait(WAIT) and CRUNCHING.wait(WAIT)
    listed = page.locator(f'#live button.live-run[data-run="{other.checkpoint_id}"]')
    expect(listed).to_contain_text("elsewhere")  # it appears on its own
    listed.click()
    expect(page.locator("#session-id")).to_have_text("elsewhere")
    # the request from its checkpoint (saved after its first step), then its events
    expect(_rows(page, ".user")).to_contain_text("crunch elsewhere")
    expect(_rows(page, ".tool-call")).to_have_count(2)
    page.click(f'#live button.stop-run[data-run="{other.checkpoint_id}"]')
    expect(page.locator('#run-facts dd[data-fact="status"]')).to_have_text("cancelled")
    expect(_rows(page, ".stopped")).to_have_count(1)
    assert other.join()[-1][1]["status"] == "cancelled"  # its own client saw the same end
    stopped = page.locator(f'#inbox button[data-run="{other.checkpoint_id}"]')
    expect(stopped).to_have_attribute("data-status", "cancelled")


def test_a_run_with_an_assistant_is_re_attached_through_join_stream(
    page: Any, base_url: str, gate: None
) -> None:
    from playwright.sync_api import expect

    with client(base_url, KEY) as http:
        config = {"configurable": {"max_iterations": 5}}
        body = {"graph_id": "cruncher", "name": "careful", "config": config}
        made = http.post("/assistants", json=body).json()
    sign_in(page, base_url)
    page.select_option("#agent", "cruncher")
    page.select_option("#assistant", made["assistant_id"])
    send(page, "cruncher", "crunch carefully")
    # its events come whole (no text streamed), the last one once the next is there
    expect(_rows(page, ".tool-result")).to_have_text("← tally result7 rows")
    run_id = page.locator('#run-facts dd[data-fact="run"]').inner_text()
    page.reload()  # the Agent Protocol's run: re-attached with join_stream, from its start
    expect(_rows(page, ".fork")).to_have_text(f"re-attached to run {run_id}")
    expect(_rows(page, ".tool-result")).to_have_text("← tally result7 rows")
    expect(page.locator("#assistant option:checked")).to_have_text("careful (version 1)")
    GO.set()
    expect(_rows(page, ".final")).to_contain_text("All 7 rows crunched.")
    expect(page.locator('#run-facts dd[data-fact="status"]')).to_have_text("completed")


AGENT = """
from plait import ChatModelAgent
from plait.testing import ScriptedModel, reply

VERSION = "v1"


def build():
    model = ScriptedModel([reply(f"hello from {VERSION}")], per_run=True)
    return ChatModelAgent("greeter", model, description=f"greets ({VERSION})")
"""


def test_an_open_page_follows_a_plait_dev_reload(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    from tests.cli.support import ServeProcess

    pytest.importorskip("watchfiles")
    project = tmp_path / "project"
    project.mkdir()
    source = project / "agent.py"
    source.write_text(AGENT)
    command = ServeProcess(["agent.py:build"], tmp_path / "logs", command="dev", cwd=project)
    with command as dev:
        page.goto(dev.url + "/")
        expect(page.locator("#agent-description")).to_have_text("greets (v1)")
        page.evaluate("window.loadedOnce = true")  # gone if the page were loaded again
        source.write_text(source.read_text().replace('VERSION = "v1"', 'VERSION = "v2"'))
        expect(page.locator("#agent-description")).to_have_text("greets (v2)", timeout=WAIT * 6000)
        expect(page.locator("#app-status")).to_contain_text("The app was reloaded")
        assert page.evaluate("window.loadedOnce") is True
        page.fill("#input", "hi")
        page.click("#send")
        expect(_rows(page, ".final")).to_contain_text("hello from v2")
