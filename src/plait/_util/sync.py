"""Running a coroutine to the end from sync code, in an event loop of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from plait.errors import UsageError

__all__ = ["run_in_new_loop"]

_T = TypeVar("_T")


def run_in_new_loop(make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run the coroutine `make()` returns in a new event loop and return its result.

    Raises:
        UsageError: An event loop is already running in this thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    raise UsageError(
        "the *_sync methods start their own event loop; inside async code use "
        "`await runner.run(...).collect()` or iterate `runner.run(...)`"
    )
