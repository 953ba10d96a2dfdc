"""A streamed `/v1` run's CPU in process: the app driven by ASGI calls, without sockets.

`bench/server.py` measures the server over sockets, where uvicorn and the loop's socket work
are part of every figure; this drives the same apps (`bench/server_app.py`'s plait app on the
memory store, `bench/server_bare.py`'s bare app) with the ASGI messages uvicorn would send,
`--runs` concurrent streamed runs at a time (each in a new session), and prints the process
CPU per run and what the garbage collector took of it. `--without` takes parts of a plait
run out, to see what each costs (the figures are then not a server's: it is a measuring aid):

- `ledger`: no cost ledger (the app's `Tenants` hidden from its runs);
- `durable`: no step checkpoints (`durability="exit"`);
- `session`: no session (the run's `session_id` dropped);
- `kept`: no kept stream for re-attaching (`GET /v1/runs/{id}/stream`);
- `records`: no "running" record, final record or index of runs.

    python bench/server_inproc.py                      # plait, then the bare app, 3 rounds
    python bench/server_inproc.py --without ledger,durable
    python bench/server_inproc.py --quick
    python bench/server_inproc.py --route ap           # the Agent Protocol's stream route

`--route ap` drives the same app through the Agent Protocol instead: `POST
/threads/{id}/runs/stream` on a new thread per run (`if_not_exists="create"`,
`stream_mode="values"`, as `bench/server.py` asks for it).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
PATH = "/v1/agents/assistant/runs"
AP_BODY = {
    "assistant_id": "assistant",
    "input": {"messages": [{"role": "user", "content": "Please add some numbers."}]},
    "stream_mode": "values",
    "if_not_exists": "create",
}
PARTS = ("ledger", "durable", "session", "kept", "records")


async def _start(app: App) -> None:
    """Run the app's lifespan up to its start (it is left running)."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await inbox.put({"type": "lifespan.startup"})
    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    _LIFESPANS.add(asyncio.ensure_future(app(scope, inbox.get, outbox.put)))
    started = await outbox.get()
    if started["type"] != "lifespan.startup.complete":
        raise SystemExit(f"the app did not start: {started}")


_LIFESPANS: set[asyncio.Future[None]] = set()


async def _one(app: App, route: str = "v1") -> None:
    """POST one streamed run (`route`: "v1" or "ap") and read its stream to the end."""
    if route == "ap":
        path, body = f"/threads/{uuid.uuid4()}/runs/stream", json.dumps(AP_BODY)
    else:
        body = json.dumps({"input": "Please add some numbers.", "session_id": uuid.uuid4().hex})
        path = PATH
    data = body.encode()
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    sent, ended = False, asyncio.Event()
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": data, "more_body": False}
        await ended.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start" and message["status"] != 200:
            raise SystemExit(f"the run was refused: {message}")
        if message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                ended.set()

    await app(scope, receive, send)
    last = b"".join(chunks).rstrip().rsplit(b"\n", 2)
    if (b"event: end" if route == "ap" else b"event: run_end") not in b"\n".join(last):
        raise SystemExit(f"a stream ended without its last event: {last!r}")


def _take_out(parts: set[str]) -> None:
    """Take `parts` out of every plait run of this process (see the module's docstring)."""
    from plait.run import runner
    from plait.server import run_route, runs, users

    if "ledger" in parts:
        make = runs.Runs._runner

        def without_ledger(self: Any, run: Any, hooks: Any, *, streaming: bool = False) -> Any:
            tenants, self.tenants = self.tenants, None
            try:
                return make(self, run, hooks, streaming=streaming)
            finally:
                self.tenants = tenants

        runs.Runs._runner = without_ledger  # type: ignore[method-assign]
    if "durable" in parts:
        init = runner.Runner.__init__

        def at_exit(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **{**kwargs, "durability": "exit"})

        runner.Runner.__init__ = at_exit  # type: ignore[method-assign]
    if "session" in parts:
        start = runs.Runs.start

        async def sessionless(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await start(self, *args, **{**kwargs, "session_id": None})

        runs.Runs.start = sessionless  # type: ignore[method-assign]
    if "kept" in parts:
        run_route.kept_relay = lambda runs, deltas: None  # type: ignore[assignment,return-value]
    if "records" in parts:

        async def nothing(*args: Any, **kwargs: Any) -> None:
            return None

        runs.LiveRun.record_running = nothing  # type: ignore[method-assign]
        runs.LiveRun._list = nothing  # type: ignore[method-assign]
        users.UserStore.put_record = nothing  # type: ignore[method-assign]


async def _measure(app: App, runs: int, bursts: int, route: str) -> dict[str, float]:
    """Return the CPU per run and the collector's share, over `bursts` of `runs` at once."""
    await _start(app)
    await asyncio.gather(*(_one(app, route) for _ in range(runs)))  # warm-up
    spent, began = [0.0], [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            spent[0] += time.perf_counter() - began[0]

    gc.callbacks.append(timed)
    cpu = time.process_time()
    for _ in range(bursts):
        await asyncio.gather(*(_one(app, route) for _ in range(runs)))
    cpu = time.process_time() - cpu
    gc.callbacks.remove(timed)
    done = runs * bursts
    return {"cpu_us_per_run": cpu / done * 1e6, "gc_us_per_run": spent[0] / done * 1e6}


def _round(which: str, runs: int, bursts: int, without: set[str], route: str) -> dict[str, float]:
    """Measure the app `which` ("plait" or "bare") in a process of its own."""
    import subprocess

    args = [sys.executable, __file__, "--one", which, "--runs", str(runs), "--route", route]
    args += ["--bursts", str(bursts), "--without", ",".join(sorted(without))]
    out = subprocess.run(args, capture_output=True, text=True, check=False, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the {which} round failed:\n{out.stderr}")
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def _one_process(which: str, runs: int, bursts: int, without: set[str], route: str) -> None:
    if which == "bare":
        import server_bare

        app: Any = server_bare.build()
        route = "v1"  # the floor streams the same events on its one route
    else:
        import server_app

        _take_out(without)
        app = server_app.build()
    print(json.dumps(asyncio.run(_measure(app, runs, bursts, route))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="concurrent runs per burst")
    parser.add_argument("--bursts", type=int, default=6, help="timed bursts per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each app, in turn")
    parser.add_argument("--without", default="", help=f"parts to take out: {', '.join(PARTS)}")
    parser.add_argument("--quick", action="store_true", help="20 runs, one burst, one round")
    parser.add_argument("--route", choices=("v1", "ap"), default="v1", help="plait's route")
    parser.add_argument("--one", choices=("plait", "bare"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    without = {part for part in args.without.split(",") if part}
    if without - set(PARTS):
        raise SystemExit(f"--without takes {', '.join(PARTS)}")
    if args.quick:
        args.runs, args.bursts, args.rounds = 20, 1, 1
    if args.one:
        _one_process(args.one, args.runs, args.bursts, without, args.route)
        return
    rounds: dict[str, list[dict[str, float]]] = {"plait": [], "bare": []}
    for _ in range(args.rounds):
        for which in rounds:
            figures = _round(which, args.runs, args.bursts, without, args.route)
            rounds[which].append(figures)
            print(which, {key: round(value, 1) for key, value in figures.items()}, flush=True)
    medians = {
        f"{which}_{key}": statistics.median(r[key] for r in done)
        for which, done in rounds.items()
        for key in ("cpu_us_per_run", "gc_us_per_run")
    }
    medians["ratio_cpu"] = medians["plait_cpu_us_per_run"] / medians["bare_cpu_us_per_run"]
    summary = {"runs": args.runs, "route": args.route, "without": sorted(without), **medians}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
