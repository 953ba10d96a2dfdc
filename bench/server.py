"""Load on plait's HTTP server next to Google ADK's API server: streamed runs over a socket.

Each server runs in a subprocess of its own (uvicorn, no access log, no uvloop/httptools)
on a zero-latency scripted model: one `add` tool call, then a 50-word answer (three events
per run). The same client sends bursts of `--runs` concurrent streamed runs, one connection
per run, after a warm-up burst that also opens the connections, and reads every event:

- plait: `POST /v1/agents/assistant/runs` with a fresh `session_id` per run (the run
  creates the session), `python -m uvicorn --factory --app-dir bench server_app:build`;
- plait's Agent Protocol (`plait_ap`), the same app on the same machine:
  `POST /threads/{id}/runs/stream` on a fresh thread per run (`if_not_exists="create"`),
  `stream_mode="values"` (the SDK's default), as the `langgraph-sdk` client asks for it;
- ADK: `POST /run_sse` on a session created per run beforehand through
  `POST /apps/bench_agent/users/u/sessions` (not timed), served by `bench/server_adk.py`
  with the Python of `--peer-python` (default `/tmp/venv-adk/bin/python`, see
  bench/README.md for how to make it). Without it ADK is reported as skipped, with why.

The client (`bench/loadclient.py`) is a minimal HTTP/1.1 client by default; `--client
httpx` uses httpx instead, which spends about as much CPU per run as plait's server does,
so on a small machine it measures itself as much as the server.

Stores: `sqlite` (plait: `SqliteStore` in a temporary directory, the default a user gets;
ADK: its default, local SQLite sessions) and `memory` (both in memory). Figures per server
and store: streamed runs/s (completed runs, median of the bursts), time to first event
(client side, request sent -> first SSE event received; p50 and p99 over every run of every
burst), the server process's peak RSS (`VmHWM` of /proc/<pid>/status) at the end, its CPU
time per run and the client's, and the time to first event of runs sent one at a time.

`--floor` measures plait against the floor instead: `bench/server_bare.py`, a bare FastAPI
app streaming the same four events on the same route with no agent, store or checks (`--floor-app`
names another such module). The two alternate, `--rounds` times each (default 3), plait on the
memory store: server CPU per run and runs/s of each (medians over the rounds), and plait's ratio
to the floor (the median of the rounds' ratios, each round's plait to the bare app just before).

Run: `python bench/server.py` (`--quick`: 20 runs, one burst, SQLite only; with `--floor`:
20 runs, one burst, one round). Prints one line per figure and a final JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadclient import Client, open_clients

BENCH = Path(__file__).resolve().parent
DEFAULT_PEER = Path("/tmp/venv-adk/bin/python")
PROMPT = "Please add some numbers."
START_TIMEOUT = 120.0
KEEP_ALIVE = 300  # seconds an idle connection stays open (uvicorn's default, 5, is too short)


@dataclass
class Server:
    """A server under load: how to start it, where it answers, how a run is asked for."""

    label: str
    argv: list[str]
    env: dict[str, str]
    health: str
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """Return the server's base URL."""
        return f"http://127.0.0.1:{self.port}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def plait_server(store: str, tmp: Path) -> Server:
    """Return plait's server on `store` ("sqlite": a file in `tmp`, or "memory")."""
    url = f"sqlite:///{tmp / 'plait.db'}" if store == "sqlite" else "memory://"
    env = {**os.environ, "PLAIT_BENCH_STORE": url}
    argv = [sys.executable, "-m", "uvicorn", "--factory", "--app-dir", str(BENCH)]
    argv += ["server_app:build", "--no-access-log", "--log-level", "warning"]
    argv += ["--timeout-keep-alive", str(KEEP_ALIVE)]
    return Server(f"plait_{store}", argv, env, "/healthz", extra={"kind": "plait"})


def bare_server(app: Path) -> Server:
    """Return the bare app of the module file `app` (a `build()` factory, see `--floor`)."""
    argv = [sys.executable, "-m", "uvicorn", "--factory", "--app-dir", str(app.parent)]
    argv += [f"{app.stem}:build", "--no-access-log", "--log-level", "warning"]
    argv += ["--timeout-keep-alive", str(KEEP_ALIVE)]
    return Server("bare", argv, dict(os.environ), "/healthz", extra={"kind": "plait"})


def agent_protocol_server(store: str, tmp: Path) -> Server:
    """Return plait's server on `store`, driven through its Agent Protocol routes."""
    server = plait_server(store, tmp)
    return Server(f"plait_ap_{store}", server.argv, server.env, "/healthz", extra={"kind": "ap"})


def adk_server(store: str, tmp: Path, python: Path) -> Server:
    """Return ADK's API server with its default (SQLite) or in-memory session store."""
    argv = [str(python), str(BENCH / "server_adk.py"), "--dir", str(tmp)]
    argv += ["--sessions", "memory" if store == "memory" else "default"]
    argv += ["--keep-alive", str(KEEP_ALIVE)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return Server(f"adk_{store}", argv, env, "/health", extra={"kind": "adk"})


@contextlib.contextmanager
def running(server: Server, log: Path) -> Iterator[Server]:
    """Start the server's process on a free port; stop it on leaving."""
    server.port = _free_port()
    argv = [*server.argv, "--port", str(server.port)]
    with log.open("wb") as out:
        server.process = subprocess.Popen(argv, env=server.env, stdout=out, stderr=out)
    try:
        _wait_ready(server, log)
        yield server
    finally:
        server.process.terminate()
        try:
            server.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


def _wait_ready(server: Server, log: Path) -> None:
    assert server.process is not None
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.label} exited:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(server.url + server.health, timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{server.label} did not answer within {START_TIMEOUT:.0f} s")


def memory_mb(pid: int, field_name: str) -> float:
    """Return a memory figure of /proc/<pid>/status (VmHWM: peak RSS, VmRSS: now) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field_name} in /proc/{pid}/status")


# --- the runs -------------------------------------------------------------------------------


async def _requests(clients: list[Client], server: Server) -> list[tuple[str, Any]]:
    """Return the (path, body) of each run; ADK's sessions are created here (not timed)."""
    if server.extra["kind"] == "plait":
        return [("/v1/agents/assistant/runs", plait_body()) for _ in clients]
    if server.extra["kind"] == "ap":
        return [(f"/threads/{uuid.uuid4()}/runs/stream", AP_BODY) for _ in clients]

    async def session(client: Client) -> str:
        sid: str = (await client.post_json("/apps/bench_agent/users/u/sessions", {}))["id"]
        return sid

    message = {"role": "user", "parts": [{"text": PROMPT}]}
    sessions = [await session(client) for client in clients]  # at once, SQLite is "locked"
    return [
        ("/run_sse", {"app_name": "bench_agent", "user_id": "u", "session_id": sid,
                      "new_message": message, "streaming": False})
        for sid in sessions
    ]  # fmt: skip


def plait_body() -> dict[str, Any]:
    """Return the body of one plait run: the prompt, in a new session."""
    return {"input": PROMPT, "session_id": uuid.uuid4().hex}


#: The body of one Agent Protocol run: the prompt, on a thread the run creates.
AP_BODY = {
    "assistant_id": "assistant",
    "input": {"messages": [{"role": "user", "content": PROMPT}]},
    "stream_mode": "values",
    "if_not_exists": "create",
}


@dataclass
class Outcome:
    """What the client saw of one streamed run (`answered`: an event carried the answer)."""

    first_event: float
    events: int
    last: str
    answered: bool = False


async def _one(client: Client, path: str, body: Any) -> Outcome:
    """Send one streamed run and read it whole; time its first SSE event."""
    start = time.perf_counter()
    first = 0.0
    events = 0
    last = ""
    answered = False
    async for line in client.lines(path, body):
        if line.startswith("data:"):
            if not events:
                first = time.perf_counter() - start
            events += 1
            last = line
            answered = answered or "word49" in line
    return Outcome(first, events, last, answered)


def completed(server: Server, outcome: Outcome) -> bool:
    """Whether the run streamed its three events and ended with the answer."""
    if server.extra["kind"] == "plait":
        return outcome.events == 4 and '"status":"completed"' in outcome.last
    if server.extra["kind"] == "ap":  # metadata, values per step, then `end`
        return outcome.answered and outcome.last.replace(" ", "") == "data:null"
    return outcome.events == 3 and "word49" in outcome.last


@dataclass
class Burst:
    """One burst: completed runs/s, each run's time to first event, the runs that failed,
    and the CPU seconds the server and the client spent."""

    runs_per_s: float
    first_events: list[float]
    failed: list[Outcome]
    server_cpu: float
    client_cpu: float


def cpu_seconds(pid: int) -> float:
    """Return the CPU time process `pid` has used, in seconds: the sum of its threads' run
    times in nanoseconds (`/proc/<pid>/task/*/schedstat`); where the kernel keeps none, its
    user + system time in clock ticks (10 ms: too coarse for a few runs)."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):  # a thread that just ended
                total += int((task / "schedstat").read_text().split()[0])
    except OSError:
        total = 0
    if total:
        return total / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def burst(clients: list[Client], server: Server) -> Burst:
    """Run one streamed run per client at once; a run that did not complete has failed."""
    assert server.process is not None
    requests = await _requests(clients, server)
    cpu = cpu_seconds(server.process.pid), time.process_time()
    start = time.perf_counter()
    runs = (_one(c, path, body) for c, (path, body) in zip(clients, requests, strict=True))
    outcomes = await asyncio.gather(*runs)
    elapsed = time.perf_counter() - start
    server_cpu = cpu_seconds(server.process.pid) - cpu[0]
    failed = [o for o in outcomes if not completed(server, o)]
    rate = (len(outcomes) - len(failed)) / elapsed
    firsts = [o.first_event for o in outcomes]
    return Burst(rate, firsts, failed, server_cpu, time.process_time() - cpu[1])


async def alone(client: Client, server: Server, n: int) -> list[float]:
    """Run `n` streamed runs one after the other; return each one's time to first event."""
    firsts = []
    for _ in range(n):
        ((path, body),) = await _requests([client], server)
        firsts.append((await _one(client, path, body)).first_event)
    return firsts


def percentile(values: list[float], q: float) -> float:
    """Return the `q` quantile (0..1) of `values`, nearest-rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def measure(server: Server, client: str, runs: int, bursts: int) -> dict[str, float]:
    """Warm the server up, time `bursts` bursts of `runs` concurrent streamed runs, then
    runs one at a time (the time to first event of a server with nothing else to do)."""
    assert server.process is not None
    idle = memory_mb(server.process.pid, "VmRSS")
    clients = open_clients(client, "127.0.0.1", server.port, runs)
    try:
        warm = await burst(clients, server)  # imports, caches, the connections
        timed = [await burst(clients, server) for _ in range(bursts)]
        single = await alone(clients[0], server, max(5, runs // 4))
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))
    failed = [o for b in [warm, *timed] for o in b.failed]
    if failed:
        print(f"{server.label}: {len(failed)} runs failed, e.g. {failed[0]}", file=sys.stderr)
    firsts = [t for b in timed for t in b.first_events]
    done = runs * bursts
    return {
        "runs_per_s": statistics.median(b.runs_per_s for b in timed),
        "failed_runs": float(sum(len(b.failed) for b in timed)),
        "ttfe_p50_ms": percentile(firsts, 0.5) * 1e3,
        "ttfe_p99_ms": percentile(firsts, 0.99) * 1e3,
        "peak_rss_mb": memory_mb(server.process.pid, "VmHWM"),
        "idle_rss_mb": idle,
        "server_cpu_us_per_run": sum(b.server_cpu for b in timed) / done * 1e6,
        "client_cpu_us_per_run": sum(b.client_cpu for b in timed) / done * 1e6,
        "alone_ttfe_p50_ms": percentile(single, 0.5) * 1e3,
    }


# --- the benchmark --------------------------------------------------------------------------


def peer_python(given: str | None, no_peer: bool) -> tuple[Path | None, str | None]:
    """Return (ADK's Python, None), or (None, why the peer is skipped)."""
    if no_peer:
        return None, "--no-peer"
    python = Path(given) if given else DEFAULT_PEER
    if not python.exists():
        return None, f"{python} does not exist (see bench/README.md to create ADK's venv)"
    check = [str(python), "-c", "import google.adk, uvicorn"]
    if subprocess.run(check, capture_output=True, check=False).returncode != 0:
        return None, f"{python} cannot import google.adk (pip install google-adk)"
    return python, None


def servers(stores: list[str], peer: Path | None, tmp: Path) -> list[Server]:
    """Return every server to measure, plait first, each with a directory of its own."""
    found = []
    for store in stores:
        (tmp / f"plait_{store}").mkdir()
        found.append(plait_server(store, tmp / f"plait_{store}"))
        (tmp / f"plait_ap_{store}").mkdir()
        found.append(agent_protocol_server(store, tmp / f"plait_ap_{store}"))
    for store in stores if peer is not None else []:
        (tmp / f"adk_{store}").mkdir()
        found.append(adk_server(store, tmp / f"adk_{store}", peer))
    return found


def main(args: argparse.Namespace) -> dict[str, Any]:
    """Measure every server one after the other; return the figures."""
    runs, bursts = (20, 1) if args.quick else (args.runs, args.bursts)
    stores = ["sqlite"] if args.quick else ["sqlite", "memory"]
    peer, skipped = peer_python(args.peer_python, args.no_peer)
    figures: dict[str, Any] = {"runs": runs, "bursts": bursts, "client": args.client}
    figures["peer_skipped"] = skipped
    with tempfile.TemporaryDirectory(prefix="plait-bench-server-") as tmp:
        for server in servers(stores, peer, Path(tmp)):
            try:
                with running(server, Path(tmp) / f"{server.label}.log"):
                    measured = asyncio.run(measure(server, args.client, runs, bursts))
            except Exception as exc:  # the peer's failure is a figure, plait's is not
                if server.extra["kind"] in ("plait", "ap"):
                    raise
                figures[f"{server.label}_error"] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            figures.update({f"{server.label}_{k}": v for k, v in measured.items()})
    return figures | goals(figures, stores)


#: The figures `--floor` reports of each server.
FLOOR_FIGURES = ("runs_per_s", "server_cpu_us_per_run", "ttfe_p50_ms", "alone_ttfe_p50_ms")


def floor(args: argparse.Namespace) -> dict[str, Any]:
    """Alternate the bare app and plait (memory store) `--rounds` times; return each one's
    figures per round, their medians and plait's ratios to the floor."""
    runs, bursts, rounds = (20, 1, 1) if args.quick else (args.runs, args.bursts, args.rounds)
    seen: dict[str, list[dict[str, float]]] = {"bare": [], "plait": []}
    with tempfile.TemporaryDirectory(prefix="plait-bench-floor-") as tmp:
        for round_ in range(rounds):
            pair = {
                "bare": bare_server(Path(args.floor_app)),
                "plait": plait_server("memory", Path(tmp)),
            }
            for name, server in pair.items():
                with running(server, Path(tmp) / f"{name}-{round_}.log"):
                    measured = asyncio.run(measure(server, args.client, runs, bursts))
                if measured["failed_runs"]:
                    raise RuntimeError(f"{name}: {measured['failed_runs']:.0f} runs failed")
                seen[name].append({k: measured[k] for k in FLOOR_FIGURES})
                print(
                    f"round {round_ + 1} {name:>5}: "
                    + ", ".join(f"{k} {measured[k]:,.1f}" for k in FLOOR_FIGURES),
                    file=sys.stderr,
                )
    figures: dict[str, Any] = {
        "runs": runs,
        "bursts": bursts,
        "rounds": rounds,
        "client": args.client,
    }
    figures["floor_rounds"] = seen
    for name, found in seen.items():
        for key in FLOOR_FIGURES:
            figures[f"{name}_{key}"] = statistics.median(f[key] for f in found)
    pairs = list(zip(seen["plait"], seen["bare"], strict=True))
    figures["ratio_server_cpu"] = statistics.median(
        p["server_cpu_us_per_run"] / b["server_cpu_us_per_run"] for p, b in pairs
    )
    figures["ratio_runs_per_s"] = statistics.median(
        p["runs_per_s"] / b["runs_per_s"] for p, b in pairs
    )
    figures["goal_cpu_1_5x_floor"] = figures["ratio_server_cpu"] <= 1.5
    return figures


def goals(figures: dict[str, Any], stores: list[str]) -> dict[str, Any]:
    """Return the ratios to ADK and whether plait meets its goals (>= 10x ADK's runs/s,
    p99 time to first event <= 20 ms)."""
    found: dict[str, Any] = {}
    for store in stores:
        plait, adk = f"plait_{store}_", f"adk_{store}_"
        if adk + "runs_per_s" in figures:
            found[f"ratio_{store}_runs_per_s"] = (
                figures[plait + "runs_per_s"] / figures[adk + "runs_per_s"]
            )
            found[f"ratio_{store}_server_cpu"] = (
                figures[adk + "server_cpu_us_per_run"] / figures[plait + "server_cpu_us_per_run"]
            )
            found[f"goal_{store}_10x_runs_per_s"] = found[f"ratio_{store}_runs_per_s"] >= 10
        found[f"goal_{store}_ttfe_p99_20ms"] = figures[plait + "ttfe_p99_ms"] <= 20
        if f"plait_ap_{store}_runs_per_s" in figures:  # the Agent Protocol's share of /v1's
            found[f"ratio_{store}_ap_to_v1_runs_per_s"] = (
                figures[f"plait_ap_{store}_runs_per_s"] / figures[plait + "runs_per_s"]
            )
    return found


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the servers on the way out
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 runs, one burst, SQLite only")
    parser.add_argument("--runs", type=int, default=200, help="concurrent runs per burst")
    parser.add_argument("--bursts", type=int, default=3, help="timed bursts per server")
    parser.add_argument("--peer-python", help=f"ADK's Python (default {DEFAULT_PEER})")
    parser.add_argument("--no-peer", action="store_true", help="measure plait only")
    parser.add_argument("--floor", action="store_true", help="plait next to a bare FastAPI app")
    parser.add_argument(
        "--floor-app", default=str(BENCH / "server_bare.py"), help="the floor's module"
    )
    parser.add_argument("--rounds", type=int, default=3, help="--floor: rounds of each server")
    parser.add_argument(
        "--client", choices=["light", "httpx"], default="light", help="see bench/loadclient.py"
    )
    parsed = parser.parse_args()
    figures = floor(parsed) if parsed.floor else main(parsed)
    for name, value in figures.items():
        if isinstance(value, float):
            print(f"{name:>34}: {value:,.1f}")
        elif value is not None and not isinstance(value, dict):
            print(f"{name:>34}: {value}")
    print(json.dumps(figures))
