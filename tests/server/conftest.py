"""Fixtures of the server tests: one real server per test module, clients for two users."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from plait.server import create_app
from plait.stores import SqliteStore
from tests.server.page_browser import NO_CHROMIUM, VIEWPORT, chromium, find_chromium
from tests.server.support import WAIT, Controls, ServerThread, client, make_agents

KEYS = {"key-alice": "alice", "key-bob": "bob"}
LIMIT = 4096  # the test server's max_request_bytes


@pytest.fixture(scope="module")
def shared_controls() -> Controls:
    """Return the switches of the module's server's tools."""
    return Controls()


@pytest.fixture
def controls(shared_controls: Controls) -> Iterator[Controls]:
    """Return the switches, reset for this test (and released after it)."""
    shared_controls.reset()
    yield shared_controls
    shared_controls.release.set()


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, shared_controls: Controls) -> Iterator[str]:
    """Start a server with API keys on a SQLite file; return its URL."""
    store = SqliteStore(tmp_path_factory.mktemp("server") / "plait.db")
    app = create_app(
        make_agents(shared_controls), store=store, api_keys=KEYS, max_request_bytes=LIMIT
    )
    with ServerThread(app) as running:
        yield running.url


@pytest.fixture
def alice(base_url: str) -> Iterator[httpx.Client]:
    """Return a client with alice's key."""
    with client(base_url, "key-alice") as http:
        yield http


@pytest.fixture
def bob(base_url: str) -> Iterator[httpx.Client]:
    """Return a client with bob's key."""
    with client(base_url, "key-bob") as http:
        yield http


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Return a headless Chromium (the system's, driven by Playwright), for the page tests."""
    executable = find_chromium()
    if executable is None:
        pytest.skip(NO_CHROMIUM)
    pytest.importorskip("playwright.sync_api", reason="Playwright is not installed: plait[dev]")
    with chromium(executable) as found:
        yield found


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """Return a fresh page (its own localStorage) in the browser."""
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT * 1000)
    context = browser.new_context(viewport=VIEWPORT)
    yield context.new_page()
    context.close()
