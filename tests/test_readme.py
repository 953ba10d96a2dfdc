"""The README's Quickstart and examples are true."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _quickstart() -> list[str]:
    section = README.split("## Quickstart", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quickstart_has_exactly_two_commands_demo_then_tests() -> None:
    lines = _quickstart()
    assert len(lines) == 2
    assert lines[0].endswith("plait demo")
    assert "scripts/check.py" in lines[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "sed -n 2p" in ci  # CI runs the README's second line


def test_python_examples_in_the_readme_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec", dont_inherit=True), {"__name__": "readme_example"})


def test_python_examples_in_the_docs_run() -> None:
    ran = 0
    for page in sorted((ROOT / "docs").glob("*.md")):
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.S):
            exec(compile(block, str(page), "exec", dont_inherit=True), {"__name__": "docs_example"})
            ran += 1
    assert ran >= 1


def test_demo_runs_and_says_it_is_scripted() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "plait", "demo"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "scripted model" in out.stdout
    assert "transfer Router → WeatherAgent" in out.stdout
    assert "answer: It is cloudy in Tokyo, 18°C." in out.stdout
    assert "answer: 156 * 789 + 234 = 123318" in out.stdout
    assert "answer: The capital of France is Paris." in out.stdout
