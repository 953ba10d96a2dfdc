"""`plait dev`: serve agents with the dev page and reload them when a source file changes.

The command (the watcher) binds the address once and keeps it, and runs the app in a child
process of its own (`python -m plait.cli.dev`), which imports the TARGETs fresh and serves on
the inherited socket. When a Python file under the working directory changes, the watcher
stops the child (as SIGTERM stops `plait serve`: its runs reach a safe point and stay
resumable) and starts a new one on the same socket and the same store, so paused runs survive
a reload and requests made meanwhile wait for the new app instead of failing. A child that
cannot start after an edit (a syntax error, a missing name) is reported and the watcher
waits for the next edit; one that cannot start before any edit ends `plait dev` with its
exit code, as `plait serve` would. The child stops on its own when the watcher dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import typer

from plait.cli.serve import (
    GRACEFUL_SECONDS,
    ServeOptions,
    _build,
    _config,
    _listen,
    _serve,
    _signals_kept,
    _Start,
    _url,
    need_server_extra,
)
from plait.cli.store import check_store
from plait.errors import PlaitError, UsageError
from plait.stores import from_url

if TYPE_CHECKING:
    import uvicorn
    from watchfiles import Change

__all__ = ["dev_command"]

#: How often (seconds) the watcher looks whether the app's process has stopped.
POLL_SECONDS = 0.5
#: The most seconds a stopping app gets before it is killed (its runs get ten to pause).
STOP_SECONDS = GRACEFUL_SECONDS + 15
_INSTALL = 'pip install "plait[server]"'


def dev_command(options: ServeOptions) -> int:
    """Serve the targets with the dev page, reloading on each change; return the exit code.

    Raises:
        UsageError: watchfiles or uvicorn is missing, or the store or the address is not
            usable.
    """
    need_server_extra(options.command)
    if importlib.util.find_spec("watchfiles") is None:
        raise UsageError(f"plait dev needs watchfiles: {_INSTALL}")
    check_store(options.store_url)
    sock = _listen(options.host, options.port)
    with sock, _Watcher(sock, options) as watcher:
        return watcher.run()


class _Watcher:
    """Runs the app in a child process and starts a new one when a source file changes."""

    def __init__(self, sock: socket.socket, options: ServeOptions) -> None:
        sock.listen(128)  # connections made while the app reloads wait in the backlog
        sock.set_inheritable(True)
        self.sock = sock
        self.options = options
        self.root = Path.cwd()
        self.stop = threading.Event()
        self.child: subprocess.Popen[bytes] | None = None
        # the child stops when the read end of this pipe sees the watcher gone
        self.lifeline_read, self.lifeline_write = os.pipe()

    def __enter__(self) -> _Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_child()
        os.close(self.lifeline_read)
        os.close(self.lifeline_write)

    def run(self) -> int:
        """Watch until SIGTERM or Ctrl-C (which raises `KeyboardInterrupt`)."""
        from watchfiles import PythonFilter, watch

        self._start_child()
        typer.echo(
            f"plait: dev: watching the Python files under {self.root}; the app reloads when "
            "one changes",
            err=True,
        )
        reloaded = False
        reported = False
        with self._sigterm_stops():
            for changes in watch(
                self.root,
                watch_filter=PythonFilter(),
                stop_event=self.stop,
                rust_timeout=int(POLL_SECONDS * 1000),
                yield_on_timeout=True,
            ):
                if changes:
                    typer.echo(f"plait: dev: {self._changed(changes)} changed; reloading", err=True)
                    self._stop_child()
                    self._start_child()
                    reloaded, reported = True, False
                    continue
                code = None if self.child is None else self.child.poll()
                if code is None or reported:
                    continue
                if not reloaded:
                    return code  # the app never started: as `plait serve` would end
                typer.echo(
                    f"plait: dev: the app stopped (exit {code}); fix it and save: plait dev "
                    "reloads on the next change",
                    err=True,
                )
                reported = True
        return 0

    def _changed(self, changes: set[tuple[Change, str]]) -> str:
        paths = sorted({path for _, path in changes})
        shown = [os.path.relpath(path, self.root) for path in paths[:3]]
        more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
        return ", ".join(shown) + more

    def _start_child(self) -> None:
        fd = self.sock.fileno()
        payload = json.dumps({**asdict(self.options), "fd": fd, "lifeline": self.lifeline_read})
        self.child = subprocess.Popen(
            [sys.executable, "-m", "plait.cli.dev", payload],
            pass_fds=(fd, self.lifeline_read),
        )

    def _stop_child(self) -> None:
        child, self.child = self.child, None
        if child is None or child.poll() is not None:
            return
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    @contextlib.contextmanager
    def _sigterm_stops(self) -> Iterator[None]:
        """Make SIGTERM end the watch (and so stop the app) instead of the process."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def stop(signum: int, frame: FrameType | None) -> None:
            self.stop.set()

        kept = signal.signal(signal.SIGTERM, stop)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, kept)


def _serve_child(payload: dict[str, Any]) -> int:
    """Serve the options' targets on the inherited socket until SIGTERM or the watcher dies."""
    import uvicorn

    fd, lifeline = int(payload.pop("fd")), int(payload.pop("lifeline"))
    payload["allowed_hosts"] = _tuple(payload.get("allowed_hosts"))
    options = ServeOptions(**payload)
    sock = socket.socket(fileno=fd)
    store = from_url(options.store_url)
    app, names = _build(options, store)
    config = _config(app, options.host, sock)
    server = uvicorn.Server(config)
    start = _Start(_url(sock, options.host), names, options)
    with _signals_kept(server):
        asyncio.run(_serve_until_orphaned(server, sock, store, start, lifeline))
    return 0


async def _serve_until_orphaned(
    server: uvicorn.Server, sock: socket.socket, store: Any, start: _Start, lifeline: int
) -> None:
    """Serve, and stop as SIGTERM would once the watcher's end of `lifeline` is closed."""
    loop = asyncio.get_running_loop()

    def orphaned() -> None:
        loop.remove_reader(lifeline)
        server.should_exit = True

    loop.add_reader(lifeline, orphaned)  # readable only at end of file: the watcher is gone
    await _serve(server, sock, store, start)


def _tuple(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _main(argv: list[str]) -> int:
    """The app's process: one line and exit 2 for a `PlaitError`, as `plait serve`."""
    try:
        return _serve_child(json.loads(argv[0]))
    except PlaitError as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        typer.echo(f"plait: error: {message}", err=True)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
