"""A process that uses PostgresStore and never closes it exits all the same, and the end of
each event loop closes that loop's connections.

The first tests start fresh Python processes that pause and resume runs with `Runner.query_sync`
and `resume_sync` on a PostgresStore they never close, and requires every one of them to
exit within a bound. Connecting through a proxy that delays every packet makes it all but
certain that the pool is still opening a connection in the background when a loop ends.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import plait
from plait import ChatModelAgent, Runner, interrupt, tool
from plait.stores import PostgresStore
from plait.testing import ScriptedModel, call, reply
from tests.stores.faults import FaultProxy

SRC = Path(plait.__file__).resolve().parents[1]  # the plait under test, for the processes
DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")

#: Seconds a process may take; it does its work in a few, and hangs forever if it hangs.
EXIT_BOUND = 60.0

UNCLOSED_RUNS = """
import sys
from plait import ChatModelAgent, Runner, interrupt, tool
from plait.stores import PostgresStore
from plait.testing import ScriptedModel, call, reply


@tool
def approve(item: str) -> str:
    '''Ask a person.

    Args:
        item: What to approve.
    '''
    return f"{item}: {interrupt({'approve': item})}"


dsn, prefix, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = PostgresStore(dsn, table_prefix=prefix, max_size=4)
model = ScriptedModel([call("approve", {"item": "x"}, id="c1"), reply("done")] * rounds)
runner = Runner(ChatModelAgent("Clerk", model, tools=[approve]), store=store)
for _ in range(rounds):
    paused = runner.query_sync("approve x")
    assert paused.checkpoint_id is not None, paused.error
    resumed = runner.resume_sync(paused.checkpoint_id, value="yes")
    assert resumed.final_output == "done", resumed.error
print("done")
"""


@pytest.fixture
def table_prefix() -> Iterator[str]:
    """Return a table prefix of this test's own; skip without a server; drop the tables after."""
    import psycopg

    try:
        psycopg.connect(DSN, connect_timeout=5).close()
    except psycopg.Error as exc:
        pytest.skip(f"no PostgreSQL server at {DSN}: {exc}")
    prefix = f"plait_exit_{uuid.uuid4().hex[:12]}_"
    yield prefix
    with psycopg.connect(DSN, autocommit=True) as connection:
        for table in ("checkpoints", "sessions", "schema_version"):
            connection.execute(f"DROP TABLE IF EXISTS {prefix}{table}")


async def _exits(dsn: str, prefix: str, rounds: int) -> tuple[int | None, str]:
    """Run the script; return its exit code (None if it was still running at the bound)."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        UNCLOSED_RUNS,
        dsn,
        prefix,
        str(rounds),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=EXIT_BOUND)
    except TimeoutError:
        process.kill()
        await process.wait()
        return None, "still running"
    return process.returncode, (out + err).decode(errors="replace")[-2000:]


def _proxied(dsn: str, proxy: FaultProxy) -> str:
    """Return `dsn` pointed at the proxy."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params.update(host=proxy.host, port=str(proxy.port))
    return make_conninfo(**params)


@pytest.mark.timeout(300)
async def test_unclosed_stores_never_keep_a_process_from_exiting(table_prefix: str) -> None:
    outcomes = await asyncio.gather(*(_exits(DSN, table_prefix, 15) for _ in range(6)))
    assert [code for code, _ in outcomes] == [0] * 6, outcomes


@pytest.mark.timeout(300)
async def test_unclosed_stores_on_a_slow_network_never_keep_a_process_from_exiting(
    table_prefix: str,
) -> None:
    host, _, port = DSN.rpartition("@")[2].partition("/")[0].partition(":")
    async with FaultProxy(host, int(port or 5432), delay=0.05) as proxy:
        proxy.set_mode("delay")
        outcomes = await asyncio.gather(
            *(_exits(_proxied(DSN, proxy), table_prefix, 2) for _ in range(3))
        )
    assert [code for code, _ in outcomes] == [0] * 3, outcomes


@tool
def approve(item: str) -> str:
    """Ask a person.

    Args:
        item: What to approve.
    """
    return f"{item}: {interrupt({'approve': item})}"


@pytest.mark.timeout(120)
def test_each_event_loop_closes_its_connections(table_prefix: str) -> None:
    import psycopg

    app = f"plait-loops-{uuid.uuid4().hex[:8]}"
    dsn = f"{DSN}{'&' if '?' in DSN else '?'}application_name={app}"
    rounds = 15
    model = ScriptedModel([call("approve", {"item": "x"}, id="c1"), reply("done")] * rounds)
    store = PostgresStore(dsn, table_prefix=table_prefix)
    runner = Runner(ChatModelAgent("Clerk", model, tools=[approve]), store=store)
    for _ in range(rounds):  # every *_sync call runs its own event loop
        paused = runner.query_sync("approve x")
        assert paused.checkpoint_id is not None, paused.error
        assert runner.resume_sync(paused.checkpoint_id, value="yes").final_output == "done"
    with psycopg.connect(DSN, autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)
        ).fetchone()
    assert row is not None and row[0] <= 1  # the last loop's may still be closing
