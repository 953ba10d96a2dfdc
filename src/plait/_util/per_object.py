"""`PerObject`: one value per live object, made the first time it is asked for."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PerObject"]

_K = TypeVar("_K")
_V = TypeVar("_V")


class PerObject(Generic[_K, _V]):
    """Call with an object to get its value, made by `make()` on the first call; the value
    is dropped with the object (it is held by a weak reference to the object)."""

    def __init__(self, make: Callable[[], _V]) -> None:
        self._made: weakref.WeakKeyDictionary[_K, _V] = weakref.WeakKeyDictionary()
        self._make = make

    def __call__(self, owner: _K) -> _V:
        found = self._made.get(owner)
        if found is None:
            found = self._made[owner] = self._make()
        return found
