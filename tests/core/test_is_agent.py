"""`Runner` takes what `isinstance(x, plait.Agent)` takes, for every instance of a class,
though it checks each class's members once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from plait import Agent, Runner
from plait.errors import UsageError


class _Echo:
    """An agent whose name and description are set on each instance."""

    def __init__(self, name: str | None) -> None:
        if name is not None:
            self.name = name
            self.description = "echoes"

    async def run(self, input: Any, ctx: Any) -> AsyncIterator[Any]:
        return
        yield


def test_an_instance_without_a_name_is_refused_after_one_of_its_class_was_taken() -> None:
    assert isinstance(_Echo("a"), Agent)
    Runner(_Echo("a"))  # type: ignore[arg-type]
    nameless = _Echo(None)
    assert not isinstance(nameless, Agent)
    with pytest.raises(UsageError, match="Runner needs an Agent"):
        Runner(nameless)  # type: ignore[arg-type]
    Runner(_Echo("b"))  # type: ignore[arg-type]
