"""One fan-in for concurrent children: run jobs at once, pass on what they emit as it comes.

Used by the ReAct agent (a round of tool calls), the parallel workflow (its lanes) and the
state graph (the nodes of a super-step); the last two pass on only what is emitted, up to
the first error (`emitted`). If a job raises, the others are cancelled and the
exception propagates; when the consumer stops early, every job is cancelled and awaited.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from typing import Any, Generic, TypeVar

__all__ = ["Done", "emitted", "merge"]

_T = TypeVar("_T")
Emit = Callable[[Any], None]


class Done(Generic[_T]):
    """A job finished: its position among the jobs, and what it returned."""

    __slots__ = ("index", "value")

    def __init__(self, index: int, value: _T) -> None:
        self.index = index
        self.value = value


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def merge(jobs: Sequence[Callable[[Emit], Awaitable[_T]]]) -> AsyncGenerator[Any, None]:
    """Run `jobs` concurrently; yield what each emits, and a `Done` as each finishes."""
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def one(index: int, job: Callable[[Emit], Awaitable[_T]]) -> None:
        try:
            queue.put_nowait(Done(index, await job(queue.put_nowait)))
        except BaseException as exc:
            queue.put_nowait(_Failed(exc))
            raise

    tasks = [asyncio.ensure_future(one(i, job)) for i, job in enumerate(jobs)]
    try:
        remaining = len(tasks)
        while remaining:
            item = await queue.get()
            if isinstance(item, _Failed):
                raise item.error
            if isinstance(item, Done):
                remaining -= 1
            yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def emitted(
    jobs: Sequence[Callable[[Emit], Awaitable[object]]], last: Callable[[Any], bool]
) -> AsyncGenerator[Any, None]:
    """Run `jobs` as `merge` does and yield only what they emit, ending after the first item
    `last` accepts (the jobs still running are then cancelled and awaited)."""
    async with aclosing(merge(jobs)) as items:
        async for item in items:
            if isinstance(item, Done):
                continue
            yield item
            if last(item):
                return
