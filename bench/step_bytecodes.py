"""The bytecodes one ReAct step executes, by function: the workload of
`bench/step_instructions.py` (a `ChatModelAgent` with an async tool and a zero-latency
model) traced opcode by opcode with `sys.settrace`, R runs of K steps minus R runs of none.

Unlike an instruction count, the figure is the same from run to run, so two builds compare
exactly (on the same interpreter):

    .venv/bin/python bench/step_bytecodes.py            # total and the 25 busiest functions
    .venv/bin/python bench/step_bytecodes.py --quick    # tiny, as JSON

It prints `bytecodes/step N` and then the busiest functions, `N file:function` each.
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


def _count(steps: int, runs: int) -> Counts:
    """Return the opcodes each function executed over `runs` runs of `steps` steps."""
    counts: Counts = collections.Counter()

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        if event == "opcode":
            code = frame.f_code
            where = code.co_filename.rsplit("/src/", 1)[-1].rsplit("/lib/python", 1)[-1]
            counts[(where, code.co_name)] += 1
        return trace

    asyncio.run(_main(steps, 1))  # warm up, untraced
    sys.settrace(trace)
    try:
        asyncio.run(_main(steps, runs))
    finally:
        sys.settrace(None)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.runs = 2, 1
    with_steps, without = _count(args.steps, args.runs), _count(0, args.runs)
    total = args.steps * args.runs
    per_step = {k: (n - without.get(k, 0)) / total for k, n in with_steps.items()}
    step = sum(per_step.values())
    if args.quick:
        print(json.dumps({"bytecodes_per_step": round(step, 1)}))
        return
    print(f"bytecodes/step {step:.1f}")
    for (where, name), n in sorted(per_step.items(), key=lambda kv: -kv[1])[:25]:
        print(f"{n:8.1f} {where}:{name}")


if __name__ == "__main__":
    main()
