"""The dev page's developer loop, in a real headless Chromium: the inbox of paused runs (across
reloads and workers), sessions per agent, Stop, streamed text, raw event JSON, the state at an
event, the picture of the agents, the pause under the agent that asked, and each error once."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from plait import ChatModelAgent, Message, Team, interrupt, run_context, tool
from plait.core.agent import Agent
from plait.server import create_app
from plait.stores import SqliteStore
from plait.testing import FunctionModel, ScriptedModel, call, reply
from plait.tools.base import ToolInfo
from tests.server.page_browser import (
    KEY,
    send,
    sign_in,
)
from tests.server.review_team import review_team
from tests.server.support import WAIT, ServerThread

pytestmark = pytest.mark.timeout(120)

GATE = threading.Event()  # lets the streaming model write its second chunk


class GatedModel(FunctionModel):
    """Streams "Hello " at once and "streamed world" once `GATE` is set."""

    def __init__(self) -> None:
        super().__init__(lambda messages, tools: reply("Hello streamed world"))

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        await self.generate(messages, tools=tools, **options)
        yield Message(role="assistant", content="Hello ")
        await asyncio.to_thread(GATE.wait, WAIT)
        yield Message(role="assistant", content="streamed world")


@tool
def ask(question: str) -> str:
    """Ask a person.

    Args:
        question: What to ask.
    """
    return json.dumps(interrupt({"question": question}))


@tool
async def work() -> str:
    """Work until the run is asked to stop."""
    ctx = run_context()
    deadline = time.monotonic() + WAIT
    while not ctx.cancelled and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    return "stopped" if ctx.cancelled else "worked"


@tool
def bump() -> str:
    """Count one more in the session values and the team state."""
    ctx = run_context()
    count = int(ctx.session_values.get("count", 0)) + 1
    ctx.session_values["count"] = count
    ctx.state["bumps"] = count
    return f"count={count}"


def _fail(messages: list[Message], tools: list[ToolInfo]) -> Message:
    raise RuntimeError("the model is down")


def page_agents() -> dict[str, Agent]:
    """The agents of these tests (fresh objects; every script replays for each run)."""
    approver = ChatModelAgent(
        "approver",
        ScriptedModel([call("ask", {"question": "Ship it?"}), reply("approved")], per_run=True),
        description="Asks a person before shipping.",
        tools=[ask],
    )
    lead = ChatModelAgent(
        "lead",
        ScriptedModel([call("approver", {"request": "ship v2"}), reply("shipped")], per_run=True),
        description="Ships releases.",
    )
    worker = ChatModelAgent(
        "worker", ScriptedModel([call("work", {}), reply("done")], per_run=True), tools=[work]
    )
    counter = ChatModelAgent(
        "counter",
        ScriptedModel([call("bump", {}), call("bump", {}), reply("counted")], per_run=True),
        tools=[bump],
    )
    return {
        "code_review": review_team(),
        "shipping": Team.coordinator(lead, [approver], name="shipping"),
        "streamer": ChatModelAgent("streamer", GatedModel(), description="Streams."),
        "worker": worker,
        "counter": counter,
        "breaker": ChatModelAgent("breaker", FunctionModel(_fail), description="Fails."),
    }


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("page-runs") / "plait.db"


def _serve(db: Path) -> ServerThread:
    app = create_app(
        page_agents(), store=SqliteStore(db), api_keys={KEY: "alice"}, ui=True, cancel_poll=0.05
    )
    return ServerThread(app)


@pytest.fixture(scope="module")
def base_url(db: Path) -> Iterator[str]:
    with _serve(db) as running:
        yield running.url


def _rows(page: Any, selector: str) -> Any:
    return page.locator(f"#events {selector}")


def test_a_paused_run_survives_a_reload_and_another_worker(
    page: Any, base_url: str, db: Path
) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "shipping", "ship the release")
    expect(page.locator("#interrupts form")).to_have_count(1)
    run_id = page.locator('#run-facts dd[data-fact="run"]').inner_text()
    inbox = page.locator(f'#inbox button[data-run="{run_id}"]')
    expect(inbox).to_contain_text("Ship it?")
    expect(inbox).to_contain_text("shipping")

    page.reload()  # the run is still in the inbox, read from the store
    expect(inbox).to_contain_text("Ship it?")
    page.select_option("#agent", "counter")
    inbox.click()  # reopening selects its agent and shows its interrupt panel
    expect(page.locator("#agent")).to_have_value("shipping")
    expect(page.locator("#interrupts form")).to_contain_text("approver needs an answer")
    expect(_rows(page, ".interrupt")).to_have_attribute("data-asker", "approver")

    with _serve(db) as other:  # another worker on the same store lists and resumes it
        other_page = page.context.new_page()
        sign_in(other_page, other.url)
        other_inbox = other_page.locator(f'#inbox button[data-run="{run_id}"]')
        other_inbox.click()
        other_page.click("#interrupts button.approve")
        expect(other_page.locator("#events .final")).to_contain_text("shipped")
        expect(other_inbox).to_have_count(0)
        other_page.close()
    page.click("#refresh-inbox")
    expect(inbox).to_have_count(0)


def test_the_pause_is_drawn_under_the_agent_whose_tool_asked(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "shipping", "ship it")
    pause = _rows(page, ".interrupt")
    expect(pause).to_have_count(1)
    expect(pause).to_contain_text("paused: approver asks a person")
    expect(pause).to_have_attribute("data-depth", "1")  # the member's level, not the lead's
    author = page.locator("#events .row.agent").last
    expect(author).to_have_attribute("data-agent", "approver")
    expect(page.locator('#topology-svg g.node.paused[data-name="approver"]')).to_have_count(1)


def test_sessions_are_listed_per_agent(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "counter", "count please")
    expect(_rows(page, ".final")).to_contain_text("counted")
    counter_session = page.locator("#session-id").inner_text()
    expect(page.locator(f'#sessions button[data-session="{counter_session}"]')).to_have_count(1)
    page.select_option("#agent", "code_review")
    expect(page.locator("#sessions-agent")).to_have_text("code_review")
    expect(page.locator(f'#sessions button[data-session="{counter_session}"]')).to_have_count(0)
    expect(page.locator("#session-id")).not_to_have_text(counter_session)  # a new session
    page.select_option("#agent", "counter")
    page.click(f'#sessions button[data-session="{counter_session}"]')
    expect(page.locator("#agent")).to_have_value("counter")
    expect(_rows(page, ".user")).to_contain_text("count please")


def test_stop_cancels_the_live_run(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    expect(page.locator("#stop")).to_be_hidden()
    send(page, "worker", "work hard")
    expect(_rows(page, ".tool-call")).to_contain_text("work")
    page.click("#stop")
    expect(page.locator('#run-facts dd[data-fact="status"]')).to_have_text("cancelled")
    expect(_rows(page, ".stopped")).to_have_count(1)
    expect(_rows(page, ".stopped")).to_contain_text("cancelled at a safe point")
    expect(page.locator("#stop")).to_be_hidden()


def test_streamed_text_shows_as_it_arrives(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    GATE.clear()
    try:
        sign_in(page, base_url)
        send(page, "streamer", "say hello")
        streaming = _rows(page, ".row.streaming")
        expect(streaming).to_have_text("Hello")  # the first chunk, while the model writes
        expect(_rows(page, ".final")).to_have_count(0)
    finally:
        GATE.set()
    expect(_rows(page, ".final")).to_contain_text("Hello streamed world")
    expect(_rows(page, ".row.streaming")).to_have_count(0)
    expect(_rows(page, "li.row.text")).to_have_text("Hello streamed world")


def test_raw_json_and_the_state_at_an_event(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "counter", "count")
    expect(_rows(page, ".final")).to_contain_text("counted")
    expect(page.locator("#steps button")).not_to_have_count(0)
    results = _rows(page, ".tool-result")
    expect(results).to_have_count(2)

    results.first.locator("button.raw").click()
    raw = _rows(page, ".raw-json")
    expect(raw).to_have_count(1)
    shown = json.loads(raw.locator("pre").inner_text())
    assert shown["agent_name"] == "counter"
    assert shown["output"]["message"]["message"]["content"] == "count=1"
    results.first.locator("button.raw").click()
    expect(raw).to_have_count(0)

    results.first.click()
    expect(page.locator("#state-values")).to_contain_text('"count": 1')
    expect(page.locator("#state-team")).to_contain_text('"bumps": 1')
    expect(results.first).to_have_attribute("aria-selected", "true")
    results.last.click()
    expect(page.locator("#state-values")).to_contain_text('"count": 2')
    expect(page.locator("#state-team")).to_contain_text('"bumps": 2')
    _rows(page, ".tool-call").first.click()  # before the first bump
    expect(page.locator("#state-values")).not_to_contain_text("count")


def test_the_agents_are_drawn_as_a_picture(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    page.select_option("#agent", "code_review")
    picture = page.locator("#topology-svg")
    expect(picture).to_have_attribute("aria-label", "topology of code_review")
    nodes = picture.locator("g.node")
    expect(nodes).to_have_count(4)
    expect(picture.locator('g.node.kind-team[data-name="code_review"]')).to_have_count(1)
    manager = picture.locator('g.node[data-name="review_manager"]')
    expect(manager).to_contain_text("tools: post_review")
    transfers = picture.locator("path.edge.transfer")
    expect(transfers).to_have_count(1)  # triage and review_manager, both ways
    expect(transfers).to_have_attribute("marker-start", "url(#arrow)")
    nested = 'line.edge.agent_tool[data-target="code_review/review_manager/security_reviewer"]'
    expect(picture.locator(nested)).to_have_count(1)
    send(page, "code_review", "review PR 7")
    expect(page.locator("#interrupts form")).to_have_count(1)
    expect(picture.locator('g.node.paused[data-name="review_manager"]')).to_have_count(1)


def test_a_failed_run_shows_its_error_once_and_keeps_its_turn(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "breaker", "please work")
    expect(page.locator('#run-facts dd[data-fact="status"]')).to_have_text("failed")
    errors = _rows(page, ".error")
    expect(errors).to_have_count(1)
    expect(errors).to_contain_text("the model is down")
    session_id = page.locator("#session-id").inner_text()
    page.reload()
    button = page.locator(f'#sessions button[data-session="{session_id}"]')
    button.click()
    expect(_rows(page, ".user")).to_have_text("youplease work")
