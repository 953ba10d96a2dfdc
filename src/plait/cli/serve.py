"""`plait serve` and `plait web`: the HTTP API of `plait.server.create_app` under uvicorn.

The store (`--store`, default `sqlite:///plait.db`) is checked before the server starts,
the address is bound before the app starts (a port in use is a usage error), and the start
line on stderr gives the URL (with `--port 0`, the port the system chose). On SIGTERM the
server stops taking connections, ends open event streams, gives requests
`GRACEFUL_SECONDS` to finish and its runs ten seconds to reach a safe point (they stay
resumable), then closes the store; the exit code is 0. Ctrl-C does the same within
`plait.cli.stop.stop_seconds()` (one second): what has not stopped by then is abandoned,
and the exit code is 130.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import signal
import socket
import sys
import threading
import webbrowser
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import typer

from plait.cli.stop import EXIT_STOPPED, arm, exit_now, say_stopped, stop_seconds
from plait.cli.store import check_store, shown_url
from plait.cli.target import load_targets
from plait.errors import UsageError
from plait.stores import Store, from_url

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

    from plait.server.config import ServerConfig

__all__ = [
    "GRACEFUL_SECONDS",
    "ServeOptions",
    "need_server_extra",
    "read_api_keys",
    "serve_command",
]

#: Seconds uvicorn gives open requests to finish when the server stops.
GRACEFUL_SECONDS = 10
_INSTALL = 'pip install "plait[server]"'
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """What `plait serve` (or `web`, `dev`: `command`, which messages name) was asked for."""

    targets: list[str]
    host: str
    port: int
    store_url: str
    api_keys: str | None
    ui: bool
    open_browser: bool = False
    allowed_hosts: tuple[str, ...] | None = None
    a2a: bool = False
    command: str = "serve"
    config: str | None = None  # a config file (`plait.server.config`)
    run_lease: float | None = None


def read_api_keys(path: str) -> dict[str, str]:
    """Return the bearer key -> user id pairs of an API-keys file.

    The file holds one `KEY USER_ID` pair per line; `#` starts a comment, blank lines are
    skipped.

    Raises:
        UsageError: The file cannot be read, holds no keys, or a line is malformed (the
            message names the line, never the key).
    """
    from plait.server.users import check_api_keys

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"--api-keys {path}: cannot read it ({reason})") from None
    keys: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        fields = raw.split("#", 1)[0].split()
        if not fields:
            continue
        where = f"--api-keys {path} line {number}"
        if len(fields) != 2:
            raise UsageError(f"{where}: expected 'KEY USER_ID', got {len(fields)} fields")
        key, user = fields
        if key in keys:
            raise UsageError(f"{where}: this key is already given to user {keys[key]!r}")
        try:
            check_api_keys({key: user})
        except UsageError as exc:
            raise UsageError(f"{where}: {exc.message}") from None
        keys[key] = user
    if not keys:
        raise UsageError(f"--api-keys {path} holds no keys; write one 'KEY USER_ID' per line")
    return keys


def _listen(host: str, port: int) -> socket.socket:
    """Bind the server's socket (the app starts only once this worked)."""
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port} is not a port (0 to 65535; 0 picks a free one)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        raise UsageError(
            f"cannot listen on {host}:{port}: {reason}; pass another --port (or --host)"
        ) from None
    return sock


def _url(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def _config(app: FastAPI, host: str, sock: socket.socket) -> uvicorn.Config:
    """Return how uvicorn serves `app` on the listening socket `sock`."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=sock.getsockname()[1],
        timeout_graceful_shutdown=GRACEFUL_SECONDS,
        log_level="info",
    )


def _build(options: ServeOptions, store: Store) -> tuple[FastAPI, list[str]]:
    """Return the app for the options' targets and keys, and the names of its agents."""
    try:
        from plait.server import create_app
        from plait.server.leases import DEFAULT_LEASE
    except ImportError as exc:  # pragma: no cover - plait.server reports its own extra
        raise UsageError(
            f"plait {options.command} needs the server extra: {_INSTALL} ({exc})"
        ) from None
    if options.run_lease is not None and not options.run_lease > 0:
        raise UsageError(f"--run-lease {options.run_lease:g} must be a positive number of seconds")
    agents = load_targets(options.targets)
    _check_names(options.targets, [agent.name for agent in agents])
    keys = read_api_keys(options.api_keys) if options.api_keys is not None else None
    hosts = None if options.allowed_hosts is None else list(options.allowed_hosts)
    config = _read_config(options, keys is not None)
    app = create_app(
        agents,
        store=store,
        api_keys=keys or config.api_keys,
        ui=options.ui,
        allowed_hosts=hosts,
        a2a=options.a2a,
        quotas=config.quotas,
        admin_keys=config.admin_keys,
        webhook_secret=config.webhook_secret,
        webhook_allow=config.webhook_allow,
        run_lease=DEFAULT_LEASE if options.run_lease is None else options.run_lease,
    )
    return app, [agent.name for agent in agents]


def _read_config(options: ServeOptions, keyed: bool) -> ServerConfig:
    """Return the settings of `--config` (none without it)."""
    from plait.server.config import ServerConfig, read_config

    if options.config is None:
        return ServerConfig()
    config = read_config(options.config)
    if keyed and (config.api_keys is not None or config.admin_keys is not None):
        raise UsageError(
            f"--config {options.config} holds API keys: give keys there or with --api-keys, "
            "not both"
        )
    return config


def _check_names(targets: list[str], names: list[str]) -> None:
    """Refuse two targets whose agents have one name (the API names agents by name)."""
    seen: dict[str, str] = {}
    for target, name in zip(targets, names, strict=True):
        if name in seen:
            raise UsageError(
                f"TARGETs {seen[name]!r} and {target!r} are both an agent named {name!r}; "
                "agents are served by name, so serve one of them or rename one"
            )
        seen[name] = target


def need_server_extra(command: str) -> None:
    """Refuse to start `plait COMMAND` when the server extra is not installed.

    Raises:
        UsageError: uvicorn or FastAPI is missing; the message names the command, what is
            missing and the extra to install.
    """
    missing = [name for name in ("uvicorn", "fastapi") if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(
            f"plait {command} needs {' and '.join(missing)} (the server extra): {_INSTALL}"
        )


def serve_command(options: ServeOptions) -> int:
    """Serve the targets until SIGTERM or Ctrl-C; return the exit code.

    Raises:
        UsageError: A target, the API-keys file, the store or the address is not usable.
    """
    need_server_extra(options.command)
    seconds = stop_seconds()
    store = from_url(options.store_url)
    app, names = _build(options, store)
    check_store(options.store_url)
    sock = _listen(options.host, options.port)
    config = _config(app, options.host, sock)
    server = _stoppable(config, seconds)
    with _signals_kept(server):
        keyed = app.state.plait.api_keys is not None
        start = _Start(_url(sock, options.host), names, options, keyed)
        asyncio.run(_serve(server, sock, store, start))
    if getattr(server, "interrupted", False):
        say_stopped()
        return EXIT_STOPPED
    return 0


def _stoppable(config: uvicorn.Config, seconds: float) -> uvicorn.Server:
    """Return a uvicorn server that Ctrl-C stops within `seconds` (a second Ctrl-C: at
    once); SIGTERM stops it gracefully, as uvicorn does."""
    import uvicorn

    class StoppableServer(uvicorn.Server):
        interrupted = False

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if sig == signal.SIGINT:
                if self.interrupted:
                    exit_now()
                self.interrupted = True
                arm(seconds)
                self.config.timeout_graceful_shutdown = max(1, int(seconds / 2))
            super().handle_exit(sig, frame)

    return StoppableServer(config)


@dataclass(frozen=True, slots=True)
class _Start:
    """What the start line tells: the URL, the agents' names, the options."""

    url: str
    names: list[str]
    options: ServeOptions
    keyed: bool = False  # the server has API keys (from --api-keys or --config)


async def _serve(server: uvicorn.Server, sock: socket.socket, store: Store, start: _Start) -> None:
    """Run the server on `sock`; say where once it is up; close the store at the end."""
    await serve_on(server, sock, store, _announce(server, start))


async def serve_on(
    server: uvicorn.Server,
    sock: socket.socket,
    store: Store,
    announce: Coroutine[Any, Any, None],
) -> None:
    """Run `server` on `sock` with `announce` (what says where, once it is up) alongside;
    close the store at the end."""
    saying = asyncio.ensure_future(announce)
    try:
        await server.serve(sockets=[sock])
    finally:
        saying.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await saying
        with contextlib.suppress(Exception):
            await store.close()


async def _announce(server: uvicorn.Server, start: _Start) -> None:
    """Print the start line once the server is up (and open the page for `plait web`)."""
    while not server.started:  # noqa: ASYNC110 - uvicorn's Server has a flag, no event
        await asyncio.sleep(0.05)
    url, options = start.url, start.options
    names = ", ".join(start.names)
    keyed = bool(options.api_keys) or start.keyed
    keys = "API keys required" if keyed else "no API keys: every request is user 'local'"
    typer.echo(
        f"plait: serving {names} at {url} (store {shown_url(options.store_url)}; {keys})",
        err=True,
    )
    if not keyed and options.host not in _LOOPBACK:
        typer.echo(
            f"plait: warning: {options.host} is reachable by others; pass --api-keys", err=True
        )
    if options.ui:
        if importlib.util.find_spec("plait.server.page") is None:
            typer.echo("plait: this build has no dev page; serving the API only", err=True)
        elif options.open_browser:
            await asyncio.to_thread(_open_page, url + "/")


def _open_page(url: str) -> None:
    """Open `url` in a browser when there is a display; say where it is either way."""
    headless = sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
    opened = False
    if not headless:
        try:
            opened = webbrowser.open(url)
        except Exception:  # no usable browser: the URL is printed below
            opened = False
    if not opened:
        typer.echo(f"plait: open {url} in a browser", err=True)


@contextlib.contextmanager
def _signals_kept(server: uvicorn.Server) -> Iterator[None]:
    """Pass SIGINT and SIGTERM to the server while uvicorn does not watch them (as it
    starts), and ignore them once uvicorn has handled them (it raises them again when it
    stops), so the store is closed and the exit code is the server's."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum: int, frame: FrameType | None) -> None:
        if not getattr(server, "interrupted", False) and not server.should_exit:
            server.handle_exit(signum, frame)

    kept = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)
