"""Several processes resume one checkpoint at once: exactly one wins, on every shared store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PG_DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("PLAIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from plait import ChatModelAgent, Runner, interrupt, tool
    from plait.errors import PlaitError
    from plait.stores import PostgresStore, RedisStore, SqliteStore
    from plait.testing import ScriptedModel, call, reply

    kind, where, prefix, mode, checkpoint_id = sys.argv[1:6]

    @tool
    def approve() -> str:
        \"\"\"Ask a person.\"\"\"
        return f"approved: {interrupt('ok?')}"

    def open_store():
        if kind == "sqlite":
            return SqliteStore(where)
        if kind == "postgres":
            return PostgresStore(where, table_prefix=prefix)
        return RedisStore(where, prefix=prefix)

    async def main():
        store = open_store()
        model = ScriptedModel([call("approve", {})] if mode == "pause" else [reply("done")])
        runner = Runner(ChatModelAgent("A", model, tools=[approve]), store=store)
        try:
            if mode == "pause":
                result = await runner.query("q").collect()
            else:
                result = await runner.resume(checkpoint_id, value="yes").collect()
            out = {"final": result.final_output, "checkpoint": result.checkpoint_id,
                   "error": type(result.error).__name__ if result.error else None}
        except PlaitError as exc:
            out = {"final": None, "checkpoint": None, "error": type(exc).__name__}
        await store.close()
        print(json.dumps(out))

    asyncio.run(main())
    """
)


def _start(script: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _result(proc: subprocess.Popen[str]) -> dict[str, str | None]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    result: dict[str, str | None] = json.loads(out.strip().splitlines()[-1])
    return result


def _where(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return str(tmp_path / "plait.db")
    if kind == "postgres":
        import psycopg

        try:
            psycopg.connect(PG_DSN, connect_timeout=3).close()
        except psycopg.Error as exc:  # only on a machine without a server
            pytest.skip(f"no PostgreSQL server at {PG_DSN}: {exc}")
        return PG_DSN
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis server at {REDIS_URL}: {exc}")
    return REDIS_URL


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_four_processes_resume_one_checkpoint_and_one_wins(kind: str, tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(_SCRIPT)
    where = _where(kind, tmp_path)
    prefix = f"p{uuid.uuid4().hex[:10]}" + ("_" if kind == "postgres" else ":")
    paused = _result(_start(script, kind, where, prefix, "pause", "-"))
    assert paused["final"] is None and paused["checkpoint"] is not None
    resumers = [
        _start(script, kind, where, prefix, "resume", str(paused["checkpoint"])) for _ in range(4)
    ]
    outcomes = [_result(proc) for proc in resumers]
    winners = [out for out in outcomes if out["final"] == "done"]
    assert len(winners) == 1, outcomes
    losers = [out["error"] for out in outcomes if out["final"] != "done"]
    assert sorted(losers) == ["CheckpointAlreadyResumed"] * 3, outcomes
