"""Run every check CI runs: formatting, lint, strict types, tests. Exit non-zero on failure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

STEPS = [
    ("format", [PY, "-m", "ruff", "format", "--check", "src", "tests", "bench", "scripts"]),
    ("lint", [PY, "-m", "ruff", "check", "src", "tests", "bench", "scripts"]),
    ("types", [PY, "-m", "mypy"]),
    ("tests", [PY, "-m", "pytest", *sys.argv[1:]]),
]


def main() -> int:
    """Run each step in order and stop at the first failure."""
    for name, command in STEPS:
        print(f"== {name}: {' '.join(command[2:])}", flush=True)
        if subprocess.run(command, cwd=ROOT).returncode != 0:
            print(f"== {name} failed", flush=True)
            return 1
    print("== all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
