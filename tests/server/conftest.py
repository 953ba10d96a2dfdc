"""Fixtures of the server tests: one real server per test module, clients for two users."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from plait.server import create_app
from plait.stores import SqliteStore
from tests.server.support import Controls, ServerThread, client, make_agents

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
