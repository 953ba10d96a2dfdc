"""The dev page's approvals (driven in a real headless Chromium): the caller's open questions
in the one inbox with the exact arguments, answered with Approve / Reject beside them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.server import create_app
from plait.stores import SqliteStore
from tests.server.page_browser import sign_in
from tests.server.support import ServerThread, client
from tests.server.test_approvals import shop

pytestmark = pytest.mark.timeout(120)

KEYS = {"ann-key": "ann", "ben-key": "ben", "cy-key": "cy"}


@pytest.fixture(scope="module")
def charges() -> list[int]:
    return []


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, charges: list[int]) -> Iterator[str]:
    store = SqliteStore(Path(tmp_path_factory.mktemp("approvals")) / "plait.db")
    app = create_app(shop(charges), store=store, api_keys=KEYS, ui=True)
    with ServerThread(app) as running:
        yield running.url


def _pay(base_url: str, key: str, cents: int) -> dict[str, Any]:
    with client(base_url, key) as http:
        body = {"input": f"pay {cents}", "stream": False}
        summary: dict[str, Any] = http.post("/v1/agents/shop/runs", json=body).json()
    assert summary["status"] == "paused"
    return summary


def _audit(base_url: str, key: str) -> list[dict[str, Any]]:
    with client(base_url, key) as http:
        found: list[dict[str, Any]] = http.get("/v1/audit").json()
    return found


def test_the_approvals_script_never_turns_server_text_into_html(base_url: str) -> None:
    with client(base_url) as http:
        response = http.get("/ui/approvals.js")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/javascript")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in response.text


def _item(page: Any, paused: dict[str, Any]) -> Any:
    """The inbox's item of a paused run."""
    return page.locator(f'#inbox button[data-run="{paused["checkpoint_id"]}"]')


def test_the_inbox_shows_the_exact_arguments_and_approves_or_rejects(
    base_url: str, page: Any, charges: list[int]
) -> None:
    from playwright.sync_api import expect

    first, second = _pay(base_url, "ann-key", 1234), _pay(base_url, "ann-key", 99)
    _pay(base_url, "ben-key", 5)  # ben's question is not ann's
    sign_in(page, base_url, "ann-key")
    items = page.locator('#inbox button[data-kind="approval"]')
    expect(items).to_have_count(2)  # one inbox: the approvals are its paused runs
    expect(page.locator("#approvals")).to_have_count(0)
    one = _item(page, first)
    expect(one).to_contain_text("approve charge?")
    expect(one.locator(".inbox-args")).to_have_text('{"cents":1234}')
    one.click()  # the run opens with the call it asks about beside the question
    form = page.locator("#interrupts form")
    expect(form).to_have_attribute("data-kind", "approval")
    expect(form.locator(".tool")).to_have_text("charge")
    expect(form.locator(".arguments")).to_have_text('{"cents":1234}')
    expect(form.locator(".request")).to_have_text("pay 1234")
    fingerprint = first["interrupts"][0]["info"]["approval"]["fingerprint"]
    expect(form.locator(".fingerprint")).to_have_text(fingerprint)
    form.locator('button[data-answer="approve"]').click()
    expect(page.locator("#events .final")).to_contain_text("result: charged 1234")
    expect(items).to_have_count(1)
    _item(page, second).click()
    page.locator("#interrupts .approval-note").fill("not today")
    page.locator('#interrupts button[data-answer="reject"]').click()
    expect(page.locator("#events .final")).to_contain_text("rejected by ann: not today")
    expect(items).to_have_count(0)
    assert charges == [1234]
    audit = _audit(base_url, "ann-key")
    assert [(e["decision"], e["approver"], e["arguments"]) for e in audit] == [
        ("rejected", "ann", {"cents": 99}),
        ("approved", "ann", {"cents": 1234}),
    ]
    assert _audit(base_url, "ben-key") == []


def test_a_question_asked_while_the_page_is_open_appears_on_its_own(
    base_url: str, page: Any
) -> None:
    from playwright.sync_api import expect

    sign_in(page, base_url, "ben-key")
    paused = _pay(base_url, "ben-key", 42)
    item = _item(page, paused)
    expect(item).to_have_count(1)
    expect(item.locator(".inbox-args")).to_have_text('{"cents":42}')
    with client(base_url, "ben-key") as http:
        inbox = http.get("/v1/approvals").json()
    shown = page.locator('#inbox button[data-kind="approval"]')
    expect(shown).to_have_count(len(inbox))  # ben's questions, and only his


def test_the_run_views_approve_button_answers_with_the_fingerprint(
    base_url: str, page: Any, charges: list[int]
) -> None:
    from playwright.sync_api import expect

    from tests.server.page_browser import send

    sign_in(page, base_url, "ann-key")
    send(page, "shop", "pay 77")
    expect(page.locator("#interrupts form")).to_have_count(1)
    page.click("#interrupts button.approve")
    expect(page.locator("#events")).to_contain_text("result: charged 77")
    assert 77 in charges
    assert _audit(base_url, "ann-key")[0]["arguments"] == {"cents": 77}


def test_the_answer_form_appears_only_once_the_run_has_ended_on_the_page(
    base_url: str, page: Any, charges: list[int]
) -> None:
    """The run's trace loads after its summary; a form drawn before that would ignore a click."""
    from playwright.sync_api import expect

    from tests.server.page_browser import send

    held: list[Any] = []
    page.route("**/v1/runs/*/spans", lambda route: held.append(route))  # left unanswered
    sign_in(page, base_url, "ann-key")
    send(page, "shop", "pay 88")
    expect(page.locator('#run-facts dd[data-fact="status"]')).to_have_text("paused")
    assert page.locator("#interrupts form").count() == 0
    for route in held:
        route.continue_()
    page.unroute("**/v1/runs/*/spans")  # a request still to come goes through
    page.click("#interrupts button.approve")
    expect(page.locator("#events")).to_contain_text("result: charged 88")
    assert 88 in charges


def test_a_key_entered_after_a_refusal_clears_it_and_shows_the_inbox(
    base_url: str, page: Any
) -> None:
    from playwright.sync_api import expect

    paused = _pay(base_url, "cy-key", 300)
    page.goto(base_url + "/")  # no key yet: the inbox cannot be read
    refused = page.locator("#inbox .refused")
    expect(refused).to_contain_text("needs a valid API key")
    page.fill("#api-key", "cy-key")
    page.click("#key-form button")
    expect(_item(page, paused).locator(".inbox-args")).to_have_text('{"cents":300}')
    expect(refused).to_have_count(0)
    expect(page.locator('#inbox button[data-kind="approval"]')).to_have_count(1)
