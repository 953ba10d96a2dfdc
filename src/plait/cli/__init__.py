"""The `plait` command line: `plait demo` runs plait's main job.

A `PlaitError` that escapes a command (a missing API key, an unknown model spec, an extra
that is not installed) ends it with one line on stderr and exit code 2, not a traceback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec

import typer

from plait.cli.demo import run_demo
from plait.errors import PlaitError

__all__ = ["app", "main"]

_P = ParamSpec("_P")

app = typer.Typer(
    help="plait: agents that work together, pause for a person and resume later.",
    no_args_is_help=True,
    add_completion=False,
)


def _command(fn: Callable[_P, None]) -> Callable[_P, None]:
    """Register `fn` as a command whose `PlaitError`s are one line on stderr and exit 2."""

    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> None:
        try:
            fn(*args, **kwargs)
        except PlaitError as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            typer.echo(f"plait: error: {message}", err=True)
            raise typer.Exit(2) from None

    app.command()(run)
    return run


@_command
def demo(
    model: str | None = typer.Option(
        None, "--model", help='A model spec such as "openai:gpt-4o-mini" (else PLAIT_MODEL).'
    ),
    scripted: bool = typer.Option(False, "--scripted", help="Replay scripted replies instead."),
    stream: bool = typer.Option(True, "--stream/--no-stream", help="Stream the replies."),
) -> None:
    """Run the demo: a router transfers three questions to weather and math specialists.

    Without --model or PLAIT_MODEL it runs on the embedded local model, offline.
    """
    raise typer.Exit(run_demo(model=model, scripted=scripted, streaming=stream))


@_command
def version() -> None:
    """Print plait's version."""
    from plait import __version__

    typer.echo(__version__)


def main() -> None:
    """Run the `plait` command."""
    app()
