"""Run blocking functions on daemon threads that nobody waits for once they are abandoned.

`asyncio.to_thread` uses the loop's default executor, which `asyncio.run` joins when it
ends, and whose threads the interpreter joins at exit: a sync tool still running after its
run was cancelled (or its call timed out) would hold both up until it returns. The threads
here are daemon threads, reused while they are idle and never joined, so an abandoned call
only costs its thread until the function returns by itself.

A loop that must decide the order of its work itself (a Temporal workflow's: it takes no
callback from another thread, and its replay must make the same steps) calls
`call_sync_inline()` first: from then on, in that context and the tasks it starts, the
functions run inline, on the loop's own thread, when they are awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["call_sync_inline", "run_in_thread"]

_T = TypeVar("_T")
_IDLE_SECONDS = 60.0  # an idle thread ends after this long
_inline: contextvars.ContextVar[bool] = contextvars.ContextVar("plait_sync_inline", default=False)


def call_sync_inline() -> None:
    """Make `run_in_thread` call its functions inline in this context (and in the tasks
    started from it): for a loop that cannot be woken from another thread."""
    _inline.set(True)


class _Pool:
    """Daemon threads taking jobs from one queue; a new thread when none is idle."""

    def __init__(self) -> None:
        self.pid = os.getpid()  # threads do not survive a fork: a child makes its own pool
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # one token per idle thread

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job` on an idle thread, or on a new one."""
        if not self._idle.acquire(blocking=False):
            threading.Thread(target=self._work, name="plait-tool", daemon=True).start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                if self._idle.acquire(blocking=False):
                    return  # took its own token: no job was promised to it
                continue  # a job is on its way to an idle thread
            job()
            del job
            self._idle.release()


_pool: _Pool | None = None  # made on first use


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller stopped waiting
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


async def run_in_thread(fn: Callable[..., _T], /, **kwargs: Any) -> _T:
    """Call `fn(**kwargs)` on a daemon thread with this context's variables; cancelling the
    await abandons the thread (the function runs on to its end, and nothing waits for it).
    After `call_sync_inline()`, call it here instead."""
    global _pool
    if _inline.get():
        return fn(**kwargs)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()
    context = contextvars.copy_context()

    def job() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = context.run(fn, **kwargs)
        except BaseException as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
            loop.call_soon_threadsafe(_settle, future, result, error)

    if _pool is None or _pool.pid != os.getpid():
        _pool = _Pool()
    _pool.submit(job)
    return await future
