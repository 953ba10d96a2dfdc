"""A streamed run's server CPU and socket writes, with uvicorn in this process.

`bench/server.py` runs each server in a process of its own; this one serves the app itself
(uvicorn on asyncio, h11, as `bench/server.py` starts it) and loads it with the same light
client in a subprocess (`bench/loadclient.py`: `--runs` connections, `--bursts` bursts after
a warm-up burst), so it can look inside the server while it serves: the CPU per run of this
process, and how many times per run it wrote to a socket (each write the client may be woken
for). `--profile N` prints the N functions that took most of the server's time (cProfile,
which slows the server: its CPU figure is then not one to quote).

- `--app plait` (default): `bench/server_app.py`'s app on the memory store; `--route v1`
  streams `POST /v1/agents/assistant/runs` (a new session per run), `--route ap` the Agent
  Protocol's `POST /threads/{id}/runs/stream` (a new thread per run, `stream_mode="values"`);
- `--app bare`: the bare FastAPI app of `bench/server_bare.py` (its one route).

    python bench/server_writes.py                    # plait's /v1 route
    python bench/server_writes.py --route ap --profile 30
    python bench/server_writes.py --app bare
    python bench/server_writes.py --quick

Prints one JSON line: the app, route, runs, CPU per run (µs) and socket writes per run.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

_CLIENT = r"""
import asyncio, sys, uuid
sys.path.insert(0, sys.argv[1])
from loadclient import LightClient

port, route, runs, bursts = int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
AP = {"assistant_id": "assistant", "stream_mode": "values", "if_not_exists": "create",
      "input": {"messages": [{"role": "user", "content": "Please add some numbers."}]}}


async def one(client):
    if route == "ap":
        path, body = f"/threads/{uuid.uuid4()}/runs/stream", AP
    else:
        path = "/v1/agents/assistant/runs"
        body = {"input": "Please add some numbers.", "session_id": uuid.uuid4().hex}
    last = ""
    async for line in client.lines(path, body):
        last = line or last
    if not last.startswith("data:"):
        raise SystemExit(f"a stream ended without its last event: {last!r}")


async def main():
    clients = [LightClient("127.0.0.1", port) for _ in range(runs)]
    await asyncio.gather(*(one(c) for c in clients))  # warm-up: opens the connections
    print("warm", flush=True)
    sys.stdin.readline()
    for _ in range(bursts):
        await asyncio.gather(*(one(c) for c in clients))
    print("done", flush=True)


asyncio.run(main())
"""


class _Writes:
    """Counts the socket writes of this process (`socket.socket.send`, as asyncio's
    transports write)."""

    def __init__(self) -> None:
        self.count = 0
        self._send = socket.socket.send
        counter = self

        def send(sock: socket.socket, data: Any, *args: Any) -> int:
            counter.count += 1
            return counter._send(sock, data, *args)

        socket.socket.send = send  # type: ignore[method-assign,assignment]


def _app(which: str) -> Any:
    if which == "bare":
        import server_bare

        return server_bare.build()
    import server_app

    return server_app.build()


async def _serve(which: str, route: str, runs: int, bursts: int, profile: int) -> dict[str, Any]:
    import uvicorn

    with socket.socket() as probe:  # a free port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        _app(which),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=300,
        loop="asyncio",
        http="h11",
    )
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
        await asyncio.sleep(0.01)
    args = [str(BENCH), str(port), route if which == "plait" else "v1", str(runs), str(bursts)]
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CLIENT, *args, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert client.stdin is not None and client.stdout is not None
    if (await client.stdout.readline()).strip() != b"warm":
        raise SystemExit("the load client failed to warm up")
    writes = _Writes()
    profiler = cProfile.Profile() if profile else None
    cpu = time.process_time()
    if profiler is not None:
        profiler.enable()
    client.stdin.write(b"go\n")
    await client.stdin.drain()
    if (await client.stdout.readline()).strip() != b"done":
        raise SystemExit("the load client failed")
    if profiler is not None:
        profiler.disable()
    cpu = time.process_time() - cpu
    await client.wait()
    server.should_exit = True
    await serving
    if profiler is not None:
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(profile)
    done = runs * bursts
    return {
        "app": which,
        "route": route if which == "plait" else "v1",
        "runs": done,
        "cpu_us_per_run": cpu / done * 1e6,
        "writes_per_run": writes.count / done,
        "profiled": bool(profile),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", choices=("plait", "bare"), default="plait")
    parser.add_argument("--route", choices=("v1", "ap"), default="v1", help="plait's route")
    parser.add_argument("--runs", type=int, default=200, help="concurrent runs per burst")
    parser.add_argument("--bursts", type=int, default=6, help="timed bursts")
    parser.add_argument("--profile", type=int, default=0, help="print the N costliest functions")
    parser.add_argument("--quick", action="store_true", help="20 runs, one burst")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.bursts = 20, 1
    figures = asyncio.run(_serve(args.app, args.route, args.runs, args.bursts, args.profile))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
