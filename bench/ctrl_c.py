"""How long Ctrl-C takes to stop a `plait` command, from the keypress to the process's end.

Each case starts `python -m plait` on a pseudo-terminal (the servers: in a process sent
SIGINT), waits until the command is at the moment named, presses Ctrl-C and times until the
process has ended; it checks the exit code is 130. The goal is under one second in every
case (DESIGN §12). The cases use the test TARGETs of `tests/cli/targets.py`:

- `chat prompt`: `plait run` with no query, waiting at `you>`;
- `answer prompt`: waiting at an interrupt's `answer>`;
- `tool call`: an async tool in flight (the run is saved, the resume line printed);
- `model call`: a model call that does not return;
- `stuck thread`: a sync tool whose thread never ends;
- `serve`: `plait serve` serving, idle.

Run: `python bench/ctrl_c.py [--runs N] [--quick]` (needs pexpect); the last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pexpect  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ROOT / "tests" / "cli" / "targets.py"
GOAL = 1.0
WAIT = 60


def _env(gates: Path) -> dict[str, str]:
    paths = [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "PLAIT_TEST_GATES": str(gates),
        "TERM": "dumb",
    }


def _terminal(folder: Path, args: list[str], ready: Callable[[pexpect.spawn], None]) -> float:
    """Start `plait ARGS` on a terminal, wait for `ready`, press Ctrl-C; return the seconds
    until it ended."""
    store = f"sqlite:///{folder / 'plait.db'}"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "plait", *args, "--store", store],
        env=_env(folder),
        encoding="utf-8",
        timeout=WAIT,
        dimensions=(40, 200),
    )
    try:
        ready(child)
        started = time.perf_counter()
        child.sendintr()
        child.expect(pexpect.EOF)
        seconds = time.perf_counter() - started
        child.close()
        if child.exitstatus != 130:
            raise RuntimeError(f"{args}: exit {child.exitstatus} / {child.signalstatus}")
        return seconds
    finally:
        child.close(force=True)


def _gate(folder: Path, name: str) -> Callable[[pexpect.spawn], None]:
    def ready(child: pexpect.spawn) -> None:
        mark = folder / f"{name}.reached"
        deadline = time.monotonic() + WAIT
        while not mark.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing reached the gate {name}")
            time.sleep(0.005)

    return ready


def _shown(text: str) -> Callable[[pexpect.spawn], None]:
    return lambda child: child.expect_exact(text)


def _serve(folder: Path) -> float:
    store = f"sqlite:///{folder / 'plait.db'}"
    err = folder / "serve.err"
    with err.open("wb") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "plait",
                "serve",
                f"{TARGETS}:helper",
                "--store",
                store,
                "--port",
                "0",
            ],
            env=_env(folder),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + WAIT
        while "plait: serving" not in err.read_text(errors="replace"):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(err.read_text(errors="replace"))
            time.sleep(0.01)
        started = time.perf_counter()
        process.send_signal(signal.SIGINT)
        code = process.wait(WAIT)
        seconds = time.perf_counter() - started
        if code != 130:
            raise RuntimeError(f"serve: exit {code}: {err.read_text(errors='replace')}")
        return seconds
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _case(name: str, folder: Path) -> float:
    helper, gated = f"{TARGETS}:helper", f"{TARGETS}:gated"
    if name == "chat prompt":
        return _terminal(folder, ["run", helper, "--session", "s"], _shown("you> "))
    if name == "answer prompt":
        return _terminal(folder, ["run", helper, "approve it"], _shown("answer (JSON"))
    if name == "tool call":
        return _terminal(folder, ["run", helper, "slow"], _shown("→ slow"))
    if name == "model call":
        return _terminal(folder, ["run", gated, "think"], _gate(folder, "model"))
    if name == "stuck thread":
        return _terminal(folder, ["run", gated, "stuck"], _gate(folder, "tool"))
    return _serve(folder)


CASES = ("chat prompt", "answer prompt", "tool call", "model call", "stuck thread", "serve")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one run of each case")
    options = parser.parse_args()
    runs = 1 if options.quick else options.runs
    figures: dict[str, float] = {}
    for case in CASES:
        times = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as tmp:
                times.append(_case(case, Path(tmp)))
        figures[case] = statistics.median(times)
        verdict = "ok" if figures[case] < GOAL else "over the goal"
        print(f"{case:<14} {figures[case]:.3f} s median of {runs} ({verdict})")
    print(json.dumps({"runs": runs, "goal_s": GOAL, "seconds": figures}))


if __name__ == "__main__":
    main()
