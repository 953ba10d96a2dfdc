"""`plait mcp TARGET...`: serve agents as an MCP server on stdio (one tool per agent).

Stdout carries the protocol, so nothing else is written there; a paused run's checkpoint is
kept in the store (`--store`), to be resumed with `plait resume`.
"""

from __future__ import annotations

from plait.cli.stop import Stopper
from plait.cli.store import open_store
from plait.cli.target import load_targets
from plait.protocols.mcp import server

__all__ = ["mcp_command"]


def mcp_command(targets: list[str], store_url: str) -> int:
    """Serve the agents of `targets` on stdio until the client closes it; return 0 (130
    when Ctrl-C stops it).

    Raises:
        UsageError: A target cannot be loaded, the store cannot be reached, or the MCP SDK
            is not installed.
    """
    agents = load_targets(targets)
    stopper = Stopper()

    async def main() -> int:
        store = await open_store(store_url)
        try:
            await server(agents, store=store).run_stdio_async()
        finally:
            await store.close()
        return 0

    return stopper.run(main)
