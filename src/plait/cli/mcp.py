"""`plait mcp TARGET...`: serve agents as an MCP server (one tool per agent), on stdio or,
with `--http PORT`, over streamable HTTP at `/mcp`.

On stdio, stdout carries the protocol, so nothing else is written there. Over HTTP the
server listens on `--host` (127.0.0.1 unless told otherwise) and answers only requests
addressed to a loopback name or its own address, and the names given with
`--allowed-host` (the Host guard of `plait serve`): an MCP endpoint has no keys. Ctrl-C
and SIGTERM stop it as they stop `plait serve`. A paused run's checkpoint is kept in the
store (`--store`), to be resumed with `plait resume`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from plait.cli.stop import EXIT_STOPPED, Stopper, say_stopped, stop_seconds
from plait.cli.store import check_store, open_store, shown_url
from plait.cli.target import load_targets
from plait.errors import UsageError
from plait.protocols.mcp import http_app, server

if TYPE_CHECKING:
    import uvicorn

    from plait.core.agent import Agent

__all__ = ["mcp_command"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def mcp_command(
    targets: list[str],
    store_url: str,
    *,
    http: int | None = None,
    host: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
) -> int:
    """Serve the agents of `targets` on stdio until the client closes it, or over HTTP on
    port `http` until SIGTERM; return 0 (130 when Ctrl-C stops it).

    Raises:
        UsageError: A target cannot be loaded, the store cannot be reached, the address
            cannot be listened on, or the MCP SDK (or, for HTTP, the server extra) is not
            installed.
    """
    if http is None and (host is not None or allowed_hosts):
        raise UsageError("--host and --allowed-host go with --http PORT (stdio has no host)")
    agents = load_targets(targets)
    if http is not None:
        return _serve_http(agents, store_url, http, host or "127.0.0.1", allowed_hosts)
    stopper = Stopper()

    async def main() -> int:
        store = await open_store(store_url)
        try:
            await server(agents, store=store).run_stdio_async()
        finally:
            await store.close()
        return 0

    return stopper.run(main)


def _serve_http(
    agents: list[Agent],
    store_url: str,
    port: int,
    host: str,
    allowed_hosts: Sequence[str] | None,
) -> int:
    """Serve the agents over streamable HTTP (the listening of `plait serve`)."""
    from plait.cli.serve import (
        GRACEFUL_SECONDS,
        _listen,
        _signals_kept,
        _stoppable,
        _url,
        serve_on,
    )
    from plait.stores import from_url

    try:
        import uvicorn
    except ImportError:
        raise UsageError(
            'plait mcp --http needs uvicorn: pip install "plait[mcp,server]"'
        ) from None
    store = from_url(store_url)
    app = http_app(server(agents, store=store), allowed_hosts=allowed_hosts)
    check_store(store_url)
    sock = _listen(host, port)
    config = uvicorn.Config(
        app, host=host, port=sock.getsockname()[1], timeout_graceful_shutdown=GRACEFUL_SECONDS
    )
    running = _stoppable(config, stop_seconds())
    url = f"{_url(sock, host)}/mcp"
    with _signals_kept(running):
        asyncio.run(serve_on(running, sock, store, _announce(running, url, store_url, host)))
    if getattr(running, "interrupted", False):
        say_stopped()
        return EXIT_STOPPED
    return 0


async def _announce(running: uvicorn.Server, url: str, store_url: str, host: str) -> None:
    """Print the start line once the server is up."""
    while not running.started:  # noqa: ASYNC110 - uvicorn's Server has a flag, no event
        await asyncio.sleep(0.05)
    typer.echo(f"plait: serving MCP at {url} (store {shown_url(store_url)})", err=True)
    if host not in _LOOPBACK:
        typer.echo(
            f"plait: warning: {host} is reachable by others and MCP has no keys here", err=True
        )
