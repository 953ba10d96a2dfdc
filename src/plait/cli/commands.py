"""The `plait` commands on typer: their options, help and exit codes (see `plait.cli`).

Each command's code is imported when it runs (`_lazy`), and each command catches what it
may end with: a `PlaitError` is one line on stderr and exit code 2, Ctrl-C exit code 130.
The help reads plainly (`plait.cli.help`): every option that takes a value has a metavar,
and every command a short help that fits the list of commands.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec

import typer

from plait.cli.help import PlaitCommand, PlaitGroup
from plait.cli.listing import COMMANDS, SUMMARY, VERSION_HELP
from plait.cli.store import DEFAULT_STORE
from plait.errors import PlaitError

if TYPE_CHECKING:
    from plait.cli.serve import ServeOptions

__all__ = ["app"]

_P = ParamSpec("_P")


def _lazy(name: str) -> Any:
    """Return the command function `name` from `plait.cli` (imported now, or as a test
    replaced it there)."""
    return getattr(sys.modules["plait.cli"], name)


def _show_version(value: bool) -> None:
    if value:
        from plait import __version__

        typer.echo(f"plait {__version__}")
        raise typer.Exit()


app = typer.Typer(
    help=SUMMARY,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain help: rendering it with rich would double its time
    cls=PlaitGroup,
)


@app.callback()
def _plait(
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        callback=_show_version,
        help=VERSION_HELP,
    ),
) -> None:
    """The options before any command (the help is `SUMMARY`)."""


def _command(fn: Callable[_P, None]) -> Callable[_P, None]:
    """Register `fn` as a command, listed in `plait --help` with its line of `COMMANDS`,
    whose `PlaitError`s are one line on stderr and exit 2, and which Ctrl-C stops within a
    second with exit code 130."""

    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> None:
        from plait.cli.stop import EXIT_STOPPED, guard, say_stopped

        try:
            with guard():
                fn(*args, **kwargs)
        except PlaitError as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            typer.echo(f"plait: error: {message}", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            say_stopped()
            raise typer.Exit(EXIT_STOPPED) from None

    app.command(cls=PlaitCommand, short_help=COMMANDS[fn.__name__])(run)
    return run


_TARGET_HELP = "The agent: path/to/file.py:name or package.module:name (an Agent or a factory)."
_TARGET = typer.Argument(..., metavar="TARGET", help=_TARGET_HELP, show_default=False)
_STORE_HELP = "Where runs and sessions are kept: sqlite:///file.db, postgresql://..., redis://..."


def _option(name: str, metavar: str, help: str) -> Any:
    """Return the option `name METAVAR` (None when not given), described by `help`."""
    return typer.Option(None, name, metavar=metavar, help=help)


_STORE = typer.Option(DEFAULT_STORE, "--store", metavar="URL", help=_STORE_HELP)
_JSON_LINES = typer.Option(
    False, "--json", help="Print JSON lines: each event, then the run summary."
)


@_command
def demo(
    model: str | None = typer.Option(
        None,
        "--model",
        metavar="MODEL",
        help='A model spec such as "openai:gpt-4o-mini" (else PLAIT_MODEL).',
    ),
    scripted: bool = typer.Option(False, "--scripted", help="Replay scripted replies instead."),
    stream: bool = typer.Option(True, "--stream/--no-stream", help="Stream the replies."),
) -> None:
    """Run the demo: a router transfers three questions to weather and math specialists.

    Without --model or PLAIT_MODEL it runs on the embedded local model, offline.
    """
    raise typer.Exit(_lazy("run_demo")(model=model, scripted=scripted, streaming=stream))


@_command
def run(
    target: str = _TARGET,
    query: str | None = typer.Argument(
        None,
        metavar="QUERY",
        help="The request. Without it: a chat on one session.",
        show_default=False,
    ),
    session: str | None = _option(
        "--session", "ID", "Continue this session (the chat makes one up without it)."
    ),
    store: str = _STORE,
    json_lines: bool = _JSON_LINES,
) -> None:
    """Run an agent live: streamed text, tool calls, handoffs, usage; answer its interrupts.

    Exit codes: 0 completed, 1 failed, 2 usage error, 3 paused, 130 stopped (Ctrl-C).

    When stdin is not a terminal, a pause prints the checkpoint id on stderr (exit 3).
    """
    run_command = _lazy("run_command")
    raise typer.Exit(
        run_command(target, query, session_id=session, store_url=store, json_lines=json_lines)
    )


@_command
def resume(
    checkpoint_id: str = typer.Argument(
        ..., metavar="CHECKPOINT_ID", help="The paused run's checkpoint id.", show_default=False
    ),
    target: str = _TARGET,
    store: str = _STORE,
    value: str | None = _option(
        "--value", "JSON", "The answer to its one interrupt: JSON, else plain text."
    ),
    targets: str | None = _option(
        "--targets",
        "JSON",
        "The answers by interrupt id, as one JSON object (interrupt id -> answer).",
    ),
    json_lines: bool = _JSON_LINES,
) -> None:
    """Resume a paused run and follow it live (same exit codes as `run`).

    Without --value or --targets its interrupts are asked on the terminal again.
    """
    code = _lazy("resume_command")(
        checkpoint_id,
        target,
        store_url=store,
        value=value,
        targets=targets,
        json_lines=json_lines,
    )
    raise typer.Exit(code)


def _serve_options(
    targets: list[str],
    host: str,
    port: int,
    store: str,
    api_keys: Path | None,
    ui: bool,
    allowed_hosts: list[str] | None,
    a2a: bool = False,
    command: str = "serve",
) -> ServeOptions:
    keys = None if api_keys is None else str(api_keys)
    hosts = tuple(allowed_hosts) if allowed_hosts else None
    options: ServeOptions = _lazy("ServeOptions")(
        targets,
        host,
        port,
        store,
        keys,
        ui,
        open_browser=command == "web",
        allowed_hosts=hosts,
        a2a=a2a,
        command=command,
    )
    return options


_TARGETS = typer.Argument(
    ..., metavar="TARGET", help="The agents to serve (each a TARGET).", show_default=False
)
_HOST = typer.Option("127.0.0.1", "--host", metavar="HOST", help="The address to listen on.")
_PORT = typer.Option(
    8000, "--port", metavar="PORT", help="The port to listen on (0: any free port)."
)
_KEYS = typer.Option(
    None,
    "--api-keys",
    metavar="FILE",
    help="A file of 'KEY USER_ID' lines; then every route needs a key.",
)
_CONFIG = typer.Option(
    None,
    "--config",
    metavar="FILE",
    help="A TOML file of API keys, admin keys, quotas and webhook settings.",
)
_ALLOWED_HOSTS = typer.Option(
    None,
    "--allowed-host",
    metavar="HOST",
    help=(
        "A host name the server answers besides its loopback names and own address (a "
        "proxy's name; repeat for several, '*' for any). Checked always when given, else "
        "only without --api-keys."
    ),
)


@_command
def serve(
    targets: list[str] = _TARGETS,
    host: str = _HOST,
    port: int = _PORT,
    store: str = _STORE,
    api_keys: Path | None = _KEYS,
    ui: bool = typer.Option(False, "--ui", help="Also serve the dev page at /."),
    allowed_host: list[str] | None = _ALLOWED_HOSTS,
    a2a: bool = typer.Option(
        False, "--a2a", help="Also serve every agent over A2A at /a2a/AGENT (plait[a2a])."
    ),
    config: Path | None = _CONFIG,
    run_lease: float | None = _option(
        "--run-lease",
        "SECONDS",
        "How long this worker's lease on its runs lasts in the store (default 30): the runs "
        "of a worker that was killed are taken over by the others this long after.",
    ),
) -> None:
    """Serve agents over HTTP (plait's API; docs/server.md) until Ctrl-C or SIGTERM."""
    options = _serve_options(targets, host, port, store, api_keys, ui, allowed_host, a2a)
    if config is not None or run_lease is not None:
        import dataclasses

        given = None if config is None else str(config)
        options = dataclasses.replace(options, config=given, run_lease=run_lease)
    raise typer.Exit(_lazy("serve_command")(options))


@_command
def web(
    targets: list[str] = _TARGETS,
    host: str = _HOST,
    port: int = _PORT,
    store: str = _STORE,
    api_keys: Path | None = _KEYS,
    allowed_host: list[str] | None = _ALLOWED_HOSTS,
) -> None:
    """Serve agents with the dev page and open it in a browser (`serve --ui`)."""
    options = _serve_options(
        targets, host, port, store, api_keys, True, allowed_host, command="web"
    )
    raise typer.Exit(_lazy("serve_command")(options))


@_command
def dev(
    targets: list[str] = _TARGETS,
    host: str = _HOST,
    port: int = _PORT,
    store: str = _STORE,
    api_keys: Path | None = _KEYS,
    allowed_host: list[str] | None = _ALLOWED_HOSTS,
) -> None:
    """Serve agents with the dev page; reload them when a Python file under the working
    directory changes (the store is kept, so paused runs survive a reload)."""
    from plait.cli.dev import dev_command

    options = _serve_options(
        targets, host, port, store, api_keys, True, allowed_host, command="dev"
    )
    raise typer.Exit(dev_command(options))


_MCP_ALLOWED_HOSTS = typer.Option(
    None,
    "--allowed-host",
    metavar="HOST",
    help=(
        "With --http: a host name it answers besides its loopback names and own address "
        "(repeat for several, '*' for any)."
    ),
)


@_command
def mcp(
    targets: list[str] = _TARGETS,
    store: str = _STORE,
    http: int | None = _option(
        "--http", "PORT", "Serve streamable HTTP at /mcp on this port instead of stdio."
    ),
    host: str | None = _option(
        "--host", "HOST", "With --http: the address to listen on (default 127.0.0.1)."
    ),
    allowed_host: list[str] | None = _MCP_ALLOWED_HOSTS,
) -> None:
    """Serve agents as an MCP server, on stdio or over streamable HTTP (--http PORT): one
    tool per agent (`input` -> its answer)."""
    from plait.cli.mcp import mcp_command

    code = mcp_command(targets, store, http=http, host=host, allowed_hosts=allowed_host or None)
    raise typer.Exit(code)


@_command
def eval(  # the command's name; the builtin is not used in this module
    evalset: str = typer.Argument(
        ...,
        metavar="EVALSET",
        help="The eval set: a JSON file (plait's or Google ADK's).",
        show_default=False,
    ),
    target: str = _TARGET,
    json_report: bool = typer.Option(False, "--json", help="Print only the JSON report."),
    threshold: float = typer.Option(
        0.8,
        "--threshold",
        metavar="RATE",
        help="The pass rate to reach (0 to 1); below it the exit code is 1.",
    ),
    judge: str | None = typer.Option(
        None,
        "--judge",
        metavar="MODEL",
        help='The model judging "judge" responses, e.g. "openai:gpt-4o-mini".',
    ),
) -> None:
    """Run an eval set on an agent: tool trajectories, responses, tokens and latency.

    Exit codes: 0 pass rate at or above --threshold, 1 below it, 2 usage error.
    """
    from plait.cli.eval import eval_command

    raise typer.Exit(
        eval_command(evalset, target, json_report=json_report, threshold=threshold, judge=judge)
    )


@_command
def version() -> None:
    """Print plait's version number (`plait --version` prints "plait X.Y.Z")."""
    from plait import __version__

    typer.echo(__version__)
