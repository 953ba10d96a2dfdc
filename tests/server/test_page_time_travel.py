"""Time travel on the dev page, in a real headless Chromium: a run's steps are listed, a step
shows its state, and a fork from it with edited session values shows the new run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.server import create_app
from plait.stores import SqliteStore
from tests.server.page_browser import KEY, sign_in
from tests.server.page_browser import send as send_message
from tests.server.support import ServerThread, client
from tests.server.test_time_travel import counting_agent

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = Path(tmp_path_factory.mktemp("page-travel")) / "plait.db"
    app = create_app(counting_agent(), store=SqliteStore(db), api_keys={KEY: "alice"}, ui=True)
    with ServerThread(app) as running:
        yield running.url


def test_step_back_through_a_run_and_fork_it_with_other_values(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    expect(page.locator("#history")).to_be_hidden()
    send_message(page, "calc", "go")
    expect(page.locator("#events .final")).to_contain_text("results: 1, 2, 3")
    steps = page.locator("#steps button")
    expect(steps).to_have_count(3)
    expect(steps.nth(0)).to_contain_text("step 1")
    expect(steps.nth(0)).to_contain_text("calc")
    run_id = page.locator('#run-facts dd[data-fact="run"]').inner_text()

    steps.nth(1).click()  # the state at step 2: its session values and last event
    expect(page.locator("#step-title")).to_have_text("Step 2 (calc)")
    expect(page.locator("#step-values")).to_have_text("{}")
    expect(page.locator("#step-event")).to_have_text("calc: add result: 2")
    expect(page.locator("#step-event-json")).to_contain_text('"agent_name": "calc"')
    expect(steps.nth(1)).to_have_attribute("aria-current", "true")

    page.fill("#fork-values", "[1, 2]")
    page.click("#fork")
    expect(page.locator("#notice")).to_contain_text("must be a JSON object")
    page.fill("#fork-values", "{not json")
    page.click("#fork")
    expect(page.locator("#notice")).to_contain_text("not JSON")

    page.fill("#fork-values", '{"unit": "km"}')
    page.click("#fork")
    expect(page.locator("#events .fork")).to_contain_text(f"fork of run {run_id} from step 2")
    expect(page.locator("#events .final")).to_contain_text("results: 1, 2, 3km")
    expect(page.locator("#notice")).to_be_hidden()
    expect(page.locator('#run-facts dd[data-fact="status"]')).to_have_text("completed")
    fork_id = page.locator('#run-facts dd[data-fact="run"]').inner_text()
    assert fork_id != run_id
    # the fork's own steps are listed now: the step it started from, then its own
    expect(steps).to_have_count(2)
    expect(steps.nth(0)).to_contain_text("step 2")
    steps.nth(0).click()
    expect(page.locator("#step-values")).to_contain_text('"unit": "km"')

    with client(base_url, KEY) as http:  # the original is as it was
        original = http.get(f"/v1/runs/{run_id}/history").json()
        assert [s["step"] for s in original] == [1, 2, 3]
        assert all(s["session_values"] == {} for s in original)
        assert http.get(f"/v1/runs/{fork_id}").json()["final_output"] == "results: 1, 2, 3km"


def test_a_refused_fork_is_reported(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send_message(page, "calc", "go")
    expect(page.locator("#steps button")).to_have_count(3)
    page.locator("#steps button").first.click()
    page.evaluate("localStorage.setItem('plait.apiKey', 'wrong-key')")
    page.click("#fork")
    expect(page.locator("#notice")).to_contain_text("needs a valid API key")
    expect(page.locator("#send")).to_be_enabled()
