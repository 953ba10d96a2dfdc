"""`POST /v1/eval` and the dev page's Eval panel (driven in a real headless Chromium)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from plait.server import create_app
from plait.stores import MemoryStore
from tests.cli.eval_targets import calculator
from tests.server.page_browser import VIEWPORT, sign_in
from tests.server.support import WAIT, ServerThread, client

pytestmark = pytest.mark.timeout(120)

KEY = "eval-key"
EVALSET = {
    "cases": [
        {
            "id": "sum",
            "input": "add 2 3",
            "expected_tools": [{"name": "add"}],
            "expected_response": "5",
        },
        {
            "id": "wrong-sum",
            "input": "add 2 2",
            "expected_tools": [{"name": "add", "args": {"a": 2, "b": 3}}],
            "expected_response": "5",
        },
    ]
}


def _app() -> Any:
    return create_app([calculator()], store=MemoryStore(), api_keys={KEY: "ana"}, ui=True)


@pytest.fixture
def http() -> Iterator[TestClient]:
    with TestClient(_app(), headers={"authorization": f"Bearer {KEY}"}) as test_client:
        yield test_client


def test_the_route_runs_an_evalset_and_answers_the_report(http: TestClient) -> None:
    response = http.post("/v1/eval", json={"agent": "calculator", "evalset": EVALSET})
    assert response.status_code == 200
    report = response.json()
    assert report["pass_rate"] == 0.5
    ok, wrong = report["cases"]
    assert (ok["id"], ok["passed"], ok["tools"]) == (
        "sum",
        True,
        [{"name": "add", "args": {"a": 2, "b": 3}}],
    )
    assert ok["usage"] == {"input_tokens": 18, "output_tokens": 4}
    assert (wrong["passed"], wrong["trajectory_match"], wrong["response_match"]) == (
        False,
        False,
        False,
    )
    assert wrong["expected"] == {
        "tools": [{"name": "add", "args": {"a": 2, "b": 3}}],
        "response": "5",
    }
    assert set(wrong) - {"expected"} == set(report["cases"][0]) - {"expected"}


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        ({"agent": "nobody", "evalset": EVALSET}, 404, "no agent 'nobody'"),
        ({"agent": "calculator", "evalset": {"cases": [{"id": "x"}]}}, 400, "case 'x': input"),
        (
            {"agent": "calculator", "evalset": {"cases": [{"id": "j", "input": "hi",
             "expected_response": "hi", "response": "judge"}]}},
            400,
            "judge",
        ),
        (
            {"agent": "calculator", "evalset": {"cases": [{"id": "k", "input": "hi",
             "cassette": "/etc/passwd"}]}},
            400,
            "case 'k': cassette",
        ),
        ({"agent": "calculator"}, 422, ""),
    ],
)  # fmt: skip
def test_the_route_refuses_bad_requests(
    http: TestClient, body: dict[str, Any], status: int, text: str
) -> None:
    response = http.post("/v1/eval", json=body)
    assert response.status_code == status
    assert text in response.json()["error"]["message"]


def test_the_route_needs_the_api_key() -> None:
    with TestClient(_app()) as anonymous:
        body = {"agent": "calculator", "evalset": EVALSET}
        assert anonymous.post("/v1/eval", json=body).status_code == 401


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with ServerThread(_app()) as running:
        yield running.url


def test_the_eval_script_never_turns_server_text_into_html(base_url: str) -> None:
    with client(base_url) as http_client:
        response = http_client.get("/ui/eval.js")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/javascript")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in response.text


def test_the_eval_panel_shows_the_pass_rate_and_the_failed_cases_diff(
    base_url: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT * 1000)
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        sign_in(page, base_url, KEY)
        page.click('#views button[data-view="eval"]')  # the Eval view
        page.fill("#eval-input", "{not json")
        page.click("#eval-run")
        expect(page.locator("#eval-summary")).to_contain_text("not JSON")
        page.fill("#eval-input", json.dumps(EVALSET))
        page.click("#eval-run")
        expect(page.locator("#eval-summary")).to_have_text("pass rate 50% (1/2 cases)")
        expect(page.locator("#eval-cases li")).to_have_count(2)
        passed = page.locator('#eval-cases li[data-case="sum"]')
        expect(passed).to_have_class("eval-pass")
        expect(passed.locator(".eval-diff")).to_have_count(0)
        failed = page.locator('#eval-cases li[data-case="wrong-sum"]')
        expect(failed).to_have_class("eval-fail")
        diff = failed.locator(".eval-diff")
        expect(diff).to_contain_text('expected tools add({"a":2,"b":3})')
        expect(diff).to_contain_text('actual tools add({"a":2,"b":2})')
        expect(diff).to_contain_text("expected response 5")
        expect(diff).to_contain_text("actual response 4")
    finally:
        context.close()


def test_the_eval_panel_loads_a_file_and_shows_a_bad_evalset(
    base_url: str, browser: Any, tmp_path: Any
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT * 1000)
    path = tmp_path / "bad.evalset.json"
    path.write_text(json.dumps({"cases": [{"id": "oops", "input": "hi", "trajectory": "fuzzy"}]}))
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        sign_in(page, base_url, KEY)
        page.click('#views button[data-view="eval"]')  # the Eval view
        page.set_input_files("#eval-file", str(path))
        expect(page.locator("#eval-input")).to_have_value(path.read_text())
        page.click("#eval-run")
        expect(page.locator("#eval-summary")).to_contain_text("400: invalid eval set: case 'oops'")
        expect(page.locator("#eval-cases li")).to_have_count(0)
    finally:
        context.close()
