"""Fixtures of the Agent Protocol tests: a served app and its users' clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.protocols.agent_protocol.kinds import make_kinds
from tests.protocols.agent_protocol.support import Served, serve


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """A real server of the test agents, with the clients of users ann and bob."""
    async with serve(tmp_path) as found:
        yield found


@pytest.fixture
async def kinds(tmp_path: Path) -> AsyncIterator[Served]:
    """A real server of agents of every kind (`kinds.make_kinds`), with ann's and bob's
    clients."""
    async with serve(tmp_path, make_kinds()) as found:
        yield found
