"""Many runs of one user at once against a daily token budget, on PostgreSQL: the overspend.

    .venv/bin/python bench/quota_load.py            # 200 runs at once, budget 20,000 tokens
    .venv/bin/python bench/quota_load.py --quick    # 20 runs, budget 2,000 tokens
    .venv/bin/python bench/quota_load.py --workers 2  # the runs spread over two apps

One process serves `create_app(..., quotas={"alice": Quota(tokens_per_day=BUDGET)})` under
uvicorn, on a thread of its own per app (`--workers` apps sharing one PostgreSQL store, as
processes behind a load balancer would). The user starts every run at once (one HTTP request
each, through real sockets). Each run's agent calls a tool twice and then answers: three
model calls, each taking 2 to 20 ms and spending 0.8 to 1.3 times its prompt's estimate
(characters / 4, what the budget reserves by) in and 10 to 60 tokens out, at random. Runs
stop when the budget has no room for their next call (`QuotaExceeded`) or are refused at
the door (`429`).

It prints the budget, what the ledger (`GET /v1/usage`) says was spent, the overspend
(spent minus budget, 0 when under), the largest single call, and how the runs ended. The
promise is that the overspend is never more than one call's usage. The last line is the
figures as JSON. PostgreSQL is `PLAIT_TEST_POSTGRES_DSN` (default
`postgresql://postgres@127.0.0.1:5432/test`); the tables it makes are dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

import httpx
import uvicorn

from plait import ChatModelAgent, Message, Usage, tool
from plait.server import Quota, create_app
from plait.stores import PostgresStore
from plait.testing import FunctionModel, call, reply
from plait.tools.base import ToolInfo

DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
KEY = "key-alice"
TIMEOUT = 600.0


@tool
def lookup(n: int) -> str:
    """Look something up.

    Args:
        n: Which thing.
    """
    return f"thing {n} is {'x' * random.randint(20, 200)}"


async def _think(messages: Sequence[Message], tools: Sequence[ToolInfo]) -> Message:
    await asyncio.sleep(random.uniform(0.002, 0.02))
    chars = sum(len(m.content) + sum(len(c.name) + len(c.arguments) for c in m.tool_calls)
                for m in messages)  # fmt: skip
    given = math.ceil(chars / 4 * random.uniform(0.8, 1.3))  # a tokenizer is not chars / 4
    usage = Usage(input_tokens=given, output_tokens=random.randint(10, 60))
    done = sum(1 for m in messages if m.role == "tool")
    if done < 2:
        return call("lookup", {"n": done}, usage=usage)
    return reply("answered", usage=usage)


class Served:
    """An app on a free port, served by uvicorn on a thread of this process."""

    def __init__(self, store: PostgresStore, budget: int) -> None:
        agent = ChatModelAgent("worker", FunctionModel(_think), tools=[lookup])
        app = create_app(
            [agent],
            store=store,
            api_keys={KEY: "alice"},
            quotas={"alice": Quota(tokens_per_day=budget)},
            agent_protocol=False,
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", ws="none")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(60)


async def _burst(urls: list[str], runs: int) -> Counter[str]:
    """Start `runs` runs at once over the apps at `urls`; count how they ended."""
    limits = httpx.Limits(max_connections=runs + 10, max_keepalive_connections=runs + 10)
    headers = {"authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(timeout=TIMEOUT, limits=limits, headers=headers) as http:

        async def one(i: int) -> str:
            url = f"{urls[i % len(urls)]}/v1/agents/worker/runs"
            response = await http.post(url, json={"input": "work", "stream": False})
            if response.status_code == 429:
                return "refused (429)"
            body = response.json()
            error = body.get("error") or {}
            return str(error.get("type") or body["status"])

        return Counter(await asyncio.gather(*(one(i) for i in range(runs))))


def _ledger(url: str) -> list[dict[str, Any]]:
    rows = httpx.get(
        f"{url}/v1/usage", headers={"authorization": f"Bearer {KEY}"}, timeout=TIMEOUT
    ).json()["rows"]
    return list(rows)


def _drop(prefix: str) -> None:
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as connection:
        for table in ("checkpoints", "sessions", "schema_version"):
            connection.execute(f"DROP TABLE IF EXISTS {prefix}{table}")


def measure(runs: int, budget: int, workers: int) -> dict[str, Any]:
    """Run the burst and return its figures."""
    prefix = f"plait_quota_{uuid.uuid4().hex[:10]}_"
    stores = [PostgresStore(DSN, table_prefix=prefix) for _ in range(workers)]
    try:
        apps = [Served(store, budget) for store in stores]
        urls = [app.__enter__() for app in apps]
        try:
            started = time.perf_counter()
            ended = asyncio.run(_burst(urls, runs))
            seconds = time.perf_counter() - started
            rows = _ledger(urls[0])
        finally:
            for app in apps:
                app.__exit__(None, None, None)
    finally:
        _drop(prefix)
    calls = [row["input_tokens"] + row["output_tokens"] for row in rows]
    spent = sum(calls)
    return {
        "runs": runs,
        "workers": workers,
        "budget": budget,
        "spent": spent,
        "overspend": max(0, spent - budget),
        "largest_call": max(calls, default=0),
        "model_calls": len(calls),
        "ended": dict(sorted(ended.items())),
        "seconds": round(seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="20 runs, budget 2,000 tokens")
    parser.add_argument("--runs", type=int, default=None, help="runs at once (default 200)")
    parser.add_argument("--budget", type=int, default=None, help="tokens_per_day")
    parser.add_argument("--workers", type=int, default=1, help="apps sharing the store")
    args = parser.parse_args()
    runs = args.runs or (20 if args.quick else 200)
    budget = args.budget or (2_000 if args.quick else 20_000)
    figures = measure(runs, budget, args.workers)
    print(
        f"{figures['runs']} runs at once over {figures['workers']} app(s), budget "
        f"{figures['budget']} tokens: spent {figures['spent']} in {figures['model_calls']} "
        f"model calls, overspend {figures['overspend']} (largest single call "
        f"{figures['largest_call']}), in {figures['seconds']} s"
    )
    print(f"runs ended: {figures['ended']}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
