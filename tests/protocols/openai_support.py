"""What the tests of the OpenAI-compatible routes share: a real server for some agents, and
clients of the official `openai` package for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import openai
import pytest

from plait.core.agent import Agent
from plait.server import create_app
from plait.stores import from_url
from tests.server.support import WAIT, ServerThread

KEYS = {"key-alice": "alice", "key-bob": "bob"}
HEADER = "x-plait-checkpoint-id"

#: Makes an `openai.AsyncOpenAI` for a server's URL (`key`, then client options).
OpenAIFor = Callable[..., openai.AsyncOpenAI]


@contextmanager
def serve(
    *agents: Agent, keys: dict[str, str] | None = KEYS, limit: int = 1_048_576
) -> Iterator[str]:
    """Serve `agents` on a free port (in-memory store); yield the base URL."""
    app = create_app(
        list(agents), store=from_url("memory://"), api_keys=keys, max_request_bytes=limit
    )
    with ServerThread(app) as running:
        yield running.url


@pytest.fixture
async def openai_for() -> AsyncIterator[OpenAIFor]:
    """Return a factory of `openai.AsyncOpenAI` clients (closed after the test)."""
    made: list[openai.AsyncOpenAI] = []

    def make(url: str, key: str = "key-alice", **options: Any) -> openai.AsyncOpenAI:
        made.append(openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=key, timeout=WAIT, **options))
        return made[-1]

    yield make
    for made_client in made:
        await made_client.close()
