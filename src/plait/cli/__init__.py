"""The `plait` command line: `plait demo` runs plait's main job."""

from __future__ import annotations

import typer

from plait.cli.demo import run_demo

__all__ = ["app", "main"]

app = typer.Typer(
    help="plait: agents that work together, pause for a person and resume later.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
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


@app.command()
def version() -> None:
    """Print plait's version."""
    from plait import __version__

    typer.echo(__version__)


def main() -> None:
    """Run the `plait` command."""
    app()
