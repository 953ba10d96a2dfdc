"""MemoryStore passes the conformance suite."""

from __future__ import annotations

import pytest

from plait.stores import MemoryStore
from plait.stores.conformance import CHECKS, Check


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_memory_store_conforms(check: Check) -> None:
    async with MemoryStore() as store:
        await check(store)
