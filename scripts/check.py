"""Run every check CI runs: formatting, lint, strict types, the API reference, tests.

Exit non-zero on failure. Arguments are passed to pytest (`scripts/check.py -k readme`).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def _steps(api_dir: str) -> list[tuple[str, list[str]]]:
    """The steps, in order; the API reference is built into `api_dir`."""
    return [
        ("format", [PY, "-m", "ruff", "format", "--check", "src", "tests", "bench", "scripts"]),
        ("lint", [PY, "-m", "ruff", "check", "src", "tests", "bench", "scripts"]),
        ("types", [PY, "-m", "mypy"]),
        ("docs", [PY, "scripts/api_docs.py", api_dir]),
        ("tests", [PY, "-m", "pytest", *sys.argv[1:]]),
    ]


def main() -> int:
    """Run each step in order and stop at the first failure."""
    with tempfile.TemporaryDirectory(prefix="plait-api-") as api_dir:
        for name, command in _steps(api_dir):
            print(f"== {name}: {' '.join(command[1:] if name == 'docs' else command[2:])}")
            sys.stdout.flush()
            if subprocess.run(command, cwd=ROOT).returncode != 0:
                print(f"== {name} failed", flush=True)
                return 1
    print("== all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
