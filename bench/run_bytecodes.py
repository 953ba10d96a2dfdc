"""The bytecodes and calls one run of no step executes, by function: the workload of
`bench/step_instructions.py` (a `ChatModelAgent` with a tool and a zero-latency model that
answers at once) traced with `sys.settrace`, R runs, per run: what a run costs before and
after its steps (`Runner.run`, the stream's start and end, the kernel's entry, the ReAct
loop's set-up).

Like `bench/step_bytecodes.py`, the figure is the same from run to run, so two builds
compare exactly (on the same interpreter):

    .venv/bin/python bench/run_bytecodes.py            # totals and the 25 busiest functions
    .venv/bin/python bench/run_bytecodes.py --quick    # tiny, as JSON

It prints `bytecodes/run N calls/run M` and then the busiest functions, `N calls file:function`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from step_instructions import _main

Counts = collections.Counter[tuple[str, str]]


def _count(runs: int) -> tuple[Counts, Counts]:
    """Return the opcodes each function executed, and the calls of each, over `runs` runs."""
    opcodes: Counts = collections.Counter()
    calls: Counts = collections.Counter()

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        code = frame.f_code
        where = code.co_filename.rsplit("/src/", 1)[-1].rsplit("/lib/python", 1)[-1]
        if event == "opcode":
            opcodes[(where, code.co_name)] += 1
        elif event == "call":
            calls[(where, code.co_name)] += 1
        return trace

    asyncio.run(_main(0, 1))  # warm up, untraced
    sys.settrace(trace)
    try:
        asyncio.run(_main(0, runs))
    finally:
        sys.settrace(None)
    return opcodes, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 2 if args.quick else args.runs
    # the workload's own warm-up (three runs) is traced too: count it out with a second pass
    more, more_calls = _count(runs)
    base, base_calls = _count(0)
    per_run = {k: (n - base.get(k, 0)) / runs for k, n in more.items()}
    calls = {k: (n - base_calls.get(k, 0)) / runs for k, n in more_calls.items()}
    total, total_calls = sum(per_run.values()), sum(calls.values())
    if args.quick:
        print(json.dumps({"bytecodes_per_run": round(total, 1), "calls_per_run": total_calls}))
        return
    print(f"bytecodes/run {total:.1f} calls/run {total_calls:.1f}")
    for (where, name), n in sorted(per_run.items(), key=lambda kv: -kv[1])[:25]:
        print(f"{n:8.1f} {calls.get((where, name), 0):5.1f} {where}:{name}")


if __name__ == "__main__":
    main()
