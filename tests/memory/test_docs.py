"""The example of docs/capabilities/memory.md runs and prints what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def _example() -> str:
    """Return the code of the section's example."""
    page = (ROOT / "docs" / "capabilities" / "memory.md").read_text()
    section = page.split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


def test_the_long_term_memory_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code = _example()
    namespace = {"__name__": "memory_example"}
    exec(compile(code, "docs/capabilities/memory.md", "exec", dont_inherit=True), namespace)
    printed = capsys.readouterr().out
    assert printed.splitlines() == [
        "1. user: I take my tea green, no sugar.",
        "   assistant: Noted: green, no sugar.",
        "Green, no sugar.",
    ]
