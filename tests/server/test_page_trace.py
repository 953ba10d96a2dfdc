"""The dev page's trace: with tracing on, a run's spans drawn as a waterfall below the event
tree, in a real headless Chromium against a real server; hidden with tracing off."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from plait import ChatModelAgent, tool, tracing
from plait.server import create_app
from plait.stores import SqliteStore
from plait.testing import FunctionModel, call, reply
from tests.server.page_browser import KEY, send
from tests.server.page_browser import sign_in as sign_in_with
from tests.server.support import ServerThread

pytestmark = pytest.mark.timeout(120)


@tool
def forecast(city: str) -> str:
    """Tell the weather in a city.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


def _weather(messages: list[Any], tools: Any) -> Any:
    if messages[-1].role == "tool":
        return reply(f"Forecast: {messages[-1].content}.")
    return call("forecast", {"city": messages[-1].content})


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Serve a weather agent with the dev page, tracing on (off again at the end)."""
    agent = ChatModelAgent(
        "weather", FunctionModel(_weather), tools=[forecast], description="Forecasts."
    )
    db = tmp_path_factory.mktemp("trace") / "plait.db"
    app = create_app([agent], store=SqliteStore(db), api_keys={KEY: "alice"}, ui=True)
    tracing.instrument(TracerProvider())
    try:
        with ServerThread(app) as running:
            yield running.url
    finally:
        tracing.uninstrument()


def _bar(row: Any) -> tuple[float, float]:
    """Return the left edge and width of a row's bar, in pixels."""
    box = row.locator(".bar").bounding_box()
    return box["x"], box["width"]


def test_the_trace_of_a_run_is_a_waterfall_below_the_events(
    page: Any, base_url: str, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    sign_in_with(page, base_url)
    expect(page.locator("#trace")).to_be_hidden()
    send(page, "weather", "Paris")
    expect(page.locator("#events .final")).to_contain_text("Forecast: sunny in Paris.")
    rows = page.locator("#spans li")
    expect(rows).to_have_count(4)
    expect(page.locator("#trace")).to_be_visible()
    expect(page.locator("#trace-total")).to_contain_text("4 spans")
    expect(rows.first).to_be_hidden()  # folded away: the events keep the room
    page.click("#trace summary")
    expect(rows.first).to_be_visible()
    names = ["invoke_agent weather", "chat FunctionModel", "execute_tool forecast"]
    expect(rows.locator(".span-name")).to_have_text([names[0], names[1], names[2], names[1]])
    expect(rows.nth(0)).to_have_attribute("data-depth", "0")  # the root
    for index in (1, 2, 3):
        expect(rows.nth(index)).to_have_attribute("data-depth", "1")
    expect(rows.nth(2)).to_have_class("span op-execute_tool")
    for index in range(4):
        expect(rows.nth(index).locator(".ms")).to_contain_text(" ms")
    expect(page.locator("#trace-total")).to_contain_text("4 spans")

    root_left, root_width = _bar(rows.nth(0))
    lefts = []
    for index in (1, 2, 3):
        left, width = _bar(rows.nth(index))
        assert root_left - 1 <= left and left + width <= root_left + root_width + 1
        lefts.append(left)
    assert lefts == sorted(lefts)  # later spans start further right
    track = rows.nth(0).locator(".track").bounding_box()
    assert abs(root_left - track["x"]) <= 1 and abs(root_width - track["width"]) <= 1
    padding = "e => parseFloat(getComputedStyle(e).paddingLeft)"
    indents = [rows.nth(i).locator(".span-name").evaluate(padding) for i in (0, 1)]
    assert indents[0] == 0 < indents[1]  # a child is indented under its parent
    trace_top = page.locator("#trace").bounding_box()["y"]
    events_box = page.locator("#events").bounding_box()
    assert trace_top >= events_box["y"] + events_box["height"] - 1  # below the event tree
    page.screenshot(path=tmp_path / "trace.png")

    tracing.uninstrument()  # the server keeps no spans now: the next run has no trace
    try:
        send(page, "weather", "Oslo")
        expect(page.locator("#events .final")).to_have_count(2)
        expect(page.locator("#trace")).to_be_hidden()
        expect(rows).to_have_count(0)
    finally:
        tracing.instrument(TracerProvider())  # as the module's server expects
