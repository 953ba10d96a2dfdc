"""How long `plait --help` and `plait --version` take, start to end of the process.

Each is run `--runs` times as `python -m plait ...` (the `plait` script does the same import
work); the figure is the median wall time. The goal is under 0.3 s (DESIGN §12): neither
imports a server, model or store library.

Run: `python bench/cli_startup.py [--runs N] [--quick]`; the last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.3


def wall(args: list[str], runs: int) -> float:
    """Return the median seconds of `python -m plait ARGS` over `runs` runs."""
    paths = [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "plait", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help="three runs each")
    options = parser.parse_args()
    runs = 3 if options.quick else options.runs
    figures = {
        "runs": runs,
        "python_s": _python(runs),
        "help_s": wall(["--help"], runs),
        "version_s": wall(["--version"], runs),
        "goal_s": GOAL,
    }
    print(f"python -c pass       {figures['python_s']:.3f} s (the interpreter alone)")
    for key in ("help", "version"):
        seconds = figures[f"{key}_s"]
        verdict = "ok" if seconds < GOAL else "over the goal"
        print(f"plait --{key:<12} {seconds:.3f} s median of {runs} ({verdict})")
    print(json.dumps(figures))


def _python(runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


if __name__ == "__main__":
    main()
