"""A live run's queue: what the run sends its response, read by one reader at a time.

A run's task puts (never waits); its response's task reads. An `asyncio.Queue` serves any
number of readers and writers, each with a future of its own; a run's queue has only the
one reader, so `RunQueue` keeps its items in a deque and makes a future only when the
reader has to wait for one (the reader is woken once, however many items come meanwhile).
A run whose last event is known as it comes `hold`s its queue: that event waits for the
run's end, to go out with it in one write (`release`, as the end is queued).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

__all__ = ["RunQueue"]

T = TypeVar("T")


class RunQueue(Generic[T]):
    """A queue of items with one reader at a time (see the module's docstring)."""

    __slots__ = ("_held", "_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._waiter: asyncio.Future[None] | None = None  # the waiting reader's
        self._held = False

    def put_nowait(self, item: T) -> None:
        """Queue `item`; wake the reader if it waits (unless the queue is held)."""
        self._items.append(item)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not self._held and not waiter.done():
            waiter.set_result(None)  # (done: woken already, or its reader left)

    def hold(self) -> None:
        """Queue what comes without waking the reader, until `release`."""
        self._held = True

    def release(self) -> None:
        """Wake the reader for what was queued while held (if it waits), and from now on."""
        if self._held:
            self._held = False
            if self._items:
                self._wake()

    def empty(self) -> bool:
        """Whether no item is queued."""
        return not self._items

    def qsize(self) -> int:
        """Return the number of items queued."""
        return len(self._items)

    def get_nowait(self) -> T:
        """Return the first item queued.

        Raises:
            asyncio.QueueEmpty: No item is queued.
        """
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.popleft()

    async def get(self) -> T:
        """Return the first item queued, once there is one.

        Raises:
            RuntimeError: Another reader waits on the queue already.
        """
        items = self._items
        while not items:
            if self._waiter is not None:
                raise RuntimeError("a run's queue has one reader: another one waits on it")
            self._waiter = waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        return items.popleft()
