"""The examples of docs/protocols.md "## MCP" run, and print what their comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _examples() -> list[str]:
    page = (ROOT / "docs" / "protocols.md").read_text()
    section = page.split("## MCP", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def _expected(code: str) -> list[str]:
    """The lines the example prints, as its comments give them (a comment line after a
    print, or a trailing comment on it), once per print."""
    lines = code.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        if "print(" not in line:
            continue
        if "#" in line:
            out.append(line.split("#", 1)[1].strip())
        else:
            out.append(lines[i + 1].strip().removeprefix("#").strip())
    return out


@pytest.mark.parametrize("index", [0, 1, 2], ids=["client", "elicitation", "server"])
def test_the_mcp_examples_run_and_print_what_they_say(index: int) -> None:
    code = _examples()[index]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "docs/protocols.md", "exec", dont_inherit=True), {"__name__": "doc"})
    got = printed.getvalue().splitlines()
    expected = _expected(code)
    if index == 0:  # the loop prints its line twice
        expected.append(expected[-1])
    assert got == expected
