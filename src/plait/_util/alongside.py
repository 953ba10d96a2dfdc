"""Work that runs alongside other work: a call held until checks pass, checks run together,
and a stream read ahead while they run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

__all__ = ["Prefetch", "all_of", "alongside", "stop_task"]

_T = TypeVar("_T")


async def alongside(call: Awaitable[_T], during: Callable[[], Awaitable[None]]) -> _T:
    """Await `call` while `during()` runs; return its result (or raise its error) once
    `during()` has returned. When `during()` raises, `call` is cancelled and that error
    stands."""
    task = asyncio.ensure_future(call)
    try:
        await during()
        return await task
    finally:
        await stop_task(task)


async def all_of(jobs: Sequence[Callable[[], Awaitable[Any]]]) -> None:
    """Run `jobs` concurrently until all have returned; the first to raise cancels the
    others and its error stands."""
    if len(jobs) == 1:
        await jobs[0]()
        return
    tasks = [asyncio.ensure_future(job()) for job in jobs]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:  # in order, so the same failure wins every time
            error = task.exception() if task in done else None
            if error is not None:
                raise error
    finally:
        for task in tasks:
            await stop_task(task)


async def stop_task(task: asyncio.Future[Any]) -> None:
    """Cancel `task` unless it is done, and wait for it to end; its error is consumed."""
    if not task.done():
        task.cancel()
        await asyncio.wait([task])
    if not task.cancelled():
        task.exception()  # retrieved: a failure nobody awaits is not logged


class Prefetch:
    """A stream read ahead into a buffer by a task of its own, from the moment it is made:
    its chunks are kept until they are read; `aclose` stops the reading and closes the
    stream."""

    __slots__ = ("_queue", "_task")

    def __init__(self, source: AsyncIterator[Any]) -> None:
        self._queue: asyncio.Queue[tuple[bool, Any]] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._pump(source))

    async def _pump(self, source: AsyncIterator[Any]) -> None:
        try:
            async for chunk in source:
                self._queue.put_nowait((True, chunk))
            self._queue.put_nowait((False, None))
        except Exception as exc:
            self._queue.put_nowait((False, exc))
        finally:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()

    def __aiter__(self) -> Prefetch:
        return self

    async def __anext__(self) -> Any:
        more, value = await self._queue.get()
        if more:
            return value
        self._queue.put_nowait((more, value))  # the end stays the end
        if value is None:
            raise StopAsyncIteration
        raise value

    async def aclose(self) -> None:
        """Stop reading ahead and close the stream."""
        await stop_task(self._task)
