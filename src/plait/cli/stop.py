"""Ctrl-C for the `plait` commands: every command stops within a second, with exit code 130.

The first Ctrl-C asks the command to stop. A run in progress is stopped as the stop button
stops it (`RunStream.cancel`: tools in flight are cancelled, the run is saved at its safe
point), so the command can print the `plait resume` line; a prompt stops waiting at once; a
server stops taking requests. Whatever is still going when `stop_seconds()` have passed (a
model call that does not return, a tool's thread that cannot be killed, a blocked event loop)
is abandoned: the process ends with exit code 130 then. A second Ctrl-C ends it at once.

`PLAIT_STOP_SECONDS` changes that time (default `STOP_SECONDS`): a store that takes longer to
save a checkpoint needs more.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from plait.errors import UsageError

if TYPE_CHECKING:
    from plait.run.runner import RunStream

__all__ = [
    "EXIT_STOPPED",
    "STOP_ENV",
    "STOP_SECONDS",
    "Stopper",
    "exit_now",
    "guard",
    "stop_seconds",
]

#: The exit code of a command stopped with Ctrl-C.
EXIT_STOPPED = 130
#: Seconds from the first Ctrl-C to the end of the process, at most.
STOP_SECONDS = 1.0
#: The environment variable that changes `STOP_SECONDS`.
STOP_ENV = "PLAIT_STOP_SECONDS"
_STOPPED = "plait: stopped"
_said = threading.Event()  # "plait: stopped" was written
_armed = threading.Lock()
_deadline: threading.Timer | None = None


def stop_seconds() -> float:
    """Return the seconds a stopped command has to finish (`PLAIT_STOP_SECONDS`, else 1).

    Raises:
        UsageError: `PLAIT_STOP_SECONDS` is not a positive number.
    """
    raw = os.environ.get(STOP_ENV, "").strip()
    if not raw:
        return STOP_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise UsageError(f"{STOP_ENV}={raw!r} must be a positive number of seconds")
    return seconds


def say_stopped() -> None:
    """Write "plait: stopped" on stderr (once per process)."""
    if _said.is_set():
        return
    _said.set()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        sys.stderr.write(_STOPPED + "\n")
        sys.stderr.flush()


def exit_now(code: int = EXIT_STOPPED) -> NoReturn:
    """End the process at once with `code`, saying "plait: stopped" first if not yet said.

    Nothing else runs: no thread is waited for. It writes straight to the file descriptor,
    so it works from any thread, even while another one holds a stream's lock.
    """
    if not _said.is_set():
        _said.set()
        with contextlib.suppress(OSError):
            os.write(2, (_STOPPED + "\n").encode())
    os._exit(code)


def arm(seconds: float) -> None:
    """Make sure the process ends (exit code 130) `seconds` from now, whatever it is doing."""
    global _deadline
    with _armed:
        if _deadline is not None:
            return
        _deadline = threading.Timer(seconds, exit_now)
        _deadline.daemon = True
        _deadline.start()


@contextlib.contextmanager
def guard(seconds: float | None = None) -> Iterator[None]:
    """Handle Ctrl-C outside an event loop for the duration of a command.

    The first Ctrl-C raises `KeyboardInterrupt` (the command ends with exit code 130) and
    makes sure the process ends within `seconds`; a second one ends it at once. Outside the
    main thread (a test's runner) nothing is changed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    limit = stop_seconds() if seconds is None else seconds

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if _deadline is not None:
            exit_now()
        arm(limit)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class Stopper:
    """Runs a command's event loop so that Ctrl-C stops it in time (see the module).

    `run(main)` runs the coroutine function `main` in a new event loop and returns its exit
    code, or `EXIT_STOPPED` once Ctrl-C was pressed. The runs `watch`ed while it goes are
    stopped as the stop button does (saved, with a `RunCancelled` last event), and get half
    of `seconds` for it; then `main` is cancelled; at `seconds` the process ends.
    """

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = stop_seconds() if seconds is None else seconds
        self.requested = False
        self._runs: list[RunStream] = []
        self._task: asyncio.Task[int] | None = None

    @contextlib.contextmanager
    def watch(self, stream: RunStream) -> Iterator[RunStream]:
        """Stop `stream`'s run (saving it) when Ctrl-C is pressed while it goes."""
        if self.requested:
            stream.cancel()
        self._runs.append(stream)
        try:
            yield stream
        finally:
            self._runs.remove(stream)

    def request(self) -> None:
        """Ask the command to stop, as Ctrl-C does (a second call ends the process)."""
        if self.requested:
            exit_now()
        self.requested = True
        arm(self.seconds)
        task = self._task
        if not self._runs:
            if task is not None:
                task.cancel()
            return
        for stream in self._runs:
            stream.cancel()
        if task is not None:
            asyncio.get_running_loop().call_later(self.seconds / 2, task.cancel)

    def run(self, main: Callable[[], Coroutine[Any, Any, int]]) -> int:
        """Run `main()` in a new event loop; return its exit code, or `EXIT_STOPPED`."""
        handled = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGINT) if handled else None
        runner = asyncio.Runner()
        loop = runner.get_loop()
        if handled:
            try:
                loop.add_signal_handler(signal.SIGINT, self.request)
            except (NotImplementedError, RuntimeError):  # no signal handlers in this loop
                handled = False
        try:
            code = runner.run(self._main(main))
        except asyncio.CancelledError:
            if not self.requested:
                raise
            code = EXIT_STOPPED
        finally:
            if self.requested:
                say_stopped()  # what is left to wait for is bounded by the deadline
            if handled:
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(signal.SIGINT)
                    signal.signal(signal.SIGINT, previous)
            runner.close()
        return code

    async def _main(self, main: Callable[[], Coroutine[Any, Any, int]]) -> int:
        self._task = asyncio.current_task()
        try:
            code = await main()
        except asyncio.CancelledError:
            if not self.requested:
                raise
            return EXIT_STOPPED
        return EXIT_STOPPED if self.requested else code
