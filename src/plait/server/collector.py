"""The cyclic garbage collector while an app serves: young collections made rarer.

Python collects its youngest generation every 700 new container objects. A server with
many runs in flight makes that many in a fraction of each run, so the objects of the runs
still going (their frames, events, messages) live through young collections, are moved to
the older generations, and are freed only by full collections, which walk every object the
process holds: with 200 streamed runs at once that was a third of the server's CPU (see
docs/performance.md). While an app serves, the young generation is collected every
`young` new objects instead (`create_app(gc_young=...)`, 50,000 by default), by when most of
a run's objects are gone; the older generations keep their thresholds. The interpreter's
thresholds come back when the last app serving in the process stops.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["DEFAULT_YOUNG", "hold", "release"]

#: New container objects between two young collections while an app serves.
DEFAULT_YOUNG = 50_000

_lock = threading.Lock()
_holders: list[int] = []  # the young thresholds asked for by the apps serving now
_saved: tuple[int, int, int] | None = None  # the thresholds before the first of them


def hold(young: int) -> None:
    """An app starts serving: collect the young generation every `young` new objects (the
    largest any serving app asked for)."""
    global _saved
    with _lock:
        if not _holders:
            _saved = gc.get_threshold()
        _holders.append(young)
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(max(_holders), older, oldest)


def release(young: int) -> None:
    """An app stops serving: the thresholds the others ask for, or the interpreter's."""
    with _lock:
        if young in _holders:
            _holders.remove(young)
        if _holders:
            _, older, oldest = gc.get_threshold()
            gc.set_threshold(max(_holders), older, oldest)
        elif _saved is not None:
            gc.set_threshold(*_saved)
