"""Reading a run on the dev page, in a real headless Chromium: the events get the room (the
picture of the agents and the trace fold away), raw JSON opens in place, a pause shows the
request, the agent path, the tool and its arguments beside the question, one inbox holds
every waiting run, and a reopened session or paused run is drawn as the live run was."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from plait import ChatModelAgent, tool
from plait.server import create_app
from plait.stores import SqliteStore
from plait.testing import ScriptedModel, call, reply
from tests.server.page_browser import KEY, VIEWPORT, send, sign_in
from tests.server.support import ServerThread
from tests.server.test_page_runs import page_agents

pytestmark = pytest.mark.timeout(120)


@tool(approval=True)
def deploy(version: str, env: str) -> str:
    """Deploy a version once a person approves.

    Args:
        version: The version.
        env: Where to.
    """
    return f"deployed {version} to {env}"


def _agents() -> dict[str, Any]:
    script = [call("deploy", {"version": "2.4.0", "env": "prod"}), reply("Deployed.")]
    release = ChatModelAgent("release", ScriptedModel(script, per_run=True), tools=[deploy])
    return {**page_agents(), "release": release}


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("page-reading") / "plait.db"
    app = create_app(_agents(), store=SqliteStore(db), api_keys={KEY: "alice"}, ui=True)
    with ServerThread(app) as running:
        yield running.url


def _rows(page: Any, selector: str) -> Any:
    return page.locator(f"#events {selector}")


def _kinds(page: Any) -> list[str]:
    """The kind of each row of the event tree, in order (the person's, an agent's, ...)."""
    kinds: list[str] = page.locator("#events > li.row").evaluate_all(
        "rows => rows.filter(r => !r.classList.contains('fork')).map(r => r.classList[1])"
    )
    return kinds


def test_the_events_get_the_room_and_raw_json_opens_in_place(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    page.select_option("#agent", "code_review")
    expect(page.locator("#topology-svg")).to_have_count(1)
    send(page, "code_review", "review PR 7")
    expect(page.locator("#interrupts form")).to_have_count(1)
    expect(page.locator("#topology")).not_to_have_attribute("open", "")  # folded away
    height = VIEWPORT["height"]
    events = page.locator("#events").bounding_box()
    assert events["height"] > 0.4 * height  # at a pause too, the events keep most of the room
    page.click("#interrupts button.approve")
    expect(_rows(page, ".final")).to_have_count(1)
    events = page.locator("#events").bounding_box()
    assert events["height"] > 0.6 * height

    first = _rows(page, ".tool-call").filter(has_text="sql_injection_checker")
    first.locator("button.raw").click()
    raw = _rows(page, ".raw-json")
    expect(raw).to_have_count(1)
    placed = first.evaluate("row => row.nextElementSibling.classList.contains('raw-json')")
    assert placed  # right under its event, not somewhere else on the page
    box, events = raw.bounding_box(), page.locator("#events").bounding_box()
    assert events["y"] <= box["y"] < events["y"] + events["height"]  # in sight
    expect(raw).to_contain_text('"agent_name": "security_reviewer"')


def test_a_pause_shows_what_is_asked_about_live_and_reopened(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "shipping", "ship the release")
    form = page.locator("#interrupts form")
    expect(form.locator(".question")).to_have_text("Ship it?")
    expect(form.locator(".request")).to_have_text("ship the release")
    expect(form.locator(".agent-path")).to_have_text("shipping \u203a lead \u203a approver")
    expect(form.locator(".tool")).to_have_text("ask")
    expect(form.locator(".arguments")).to_have_text('{"question":"Ship it?"}')
    live = _kinds(page)
    run_id = page.locator('#run-facts dd[data-fact="run"]').inner_text()

    page.reload()
    page.click(f'#inbox button[data-run="{run_id}"]')
    expect(form.locator(".request")).to_have_text("ship the release")  # from its checkpoint
    expect(form.locator(".agent-path")).to_have_text("shipping \u203a lead \u203a approver")
    expect(form.locator(".tool")).to_have_text("ask")
    expect(form.locator(".arguments")).to_have_text('{"question":"Ship it?"}')
    expect(_rows(page, ".user")).to_have_text("youship the release")
    expect(_rows(page, ".tool-call")).to_contain_text("approver")
    assert _kinds(page)[:3] == live[:3] == ["user", "agent", "tool-call"]


def test_one_inbox_holds_the_approvals_and_a_reopened_one_is_drawn_as_live(
    page: Any, base_url: str
) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    expect(page.locator("#approvals")).to_have_count(0)  # no second inbox
    send(page, "release", "ship 2.4.0")
    form = page.locator("#interrupts form")
    expect(form).to_have_attribute("data-kind", "approval")
    live = _kinds(page)
    run_id = page.locator('#run-facts dd[data-fact="run"]').inner_text()
    item = page.locator(f'#inbox button[data-run="{run_id}"]')
    expect(item).to_have_count(1)
    expect(item).to_contain_text("approve deploy?")
    expect(item.locator(".inbox-args")).to_have_text('{"version":"2.4.0","env":"prod"}')

    page.reload()
    item.click()
    expect(form.locator(".tool")).to_have_text("deploy")
    expect(form.locator(".arguments")).to_have_text('{"version":"2.4.0","env":"prod"}')
    expect(form.locator(".request")).to_have_text("ship 2.4.0")
    assert _kinds(page) == live == ["user", "agent", "tool-call", "interrupt"]
    page.locator("#interrupts .approval-note").fill("go")
    page.click('#interrupts button[data-answer="approve"]')
    expect(_rows(page, ".final")).to_contain_text("Deployed.")
    expect(item).to_have_count(0)


def test_a_reopened_session_is_drawn_as_the_live_run(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "counter", "count twice")
    expect(_rows(page, ".final")).to_contain_text("counted")
    live = _kinds(page)
    session_id = page.locator("#session-id").inner_text()
    page.reload()
    page.select_option("#agent", "counter")
    page.click(f'#sessions button[data-session="{session_id}"]')
    expect(_rows(page, ".final")).to_contain_text("counted")
    assert _kinds(page) == live
    assert live == [
        *("user", "agent", "tool-call", "tool-result"),
        *("tool-call", "tool-result", "text", "final"),
    ]
