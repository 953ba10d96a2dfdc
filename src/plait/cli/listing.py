"""What `plait --help` lists, and the page itself, written without loading typer.

`plait.cli.commands` registers the commands with these words (`SUMMARY`, `VERSION_HELP`,
each command's line of `COMMANDS`), and `plait.cli.main` answers `plait --help` with
`quick_help()`: typer's own layout of them on a terminal of 80 columns or more (its lines
are shorter than 78, so typer does not wrap them), found equal to typer's in the tests.
"""

from __future__ import annotations

import os
import sys

__all__ = ["COMMANDS", "HELP_COLUMNS", "SUMMARY", "VERSION_HELP", "quick_help"]

#: What `plait --help` says plait is.
SUMMARY = "plait: agents that work together, pause for a person and resume later."
#: The help of `plait --version`.
VERSION_HELP = "Print plait's version and exit."
#: Each command, in the order `plait --help` lists them, and the line it is listed with.
COMMANDS = {
    "demo": "Run the demo: a router and two specialists, offline.",
    "run": "Run an agent live in the terminal (a chat without QUERY).",
    "resume": "Resume a paused run and follow it live.",
    "serve": "Serve agents over HTTP (plait's API; --ui adds the dev page).",
    "web": "Serve agents with the dev page and open it in a browser.",
    "dev": "Serve with the dev page, reloading when a source file changes.",
    "mcp": "Serve agents as an MCP server (stdio, or HTTP with --http).",
    "eval": "Run an eval set on an agent and report each case.",
    "version": "Print plait's version number.",
}
#: The narrowest terminal on which typer's layout of `plait --help` is `quick_help()`'s.
HELP_COLUMNS = 80


def quick_help() -> str | None:
    """Return `plait --help` as typer writes it: the usage line, `SUMMARY`, the options,
    `COMMANDS`; None on a terminal narrower than `HELP_COLUMNS` (typer wraps the lines)."""
    if _columns() < HELP_COLUMNS:
        return None
    width = max(map(len, COMMANDS))
    lines = [
        "Usage: plait [OPTIONS] COMMAND [ARGS]...",
        "",
        f"  {SUMMARY}",
        "",
        "Options:",
        f"  --version  {VERSION_HELP}",
        "  --help     Show this message and exit.",
        "",
        "Commands:",
        *(f"  {name:<{width}}  {line}" for name, line in COMMANDS.items()),
    ]
    return "\n".join(lines) + "\n"


def _columns() -> int:
    """The terminal's width as typer measures it (`shutil.get_terminal_size`, without
    importing `shutil`): COLUMNS, else the terminal of stdout, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    stdout = sys.__stdout__
    try:
        return (stdout and os.get_terminal_size(stdout.fileno()).columns) or 80
    except (AttributeError, ValueError, OSError):
        return 80
