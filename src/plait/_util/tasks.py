"""`current_task(loop)`: the task running on `loop`, as `asyncio.current_task()` returns it,
without the Python call that function is on CPython 3.11 (where it reads a dict of running
tasks by loop). Later versions implement `asyncio.current_task` in C: it is used as it is."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import BuiltinFunctionType
from typing import Any

__all__ = ["current_task"]

_running: dict[asyncio.AbstractEventLoop, asyncio.Task[Any]] | None = getattr(
    asyncio.tasks, "_current_tasks", None
)

current_task: Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any] | None]
if isinstance(asyncio.current_task, BuiltinFunctionType) or not isinstance(_running, dict):
    current_task = asyncio.current_task
else:
    current_task = _running.get
