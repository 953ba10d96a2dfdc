"""The dev page (`create_app(..., ui=True)`): served offline, and driven in a real headless
Chromium against a real server running a code-review team on scripted models."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from plait import ChatModelAgent
from plait.server import create_app
from plait.stores import from_url
from plait.testing import ScriptedModel
from tests.server.page_browser import (
    KEY,
    REVIEW_REQUEST,
    page_server,
    send,
    sign_in,
    start_review,
)
from tests.server.review_team import FINAL_REVIEW
from tests.server.support import client

pytestmark = pytest.mark.timeout(120)

SCRIPTS = [
    *("api", "events", "run", "approvals", "pause", "trace", "history", "sidebar", "live"),
    *("topology", "inputs", "assistants", "store", "usage", "eval", "app"),
]
PAGE_FILES = {
    "/": "text/html",
    **{f"/ui/{name}.js": "text/javascript" for name in SCRIPTS},
    "/ui/style.css": "text/css",
}


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Serve the page's test agents (with an API key) and the dev page."""
    with page_server(tmp_path_factory.mktemp("page") / "plait.db") as url:
        yield url


def test_page_and_its_files_are_served_without_a_key(base_url: str) -> None:
    with client(base_url) as http:
        assert http.get("/v1/agents").status_code == 401
        for path, media_type in PAGE_FILES.items():
            response = http.get(path)
            assert response.status_code == 200, path
            assert response.headers["content-type"].startswith(media_type)
            assert "script-src 'self'" in response.headers["content-security-policy"]
            assert response.headers["x-content-type-options"] == "nosniff"
        assert '<script src="/ui/app.js"' in http.get("/").text


def test_page_loads_nothing_from_another_server(base_url: str) -> None:
    with client(base_url) as http:
        html = http.get("/").text
        for path in PAGE_FILES:
            # the SVG namespace is a name, not an address; url(#id) names a part of the page
            text = http.get(path).text.replace('"http://www.w3.org/2000/svg"', "")
            assert not re.search(r"https?:|url\((?!#)|@import", text), path
        links = re.findall(r'(?:src|href)="([^"]*)"', html)
        assert sorted(links) == sorted(PAGE_FILES.keys() - {"/"})
        policy = http.get("/").headers["content-security-policy"]
        assert "default-src 'none'" in policy
        assert "connect-src 'self'" in policy


def test_page_script_never_turns_server_text_into_html(base_url: str) -> None:
    with client(base_url) as http:
        scripts = {path: http.get(path) for path in PAGE_FILES if path.endswith(".js")}
    for path, response in scripts.items():
        assert response.status_code == 200, path
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in response.text, (path, sink)


def test_without_ui_there_is_no_page() -> None:
    agent = ChatModelAgent("a", ScriptedModel([]), description="A.")
    local = "http://localhost"  # a server without keys answers loopback names only
    with TestClient(create_app([agent], store=from_url("memory://")), base_url=local) as http:
        assert http.get("/").status_code == 404
        assert http.get("/ui/app.js").status_code == 404
    app = create_app([agent], store=from_url("memory://"), ui=True)
    with TestClient(app, base_url=local) as http:
        assert http.get("/").status_code == 200
        paths = http.get("/openapi.json").json()["paths"]
        assert "/" not in paths
        assert not any(path.startswith("/ui/") for path in paths)


def _rows(page: Any, selector: str) -> Any:
    return page.locator(f"#events {selector}")


def _check_paused_review(page: Any) -> None:
    """The paused review shows both levels, the transfer, the handoff, usage and the form."""
    from playwright.sync_api import expect

    expect(_rows(page, '.agent[data-agent="triage"]')).to_have_attribute("data-depth", "0")
    manager = _rows(page, '.agent[data-agent="review_manager"]')
    expect(manager).to_have_count(2)  # before and after the call of its security reviewer
    expect(manager.first).to_have_attribute("data-depth", "0")
    nested = _rows(page, '.agent[data-agent="security_reviewer"]')
    expect(nested).to_have_attribute("data-depth", "1")
    path = ("code_review", "triage", "review_manager", "security_reviewer")
    expect(nested).to_contain_text(" \u203a ".join(path))  # the run path
    expect(_rows(page, '.tool-call[data-depth="1"]')).to_contain_text("sql_injection_checker")
    expect(_rows(page, '.tool-result[data-depth="1"]')).to_contain_text("possible SQL injection")
    expect(_rows(page, '.text[data-depth="1"]')).to_contain_text("security: possible SQL")
    expect(_rows(page, ".transfer")).to_have_text("transfer → review_manager (a code review)")
    expect(_rows(page, ".handoff")).to_have_text("handoff triage → review_manager")
    timeline = page.locator("#handoffs li")
    expect(timeline).to_have_count(1)
    for part in ("triage → review_manager", "reason: a code review", "1 step · 0 tokens"):
        expect(timeline).to_contain_text(part)
    expect(page.locator('#run-facts dd[data-fact="status"]')).to_have_text("paused")
    expect(page.locator('#run-facts dd[data-fact="tokens"]')).to_have_text("40 in · 12 out")
    form = page.locator("#interrupts form")  # the question beside what led to it
    expect(form.locator(".question")).to_have_text("Post this review to the PR?")
    expect(form.locator(".request")).to_have_text(REVIEW_REQUEST)
    expect(form.locator(".agent-path")).to_have_text("code_review \u203a review_manager")
    expect(form.locator(".tool")).to_have_text("post_review")
    expect(form.locator(".arguments")).to_contain_text("Possible SQL injection in the users query.")


def test_code_review_on_the_page(page: Any, base_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page.goto(base_url + "/")
    expect(page.locator("#notice")).to_contain_text("needs a valid API key")
    start_review(page, base_url)
    _check_paused_review(page)
    page.screenshot(path=tmp_path / "dev-page.png")
    assert (tmp_path / "dev-page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    page.click("#interrupts button.approve")
    expect(_rows(page, ".final")).to_contain_text(FINAL_REVIEW)
    expect(_rows(page, ".tool-result").last.locator("pre")).to_have_text("posted")
    expect(page.locator("#interrupts form")).to_have_count(0)
    expect(page.locator('#run-facts dd[data-fact="status"]')).to_have_text("completed")
    expect(page.locator('#run-facts dd[data-fact="tokens"]')).to_have_text("160 in · 42 out")

    session_id = page.locator("#session-id").inner_text()
    page.reload()  # the key is remembered; the session is in the list
    expect(page.locator("#api-key")).to_have_value(KEY)
    page.click(f'#sessions button[data-session="{session_id}"]')
    expect(page.locator("#session-id")).to_have_text(session_id)
    expect(_rows(page, ".user")).to_contain_text(REVIEW_REQUEST)
    expect(_rows(page, ".text").last).to_have_text(FINAL_REVIEW)
    expect(_rows(page, '.agent[data-agent="review_manager"]')).to_have_count(1)
    timeline = page.locator("#handoffs li")
    expect(timeline).to_have_count(2)  # the handoff, then the answer closing the chain
    expect(timeline.first).to_contain_text("triage → review_manager")
    expect(timeline.last).to_contain_text("review_manager → END")


def test_page_shows_server_text_as_text_and_answers_with_json(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    markup = "<img src=x onerror=\"document.title='pwned'\"> pick <b>one</b>"
    send(page, "asker", markup)
    form = page.locator("#interrupts form")
    expect(form.locator(".question")).to_have_text(markup)
    expect(form.locator(".arguments")).to_contain_text(json.dumps(markup))
    form.locator("textarea").fill("{not json")
    form.locator("button.value").click()
    expect(page.locator("#notice")).to_contain_text("not JSON")
    form.locator("textarea").fill('{"pick": 2}')
    form.locator("button.value").click()
    expect(_rows(page, ".final")).to_contain_text('you said {"pick": 2}')

    send(page, "asker", "again?")
    page.click("#interrupts button.reject")
    expect(_rows(page, ".final").last).to_contain_text('you said "reject"')
    expect(_rows(page, ".user").first).to_contain_text(markup)
    assert page.locator("#run-view img, #run-view b").count() == 0
    assert page.title() == "plait dev page"


def test_page_reports_a_refused_run(page: Any, base_url: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url)
    page.evaluate("localStorage.setItem('plait.apiKey', 'wrong-key')")
    send(page, "asker", "hello")
    expect(page.locator("#notice")).to_contain_text("needs a valid API key")
    expect(page.locator("#send")).to_be_enabled()
