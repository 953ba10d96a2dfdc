"""`plait --version`, and `plait --help` / `--version` without the heavy libraries (nor
typer: they answer before it is loaded)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from plait import __version__
from plait.cli import app
from tests.cli.support import ROOT, plait_env

#: What `plait --help` and `plait --version` must not import (DESIGN §12).
HEAVY = [
    "fastapi",
    "uvicorn",
    "httpx",
    "openai",
    "anthropic",
    "litellm",
    "llama_cpp",
    "psycopg",
    "redis",
    "aiosqlite",
    "opentelemetry",
    "mcp",
    "pydantic",
    "pydantic_core",
    "rich",
]

# Runs the command's entry point with ARGS, then prints the top-level modules it imported.
_RUNNER = """
import json, sys
sys.argv = ["plait", *sys.argv[1:]]
from plait.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})), file=sys.stderr)
"""


def _imported(*args: str) -> tuple[str, set[str]]:
    out = subprocess.run(
        [sys.executable, "-c", _RUNNER, *args],
        cwd=ROOT,
        env=plait_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    *printed, modules = out.stderr.strip().splitlines()
    return out.stdout + "\n".join(printed), set(json.loads(modules))


@pytest.mark.parametrize("args", [("--help",), ("--version",), (), ("run", "--help")])
def test_help_and_version_import_no_server_model_or_store_library(args: tuple[str, ...]) -> None:
    printed, modules = _imported(*args)
    assert "plait" in modules
    assert (f"plait {__version__}" if args == ("--version",) else "Usage:") in printed
    assert sorted(modules & set(HEAVY)) == []


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_help_and_version_answer_before_typer_is_loaded(args: tuple[str, ...]) -> None:
    _, modules = _imported(*args)
    assert "typer" not in modules
    _, modules = _imported("run", "--help")
    assert "typer" in modules  # the check above would see it


def test_the_heavy_libraries_are_seen_when_they_are_imported() -> None:
    """The check above would see them: the demo keeps its session in SQLite."""
    out = subprocess.run(
        [sys.executable, "-c", _RUNNER.replace("main()", "import plait.cli.demo; main()")],
        cwd=ROOT,
        env=plait_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    modules = set(json.loads(out.stderr.strip().splitlines()[-1]))
    assert "aiosqlite" in modules


def test_version_option_prints_plait_and_the_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "plait", "--version"],
        cwd=ROOT,
        env=plait_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, f"plait {__version__}\n", "")


def test_version_option_comes_before_any_command() -> None:
    result = CliRunner().invoke(app, ["--version", "run"])
    assert (result.exit_code, result.stdout) == (0, f"plait {__version__}\n")


def test_the_version_command_prints_the_number() -> None:
    result = CliRunner().invoke(app, ["version"])
    assert (result.exit_code, result.stdout) == (0, f"{__version__}\n")


def test_help_lists_the_version_option_and_the_commands() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for word in ("--version", "run", "resume", "serve", "demo", "mcp"):
        assert word in result.stdout
