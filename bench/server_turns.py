"""Servers measured in turn under `bench/server.py`'s load: builds side by side, and a floor.

On a shared machine the figures of one run drift with the load; servers measured in turn,
round after round, see the same load. Each `--serve LABEL=CHECKOUT:ROUTE` is plait's app of
the checkout at CHECKOUT (its `src` and `bench`), driven through ROUTE: `v1`
(`POST /v1/agents/assistant/runs`) or `ap` (the Agent Protocol's
`POST /threads/{id}/runs/stream`); `--floor DIR` adds a bare app (`DIR/bare_app.py`'s
`build`, FastAPI streaming the events of a `/v1` run with no agent and no store). Each
server gets `bench/server.py`'s `measure` (a warm-up burst, then `--bursts` bursts of
`--runs` concurrent streamed runs, then runs one at a time) on `--store`, `--rounds` times in
turn. Prints one line per measure and a final JSON line.

Run: `python bench/server_turns.py --serve before=/path/to/old:ap --serve after=.:ap`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import server as bench

SHOWN = ("runs_per_s", "server_cpu_us_per_run", "alone_ttfe_p50_ms")


def plait(label: str, spec: str, store: str) -> bench.Server:
    """Return the server `spec` (`CHECKOUT:ROUTE`) names, on `store`."""
    checkout, _, route = spec.rpartition(":")
    if route not in ("v1", "ap") or not checkout:
        raise SystemExit(f"--serve {label}={spec}: give CHECKOUT:v1 or CHECKOUT:ap")
    root = Path(checkout).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="plait-bench-turns-"))
    make = bench.agent_protocol_server if route == "ap" else bench.plait_server
    server = make(store, tmp)
    server.label = label
    server.env = {**server.env, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{root}"}
    server.argv[server.argv.index("--app-dir") + 1] = str(root / "bench")
    return server


def floor(directory: str) -> bench.Server:
    """Return the bare app of `directory` (`bare_app.py`), asked for runs as `/v1` is."""
    argv = [sys.executable, "-m", "uvicorn", "--factory", "--app-dir", directory]
    argv += ["bare_app:build", "--no-access-log", "--log-level", "warning"]
    argv += ["--timeout-keep-alive", str(bench.KEEP_ALIVE)]
    return bench.Server("floor", argv, dict(os.environ), "/healthz", extra={"kind": "plait"})


def main(args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    """Measure every server `--rounds` times, in turn; return each one's figures."""
    runs, bursts, rounds = (20, 1, 1) if args.quick else (args.runs, args.bursts, args.rounds)
    specs = [given.split("=", 1) for given in args.serve]
    found: dict[str, list[dict[str, float]]] = {}
    for _ in range(rounds):
        servers = [floor(args.floor)] if args.floor else []
        servers += [plait(label, spec, args.store) for label, spec in specs]
        for server in servers:
            log = Path(tempfile.mkdtemp(prefix="plait-bench-turns-")) / "server.log"
            with bench.running(server, log):
                figures: dict[str, Any] = asyncio.run(bench.measure(server, "light", runs, bursts))
            row = {key: round(float(figures[key]), 1) for key in SHOWN}
            found.setdefault(server.label, []).append(row)
            print(server.label, row, flush=True)
    return found


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="append", default=[], help="LABEL=CHECKOUT:ROUTE")
    parser.add_argument("--floor", help="a directory holding bare_app.py")
    parser.add_argument("--store", choices=["memory", "sqlite"], default="memory")
    parser.add_argument("--rounds", type=int, default=2, help="times each server is measured")
    parser.add_argument("--runs", type=int, default=200, help="concurrent runs per burst")
    parser.add_argument("--bursts", type=int, default=3, help="timed bursts per measure")
    parser.add_argument("--quick", action="store_true", help="20 runs, one burst, one round")
    print(json.dumps(main(parser.parse_args())))
