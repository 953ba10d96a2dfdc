"""A TARGET names the agent a command runs: a file or a module, then an Agent or a factory.

One that cannot be loaded is a usage error: exit code 2, one line on stderr naming the
TARGET and what to do, no traceback.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait import Agent
from plait.cli import app
from plait.cli.target import load_target, load_targets
from plait.errors import UsageError
from tests.cli.support import TARGETS, sqlite_url, target


def _run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    store = sqlite_url(tmp_path / "plait.db")
    result = CliRunner().invoke(app, [*args, "--store", store])
    return result.exit_code, result.stdout, result.stderr


def _one_line_error(code: int, stdout: str, stderr: str) -> str:
    assert code == 2, (stdout, stderr)
    assert "Traceback" not in stdout + stderr
    assert stdout == ""
    assert stderr.count("\n") == 1 and stderr.startswith("plait: error: TARGET "), stderr
    return stderr


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("no/such/file.py:agent", "no file 'no/such/file.py'; check the path"),
        (f"{TARGETS}:nope", "targets.py has no 'nope'; it has: helper"),
        (f"{TARGETS}:not_an_agent", "not_an_agent is of type int, not an Agent"),
        (f"{TARGETS}:needs_arguments", "needs_arguments needs arguments"),
        (f"{TARGETS}:broken_factory", "broken_factory() failed: RuntimeError: the factory is"),
        (f"{TARGETS}:returns_text", "returns_text() returned a value of type str, not an Agent"),
        ("no_such_module_for_plait:agent", "no module named 'no_such_module_for_plait'"),
        ("just-a-name", "must be path/to/file.py:name or package.module:name"),
        ("not a module:agent", "must be path/to/file.py:name or package.module:name"),
    ],
)
@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_target_that_cannot_be_loaded_is_one_line_and_exit_2(
    tmp_path: Path, command: str, spec: str, expected: str
) -> None:
    args = [command, spec, "hello"] if command == "run" else [command, spec]
    stderr = _one_line_error(*_run(tmp_path, *args))
    assert repr(spec) in stderr
    assert expected in stderr


def test_a_file_that_fails_to_import_names_the_error_and_line(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("x = 1\ny = 1 / 0\n")
    (tmp_path / "typo.py").write_text("def agent(:\n")
    stderr = _one_line_error(*_run(tmp_path, "run", f"{tmp_path}/broken.py:agent", "hi"))
    assert "importing broken.py failed: ZeroDivisionError: division by zero (broken.py:2)" in (
        stderr
    )
    stderr = _one_line_error(*_run(tmp_path, "run", f"{tmp_path}/typo.py:agent", "hi"))
    assert stderr.endswith("importing typo.py failed: SyntaxError: invalid syntax (typo.py:1)\n")


def test_a_module_whose_own_import_fails_names_the_missing_dependency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = f"bots_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "desk.py").write_text("import dependency_not_installed_xyz\n")
    monkeypatch.chdir(tmp_path)
    stderr = _one_line_error(*_run(tmp_path, "run", f"{package}.desk:agent", "hi"))
    assert f"importing {package}.desk failed: ModuleNotFoundError" in stderr
    assert "dependency_not_installed_xyz" in stderr


def test_a_module_target_is_found_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = f"bots_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "desk.py").write_text(TARGETS.read_text())
    monkeypatch.chdir(tmp_path)
    code, stdout, stderr = _run(tmp_path, "run", f"{package}.desk:helper", "hi there")
    assert code == 0, stderr
    assert "echo: hi there" in stdout


def test_an_agent_and_a_zero_argument_factory_both_load() -> None:
    agent = load_target(target("helper"))
    made = load_target(target("make_helper"))
    assert isinstance(agent, Agent) and isinstance(made, Agent)
    assert (agent.name, made.name) == ("helper", "helper")
    team = load_target(target("desk"))
    assert team.name == "desk"


def test_a_file_named_twice_is_imported_once() -> None:
    first, second = load_targets([target("helper"), target("helper")])
    assert first is second
    assert load_target(target("helper")) is not first  # each command imports afresh


def test_the_demo_team_is_a_target_on_the_model_plait_model_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("PLAIT_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    router = load_target("plait.examples.router:demo_team")
    assert router.name == "Router"
    assert [a.name for a in router.sub_agents] == ["WeatherAgent", "MathAgent"]  # type: ignore[attr-defined]


def test_the_demo_team_without_the_local_model_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if it were not installed
    monkeypatch.delenv("PLAIT_MODEL", raising=False)
    code, stdout, stderr = _run(tmp_path, "run", "plait.examples.router:demo_team", "hi")
    assert code == 2 and stdout == ""
    assert stderr == 'plait: error: LocalModel needs llama-cpp-python: pip install "plait[local]"\n'


def test_load_target_raises_usage_errors() -> None:
    with pytest.raises(UsageError, match="no file"):
        load_target("missing.py:agent")


def test_a_huge_target_is_quoted_short(tmp_path: Path) -> None:
    spec = "x" * 5000 + ".py:agent"
    stderr = _one_line_error(*_run(tmp_path, "run", spec, "hi"))
    assert len(stderr) < 400, stderr
    assert "longer than 1024 characters" in stderr
    long_module = "a" * 900 + ":" + "b" * 100
    stderr = _one_line_error(*_run(tmp_path, "run", long_module, "hi"))
    assert len(stderr) < 600, stderr
