"""What the `plait` command prints reads cleanly, through the installed `plait` script.

Each test runs the console script a person types (`plait`, next to this interpreter) in a
process of its own, importing this checkout; the ones that check colours run it on a
pseudo-terminal, as a person sees it. The help names arguments and values as they are typed
(`TARGET`, `--store URL`, never `{target}` or `<str>`), counts are in their number (`1 step`),
non-ASCII characters are printed as themselves (never `\\u00b0`), a TARGET that fails to
import names the user's file and line (never `<frozen importlib._bootstrap>`), and a command
that needs the server extra names itself and the extra.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from plait._util.words import counted
from plait.cli.listing import COMMANDS
from plait.cli.render import shown_json
from tests.cli.support import ROOT, plait_env, sqlite_url, target

pytestmark = pytest.mark.timeout(120)

#: The `plait` console script of this environment.
PLAIT = Path(sys.executable).with_name("plait")
#: A type tag or a braced name, as typer marks them in its own layout of the help.
TAGS = re.compile(r"<[\w\[\], |]+>|\{\w+\}")
ANSI = re.compile(r"\x1b\[[\d;]*m")


def _plait(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    assert PLAIT.is_file(), f"no plait script at {PLAIT}: pip install -e . first"
    return subprocess.run(
        [str(PLAIT), *args],
        cwd=cwd,
        env=plait_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _on_terminal(*args: str, columns: int = 100) -> str:
    """Run `plait ARGS` on a pseudo-terminal `columns` wide (no COLUMNS variable, colours
    on) and return all it printed, colours included, with plain line ends."""
    env = plait_env(TERM="xterm-256color")
    for name in ("COLUMNS", "NO_COLOR", "FORCE_COLOR"):
        env.pop(name, None)
    child = pexpect.spawn(
        str(PLAIT),
        list(args),
        cwd=str(ROOT),
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(40, columns),
    )
    try:
        child.expect(pexpect.EOF)
        printed = child.before
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, printed
    return str(printed).replace("\r\n", "\n")


# --- the help ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "usage", "options"),
    [
        ("run", "plait run [OPTIONS] TARGET [QUERY]", ["--session ID", "--store URL", "--json"]),
        (
            "resume",
            "plait resume [OPTIONS] CHECKPOINT_ID TARGET",
            ["--value JSON", "--targets JSON"],
        ),
        ("serve", "plait serve [OPTIONS] TARGET...", ["--port PORT", "--api-keys FILE"]),
        ("web", "plait web [OPTIONS] TARGET...", ["--allowed-host HOST"]),
        ("dev", "plait dev [OPTIONS] TARGET...", ["--host HOST"]),
        ("mcp", "plait mcp [OPTIONS] TARGET...", ["--http PORT"]),
        ("eval", "plait eval [OPTIONS] EVALSET TARGET", ["--threshold RATE", "--judge MODEL"]),
        ("demo", "plait demo [OPTIONS]", ["--model MODEL", "--stream / --no-stream"]),
        ("version", "plait version [OPTIONS]", ["--help"]),
    ],
)
def test_each_commands_help_names_what_is_typed_without_type_tags(
    command: str, usage: str, options: list[str]
) -> None:
    done = _plait(command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: {usage}\n"), done.stdout
    assert TAGS.findall(done.stdout) == []
    for option in options:
        assert re.search(rf"^  {re.escape(option)}  ", done.stdout, re.M), (option, done.stdout)


def test_every_command_is_listed_whole_in_plait_help() -> None:
    done = _plait("--help")
    assert done.returncode == 0, done.stderr
    listed = re.findall(r"^  (\w+) +(.+)$", done.stdout.split("Commands:\n")[1], re.M)
    assert listed == list(COMMANDS.items())
    assert TAGS.findall(done.stdout) == [] and "..." not in done.stdout.split("Commands:")[1]


def _typers_help(columns: str) -> str:
    """Return typer's own `plait --help` on a terminal `columns` wide."""
    done = subprocess.run(
        [sys.executable, "-c", "from plait.cli import app; app(prog_name='plait')", "--help"],
        cwd=ROOT,
        env=plait_env(COLUMNS=columns),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


@pytest.mark.parametrize("columns", ["80", "200"])
def test_plait_help_is_typers_own_layout(columns: str) -> None:
    """`plait --help` answers without loading typer, in typer's words and layout."""
    done = _plait("--help", COLUMNS=columns)
    assert done.returncode == 0, done.stderr
    assert done.stdout == _typers_help(columns)


def test_a_narrow_terminal_gets_typers_wrapped_help() -> None:
    done = _plait("--help", COLUMNS="60")
    assert done.stdout == _typers_help("60")
    assert "  eval     Run an eval set on an agent and report each\n" in done.stdout


@pytest.mark.parametrize(("columns", "wrapped"), [(100, False), (60, True)])
def test_plait_help_on_a_terminal_fits_its_width_and_has_no_tags(
    columns: int, wrapped: bool
) -> None:
    printed = _on_terminal("--help", columns=columns)
    assert printed.startswith("Usage: plait [OPTIONS] COMMAND [ARGS]...\n")
    assert max(map(len, printed.splitlines())) <= columns
    assert TAGS.findall(printed) == [] and ANSI.findall(printed) == []
    one_line = f"  dev      {COMMANDS['dev']}\n"
    assert (one_line not in printed) is wrapped


def test_a_missing_argument_is_named_as_the_help_names_it() -> None:
    done = _plait("run")
    assert done.returncode == 2
    assert "Usage: plait run [OPTIONS] TARGET [QUERY]" in done.stderr
    assert "Missing argument 'TARGET'." in done.stderr


# --- a run as a person sees it -------------------------------------------------------------


def test_a_run_on_a_terminal_is_coloured_and_prints_non_ascii_characters(
    tmp_path: Path,
) -> None:
    printed = _on_terminal(
        "run", target("weather"), "weather in Zurich?", "--store", sqlite_url(tmp_path / "p.db")
    )
    assert re.search(r"\x1b\[[\d;]*mweather\x1b\[0m\n", printed), printed  # the agent's name
    assert re.search(r"\x1b\[[\d;]*mcompleted\x1b\[0m", printed), printed  # the status
    assert ANSI.sub("", printed).splitlines() == [
        "weather",
        '  → forecast({"city": "Zürich"})',
        '  ← forecast {"city": "Zürich", "temperature": "18°C"}',
        "  It is 18°C in Zürich.",
        "completed · usage: 0 input + 0 output tokens",
    ]
    assert "\\u00" not in printed


def test_a_handoff_counts_its_steps_in_their_number(tmp_path: Path) -> None:
    done = _plait("run", target("desk"), "my bill", "--store", sqlite_url(tmp_path / "p.db"))
    assert done.returncode == 0, done.stderr
    assert re.search(
        r"^  handoff \[[\d:]+\] triage → billing \(1 step, 0 tokens\)$", done.stdout, re.M
    )
    assert re.search(
        r'^  handoff \[[\d:]+\] billing → END: "Your bill is 10\." \(1 step, 0 tokens\)$',
        done.stdout,
        re.M,
    )


def test_an_eval_of_one_case_says_case(tmp_path: Path) -> None:
    evalset = tmp_path / "one.json"
    evalset.write_text('{"cases": [{"id": "adds", "input": "add 2 3", "expected_response": "5"}]}')
    agent = f"{ROOT / 'tests' / 'cli' / 'eval_targets.py'}:calculator"
    done = _plait("eval", str(evalset), agent)
    assert done.returncode == 0, done.stderr
    assert "pass rate 100% (1/1 case) · threshold 80% passed" in done.stdout


def test_an_eval_set_with_two_problems_says_one_more_problem(tmp_path: Path) -> None:
    evalset = tmp_path / "bad.json"
    evalset.write_text('{"cases": [{"id": 1, "input": 2}]}')
    done = _plait("eval", str(evalset), target("helper"))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.endswith(": Input should be a valid string (and 1 more problem)\n")


def test_json_is_shown_with_its_characters_and_anything_else_as_it_is() -> None:
    assert shown_json('{"city": "Z\\u00fcrich", "n": 1}') == '{"city": "Zürich", "n": 1}'
    assert shown_json('{"city":"Oslo"}') == '{"city":"Oslo"}'  # no escape: kept as sent
    assert shown_json("C:\\users\\ana") == "C:\\users\\ana"  # not JSON
    assert shown_json('"\\ud83d"') == '"\\ud83d"'  # a lone surrogate cannot be printed


def test_counts_are_in_their_number() -> None:
    assert [counted(n, "step") for n in (0, 1, 2)] == ["0 steps", "1 step", "2 steps"]
    assert counted(1, "model step") == "1 model step"
    assert counted(2, "reply", "replies") == "2 replies"


# --- a TARGET that does not import ---------------------------------------------------------


def _package(tmp_path: Path) -> Path:
    package = tmp_path / "bots"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "typo.py").write_text("x = 1\ndef agent(:\n    pass\n")
    (package / "desk.py").write_text('"""A desk."""\nimport dependency_not_installed_xyz\n')
    (package / "reads.py").write_text('import json\n\nsettings = json.loads("not json")\n')
    (package / "chain.py").write_text("import bots.typo\n")
    return package


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (
            "bots.typo:agent",
            "importing bots.typo failed: SyntaxError: invalid syntax (bots/typo.py:2)",
        ),
        (
            "bots.chain:agent",
            "importing bots.chain failed: SyntaxError: invalid syntax (bots/typo.py:2)",
        ),
        (
            "bots/typo.py:agent",
            "importing typo.py failed: SyntaxError: invalid syntax (bots/typo.py:2)",
        ),
        (
            "bots.desk:agent",
            "importing bots.desk failed: ModuleNotFoundError: No module named "
            "'dependency_not_installed_xyz' (bots/desk.py:2)",
        ),
        (
            "bots.reads:agent",
            "importing bots.reads failed: JSONDecodeError: Expecting value: line 1 column 1 "
            "(char 0) (bots/reads.py:3)",
        ),
    ],
)
def test_a_target_that_fails_to_import_names_the_users_file_and_line(
    tmp_path: Path, spec: str, error: str
) -> None:
    _package(tmp_path)
    done = _plait("run", spec, "hi", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"plait: error: TARGET '{spec}': {error}\n"


# --- a command that needs the server extra -------------------------------------------------


def _without(tmp_path: Path, *modules: str) -> str:
    """Return a PYTHONPATH entry whose `sitecustomize` makes `modules` not installed."""
    folder = tmp_path / "site"
    folder.mkdir()
    lines = ["import sys", *(f"sys.modules[{name!r}] = None" for name in modules)]
    (folder / "sitecustomize.py").write_text("\n".join(lines) + "\n")
    return str(folder)


@pytest.mark.parametrize("command", ["dev", "serve", "web"])
def test_a_server_command_without_the_server_extra_names_itself_and_the_extra(
    tmp_path: Path, command: str
) -> None:
    paths = f"{_without(tmp_path, 'uvicorn')}:{ROOT / 'src'}"
    done = _plait(command, target("helper"), "--port", "0", PYTHONPATH=paths)
    assert (done.returncode, done.stdout) == (2, "")
    install = 'pip install "plait[server]"'
    assert (
        done.stderr
        == f"plait: error: plait {command} needs uvicorn (the server extra): {install}\n"
    )


def test_both_missing_server_libraries_are_named(tmp_path: Path) -> None:
    paths = f"{_without(tmp_path, 'uvicorn', 'fastapi')}:{ROOT / 'src'}"
    done = _plait("dev", target("helper"), PYTHONPATH=paths)
    assert done.returncode == 2
    assert "plait dev needs uvicorn and fastapi (the server extra)" in done.stderr
