"""How long `plait --help` and `plait --version` take, start to end of the process.

Each round runs `python -c pass`, `plait --help`, `plait --version` and `plait run --help`
once, in turn (the order rotates each round), so all see the same load on the machine; the
figure of each is the median wall time over the rounds. `plait` is the console script
installed next to this interpreter (what a person types), importing this checkout's `src`.
The goal is under 0.3 s (DESIGN §12) for `--help` and `--version`, which answer before typer
is loaded; `run --help` (a command's help, through typer) is shown beside them.

Run: `python bench/cli_start.py [--runs N] [--quick]`; the last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.3


def plait_script() -> str:
    """Return the `plait` console script of this interpreter's environment (else on PATH)."""
    beside = Path(sys.executable).with_name("plait")
    found = str(beside) if beside.is_file() else shutil.which("plait")
    if found is None:
        raise SystemExit("no `plait` script: pip install -e . in this environment first")
    return found


def commands() -> dict[str, list[str]]:
    """Return the timed commands by name."""
    plait = plait_script()
    return {
        "python": [sys.executable, "-c", "pass"],
        "help": [plait, "--help"],
        "version": [plait, "--version"],
        "run_help": [plait, "run", "--help"],
    }


def wall(argv: list[str], env: dict[str, str]) -> float:
    """Return the seconds one run of `argv` takes, start to end of its process."""
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def medians(runs: int) -> dict[str, float]:
    """Return the median seconds of each command over `runs` interleaved rounds."""
    paths = [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    timed = commands()
    names = list(timed)
    times: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # once each before timing: the files are read from disk once
        wall(timed[name], env)
    for round_ in range(runs):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(wall(timed[name], env))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="rounds (default 21)")
    parser.add_argument("--quick", action="store_true", help="three rounds")
    options = parser.parse_args()
    runs = 3 if options.quick else options.runs
    found = medians(runs)
    figures = {
        "runs": runs,
        "python_s": found["python"],
        "help_s": found["help"],
        "version_s": found["version"],
        "run_help_s": found["run_help"],
        "goal_s": GOAL,
    }
    print(f"python -c pass     {found['python']:.3f} s (the interpreter alone)")
    for key, shown in (("help", "--help"), ("version", "--version"), ("run_help", "run --help")):
        seconds = found[key]
        verdict = "" if key == "run_help" else "; ok" if seconds < GOAL else "; over the goal"
        over = seconds - found["python"]
        print(f"plait {shown:<12} {seconds:.3f} s ({over:+.3f} s over python{verdict})")
    print(f"median of {runs} interleaved rounds; goal under {GOAL} s")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
