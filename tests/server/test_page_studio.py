"""What LangGraph Studio and `adk web` users look for, on the dev page in a real headless
Chromium: an input form built from the agent's input schema and a history of inputs;
assistants (configurations and their versions) a run uses; state edited at an event, then a
fork; a graph drawn whole with its answer (not its state); the store, memory and usage views."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import ChatModelAgent, Message
from plait.examples.teams import research_graph
from plait.memory import RecallTool, SqliteMemoryService
from plait.server import create_app
from plait.stores import SqliteStore
from plait.testing import FunctionModel, reply
from plait.tools.base import ToolInfo
from tests.server.page_browser import KEY, send, sign_in
from tests.server.support import ServerThread, client
from tests.server.test_page_runs import page_agents

pytestmark = pytest.mark.timeout(120)


def _echo(messages: list[Message], tools: list[ToolInfo]) -> Message:
    """Answer with the instruction the model was given and the person's last words."""
    system = next((m.content for m in messages if m.role == "system"), "")
    said = next(m.content for m in reversed(messages) if m.role == "user")
    return reply(f"[{system}] {said}")


def _agents(memory: SqliteMemoryService) -> dict[str, Any]:
    helper = ChatModelAgent(
        "helper",
        FunctionModel(_echo),
        instruction="You help {customer} in a {tone?} tone.",
        description="Helps a customer.",
        tools=[RecallTool(memory)],
    )
    return {**page_agents(), "helper": helper, "research": research_graph()}


@pytest.fixture(scope="module")
def memory_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("memory") / "memory.db"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, memory_db: Path) -> Iterator[str]:
    db = tmp_path_factory.mktemp("page-studio") / "plait.db"
    keys = {KEY: "alice", "bob-key": "bob"}
    agents = _agents(SqliteMemoryService(memory_db))
    app = create_app(agents, store=SqliteStore(db), api_keys=keys, ui=True)
    with ServerThread(app) as running:
        yield running.url


def _rows(page: Any, selector: str) -> Any:
    return page.locator(f"#events {selector}")


def _view(page: Any, name: str) -> None:
    page.click(f'#views button[data-view="{name}"]')


def test_the_input_form_follows_the_schema_and_keeps_a_history(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    page.select_option("#agent", "helper")
    customer, tone = page.locator("#field-customer"), page.locator("#field-tone")
    expect(customer).to_have_attribute("required", "")  # `{customer}` is required
    expect(tone).not_to_have_attribute("required", "")  # `{tone?}` is not
    expect(page.locator("#field-user_id")).to_have_count(1)  # it recalls memories
    page.fill("#input", "hello")
    page.click("#send")
    expect(page.locator("#notice")).to_have_text("customer is required.")
    customer.fill("Ann")
    tone.fill("warm")
    page.click("#send")
    expect(_rows(page, ".final")).to_contain_text("[You help Ann in a warm tone.] hello")

    page.reload()  # the history is kept in the browser
    page.select_option("#agent", "helper")
    page.click("#history-toggle")
    past = page.locator("#input-history button.past-input")
    expect(past).to_have_count(1)
    expect(past).to_contain_text("hello")
    expect(past).to_contain_text('"customer":"Ann"')
    past.click()
    expect(page.locator("#input")).to_have_value("hello")
    expect(page.locator("#field-customer")).to_have_value("Ann")
    expect(page.locator("#field-tone")).to_have_value("warm")

    page.select_option("#agent", "research")  # a graph: a field per key of its state
    expect(page.locator("#field-requirements")).to_have_count(1)
    expect(page.locator("#field-report")).to_have_count(1)
    expect(page.locator("#field-customer")).to_have_count(0)


def test_assistants_are_created_edited_versioned_and_run_with(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    page.select_option("#agent", "helper")
    _view(page, "assistants")
    expect(page.locator("#assistants-agent")).to_have_text("helper")
    page.fill("#assistant-name", "french")
    page.fill("#assistant-instruction", "Answer {customer} in French.")
    page.click("#assistant-save")
    card = page.locator("#assistants-list li.assistant", has_text="french")
    expect(card).to_contain_text("version 1")
    expect(card.locator(".assistant-config")).to_contain_text("Answer {customer} in French.")

    card.locator("button.edit").click()  # an edit is a new version
    page.fill("#assistant-instruction", "Answer {customer} in German.")
    page.click("#assistant-save")
    expect(card).to_contain_text("version 2")
    card.locator("button.use").click()  # runs now use it: back on the run view
    expect(page.locator("#run-view")).to_be_visible()
    expect(page.locator("#assistant option:checked")).to_have_text("french (version 2)")
    page.fill("#field-customer", "Ann")
    send(page, "helper", "bonjour")
    expect(_rows(page, ".final").last).to_contain_text("[Answer Ann in German.] bonjour")
    expect(page.locator('#run-facts dd[data-fact="assistant"]')).to_have_text("french (version 2)")

    _view(page, "assistants")
    card.locator("button.versions").click()
    versions = card.locator(".assistant-versions li")
    expect(versions).to_have_count(2)
    card.locator('.assistant-versions li[data-version="1"] button.latest').click()
    expect(card).to_contain_text("version 1")
    card.locator("button.use").click()
    page.fill("#field-customer", "Ann")
    send(page, "helper", "encore")
    expect(_rows(page, ".final").last).to_contain_text("[Answer Ann in French.] encore")
    page.select_option("#assistant", "")  # the agent as served again
    page.fill("#field-customer", "Bo")
    send(page, "helper", "plain")
    expect(_rows(page, ".final").last).to_contain_text("[You help Bo in a  tone.] plain")


def test_the_state_at_any_event_is_edited_and_forked(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "counter", "count")
    expect(_rows(page, ".final")).to_contain_text("counted")
    results = _rows(page, ".tool-result")
    results.first.click()
    expect(page.locator("#state-values")).to_contain_text('"count": 1')
    expect(page.locator("#state-step")).to_contain_text("as of step")
    _rows(page, "li.row.text").last.click()  # after the last kept step: at the run's end
    expect(page.locator("#state-step")).to_contain_text("at the run's end")
    expect(page.locator("#state-values")).to_contain_text('"count": 2')
    _rows(page, ".tool-call").first.click()  # before the first step: as the run started
    expect(page.locator("#state-step")).to_contain_text("as the run started")
    expect(page.locator("#state-fork")).to_be_disabled()

    results.first.click()
    page.fill("#state-edit", '{"count": 10}')
    page.click("#state-fork")
    expect(_rows(page, ".fork")).to_contain_text("from step 1")
    expect(_rows(page, ".tool-result").last).to_have_text("← bump resultcount=11")
    expect(_rows(page, ".final")).to_contain_text("counted")


def test_a_graph_is_drawn_whole_and_answers_with_its_answer(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    send(page, "research", "durable agents")
    final = _rows(page, ".final")
    expect(final.locator(".text")).to_have_text(
        "Findings: teams and durable pauses are what users miss most."
    )
    expect(final.locator("details.output")).not_to_have_attribute("open", "")  # the state, folded
    node = _rows(page, ".custom").first
    expect(node).to_contain_text("node collect_requirements")
    node.click()  # the graph's state at a node's update
    expect(page.locator("#state-graph")).to_contain_text('"requirements": "topic: durable agents"')

    page.click("#topology summary")
    picture = page.locator("#topology-svg")
    boxes = {
        name: picture.locator(f'g.node[data-name="{name}"] rect').bounding_box()
        for name in ("__start__", "collect_requirements", "research_team", "generate_report")
    }
    end = picture.locator('g.node[data-name="__end__"] rect').bounding_box()
    assert all(end["x"] > box["x"] for box in boxes.values())  # __end__ comes last
    xs = [boxes[name]["x"] for name in boxes]
    assert xs == sorted(xs)  # the nodes in the order the graph runs them
    view = page.locator("#topology-view").bounding_box()
    for box in [*boxes.values(), end]:  # nothing clipped
        assert view["x"] <= box["x"] and box["x"] + box["width"] <= view["x"] + view["width"]
    expect(
        picture.locator('path.edge.implicit[data-target="research_graph/__end__"]')
    ).to_have_count(1)


def test_the_store_view_writes_lists_searches_and_deletes(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    _view(page, "store")
    page.fill("#store-namespace", "prefs/ann")
    page.fill("#store-key", "colour")
    page.fill("#store-value", '{"likes": "deep blue"}')
    page.click("#store-put button")
    row = page.locator('#store-items tr[data-key="colour"]')
    expect(row).to_contain_text("prefs/ann")
    expect(row).to_contain_text('"likes": "deep blue"')
    expect(page.locator("#store-namespaces button")).to_have_text(["prefs/ann"])
    page.fill("#store-query", "green")
    page.click("#store-search button")
    expect(page.locator("#store-items tr")).to_have_count(0)
    page.fill("#store-query", "blue")
    page.click("#store-search button")
    expect(row).to_have_count(1)
    with client(base_url, KEY) as http:  # the page wrote through the Agent Protocol's store
        item = http.get("/store/items", params={"namespace": "prefs.ann", "key": "colour"})
        assert item.json()["value"] == {"likes": "deep blue"}
    row.locator("button.delete").click()
    expect(page.locator("#store-items tr")).to_have_count(0)
    expect(page.locator("#store-namespaces li")).to_have_text(["no item is stored"])


async def _remember(path: Path) -> None:
    """Save a memory of alice's and one of bob's (in the file the server's agent recalls from)."""
    memory = SqliteMemoryService(path)
    try:
        await memory.add("alice", "Alice prefers window seats on trains.")
        await memory.add("bob", "Bob prefers aisle seats.")
    finally:
        await memory.close()


def test_the_memory_view_searches_the_callers_memories(
    page: Any, base_url: str, memory_db: Path
) -> None:
    import asyncio

    from playwright.sync_api import expect

    saving = threading.Thread(target=asyncio.run, args=(_remember(memory_db),))
    saving.start()  # on a loop of its own (the browser's driver has one here)
    saving.join()
    sign_in(page, base_url)
    _view(page, "memory")
    page.fill("#memory-query", "seats")
    page.click("#memory-form button")
    items = page.locator("#memory-items li.memory")
    expect(items).to_have_count(1)  # alice's, never bob's
    expect(items).to_contain_text("Alice prefers window seats on trains.")
    expect(page.locator("#memory-status")).to_have_text("1 memory of user alice")


def test_the_usage_view_shows_the_callers_model_calls(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    with client(base_url, "bob-key") as bob:  # bob's calls are not alice's to see
        bob.post("/v1/agents/counter/runs", json={"input": "count", "stream": False})
    sign_in(page, base_url)
    send(page, "counter", "count")
    expect(_rows(page, ".final")).to_contain_text("counted")
    with client(base_url, KEY) as http:
        rows = http.get("/v1/usage").json()["rows"]
        groups = http.get("/v1/usage", params={"group_by": "agent"}).json()["groups"]
    assert {row["user"] for row in rows} == {"alice"}
    _view(page, "usage")
    table = page.locator("#usage-table")
    expect(table.locator("tbody tr")).to_have_count(len(rows))  # each model call of alice's
    expect(table.locator("thead th")).to_contain_text(["user", "agent", "model"])
    expect(table.locator("tbody")).not_to_contain_text("bob")
    expect(page.locator("#usage-status")).to_have_text(f"{len(rows)} model calls")
    page.select_option("#usage-group", "agent")
    page.click("#usage-form button")
    counter = table.locator("tbody tr", has_text="counter")
    calls = next(group["model_calls"] for group in groups if group["agent"] == "counter")
    expect(counter.locator("td").nth(1)).to_have_text(str(calls))
