"""The `plait` command: a model that cannot be made is one short message and exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import plait.cli
from plait.cli import app
from plait.errors import UsageError

_CLEARED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PLAIT_MODEL", "PLAIT_LOCAL_MODEL")


def _plait(*args: str) -> tuple[int, str]:
    """Run `python -m plait` with no model settings; return its exit code and its output."""
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    out = subprocess.run(
        [sys.executable, "-m", "plait", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**env, "COLUMNS": "200"},
        timeout=120,
    )
    return out.returncode, out.stdout + out.stderr


def test_a_missing_api_key_is_a_short_message_naming_the_variable() -> None:
    code, output = _plait("demo", "--model", "openai:gpt-4o-mini")
    assert code == 2, output
    assert "Traceback" not in output
    assert len(output.splitlines()) <= 3, output
    assert "set OPENAI_API_KEY" in output


def test_an_unknown_provider_is_a_short_message_naming_the_specs() -> None:
    code, output = _plait("demo", "--model", "mistral:large")
    assert code == 2, output
    assert "Traceback" not in output
    assert len(output.splitlines()) <= 3, output
    assert "unknown model provider 'mistral'" in output and '"openai:<model>"' in output


def test_a_plait_error_escaping_a_command_is_one_line_on_stderr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def failing_demo(**_: object) -> int:
        raise UsageError("the store is read-only:\nchoose another directory")

    monkeypatch.setattr(plait.cli, "run_demo", failing_demo)
    result = CliRunner().invoke(app, ["demo", "--scripted"])
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr == ("plait: error: the store is read-only: choose another directory\n")
    assert result.stdout == ""
