"""`raised`: check that a call is refused, as the conformance suites of stores and memory
services do."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["raised"]

_E = TypeVar("_E", bound=BaseException)


async def raised(error: type[_E], call: Awaitable[object] | Callable[[], Awaitable[object]]) -> _E:
    """Return the `error` that awaiting `call` (or `call()`) raises.

    Raises:
        AssertionError: It returned instead (the message shows what), or raised another error.
    """
    try:
        result = await (call() if callable(call) else call)
    except error as exc:
        return exc
    raise AssertionError(f"the call returned {result!r}; expected {error.__name__}")
