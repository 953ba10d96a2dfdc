"""The `plait` command line: run, resume and serve agents; `plait demo` runs the demo.

- `plait run TARGET [QUERY]`: run an agent live in the terminal (a chat without QUERY).
- `plait resume CHECKPOINT_ID TARGET`: resume a paused run.
- `plait serve TARGET...` / `plait web TARGET...`: the HTTP API (and the dev page).
- `plait dev TARGET...`: serve with the dev page, reloading when a source file changes.
- `plait mcp TARGET...`: an MCP server on stdio (or streamable HTTP), one tool per agent.
- `plait eval EVALSET TARGET`: run an eval set on an agent (exit 1 below the threshold).

A TARGET is `path/to/file.py:name` or `package.module:name`: an `Agent`, or a function that
takes no arguments and returns one. Exit codes: 0 completed, 1 failed, 2 usage error,
3 paused, 130 stopped with Ctrl-C (within a second: `plait.cli.stop`). A `PlaitError` that
escapes a command (a TARGET that cannot be loaded, a store out of reach, a missing API key,
an extra that is not installed) ends it with one line on stderr and exit code 2, not a
traceback. See docs/cli.md.

The commands (`plait.cli.commands`, on typer) are imported by `main()` and on first use of
`plait.cli.app`. `plait --version` and `plait --help` alone answer without them: the version,
and the list of commands (`plait.cli.listing`, the words the commands are registered with)
laid out as typer lays it out on a terminal 80 or more columns wide.
Each command's module is imported when the command runs, so no `--help` loads the demo, a
server, model, store or pydantic library.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from plait._util.lazy import lazy_exports

if TYPE_CHECKING:  # the types of the names `__getattr__` imports on first use
    from plait.cli.commands import app
    from plait.cli.demo import run_demo  # noqa: F401
    from plait.cli.run import resume_command, run_command  # noqa: F401
    from plait.cli.serve import ServeOptions, serve_command  # noqa: F401

__all__ = ["app", "main"]

# The typer app and the commands' functions, imported on first use (`plait.cli.run_demo`
# and so on; a test may replace one here, and the command then calls the replacement).
_LAZY = {
    "app": "plait.cli.commands",
    "run_demo": "plait.cli.demo",
    "run_command": "plait.cli.run",
    "resume_command": "plait.cli.run",
    "serve_command": "plait.cli.serve",
    "ServeOptions": "plait.cli.serve",
}

__getattr__ = lazy_exports(__name__, _LAZY)


def main() -> None:
    """Run the `plait` command (`plait --version` and `plait --help` alone answer before
    typer is loaded)."""
    args = sys.argv[1:]
    if args == ["--version"]:
        from plait import __version__

        print(f"plait {__version__}")
        return
    if args == ["--help"]:
        from plait.cli.listing import quick_help

        text = quick_help()
        if text is not None:
            sys.stdout.write(text)
            return
    from plait.cli.commands import app as commands

    commands()
