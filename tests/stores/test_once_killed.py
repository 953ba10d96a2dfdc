"""A `"once"` call killed with SIGKILL mid-call is never run again, on every shared store.

One process pauses on the payment's approval; a second approves it and is killed while the
payment is in flight; a third recovers the run: the approval is not asked again, the
payment does not run again (the marker file says "start" once), and the run pauses on an
`unknown_outcome` question, which a fourth settles.

A `"once"` call that finished before the kill (its sibling in the same round of tool calls
was still running) answers from its journal when another process recovers the run: it does
not run again, and the recovered run uses the result it recorded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tests.stores.test_processes import ROOT, _where

_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from plait import AgentContext, ChatModelAgent, Runner, tool
    from plait.stores import PostgresStore, RedisStore, SqliteStore
    from plait.testing import FunctionModel, call

    kind, where, prefix, mode, marker, answer = sys.argv[1:7]

    @tool(effect="once", approval=True)
    async def charge(ctx: AgentContext, cents: int) -> str:
        \"\"\"Charge the customer.\"\"\"
        with open(marker, "a") as out:
            out.write(f"start {ctx.idempotency_key}\\n")
        if mode == "approve":
            await asyncio.sleep(3600)  # killed here
        return f"charged {cents}"

    def model(messages, tools):
        results = [m.content for m in messages if m.role == "tool"]
        if not results:
            return call("charge", {"cents": 500}, id="charge-1")
        return f"result: {results[-1]}"

    def open_store():
        if kind == "sqlite":
            return SqliteStore(where)
        if kind == "postgres":
            return PostgresStore(where, table_prefix=prefix)
        return RedisStore(where, prefix=prefix)

    async def main():
        store = open_store()
        agent = ChatModelAgent("shop", FunctionModel(model), tools=[charge])
        runner = Runner(agent, store=store, durability="step")
        if mode == "pause":
            result = await runner.query("pay", checkpoint_id="pay-run").collect()
        elif mode == "recover":
            result = await runner.resume("pay-run").collect()
        else:
            checkpoint_id, value = json.loads(answer)
            result = await runner.resume(checkpoint_id, value=value, approver="ann").collect()
        audit = await runner.approvals.audit()
        out = {
            "final": result.final_output,
            "checkpoint": result.checkpoint_id,
            "interrupts": [{"id": i.id, "info": i.info} for i in result.interrupts],
            "error": repr(result.error) if result.error else None,
            "audit": [[e["decision"], e["approver"], e["via"]] for e in audit],
        }
        await store.close()
        print(json.dumps(out))

    asyncio.run(main())
    """
)


def _run(script: Path, *args: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _starts(marker: Path) -> list[str]:
    return marker.read_text().splitlines() if marker.exists() else []


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_a_once_call_killed_mid_call_is_not_run_again(kind: str, tmp_path: Path) -> None:
    script, marker = tmp_path / "shop.py", tmp_path / "marker"
    script.write_text(_SCRIPT)
    where = _where(kind, tmp_path)
    prefix = f"k{uuid.uuid4().hex[:10]}" + ("_" if kind == "postgres" else ":")
    common = (kind, where, prefix)
    paused = _run(script, *common, "pause", str(marker), "-")
    [question] = paused["interrupts"]  # type: ignore[misc]
    fingerprint = question["info"]["approval"]["fingerprint"]
    value = {"approved": True, "fingerprint": fingerprint}
    answer = json.dumps([paused["checkpoint"], value])
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, str(script), *common, "approve", str(marker), answer],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not _starts(marker):  # the payment is in flight once the marker says so
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the payment never started"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    if proc.stderr is not None:
        proc.stderr.close()
    recovered = _run(script, *common, "recover", str(marker), "-")
    assert len(_starts(marker)) == 1, _starts(marker)
    [unknown] = recovered["interrupts"]  # type: ignore[misc]
    assert list(unknown["info"]) == ["unknown_outcome"], recovered
    key = unknown["info"]["unknown_outcome"]["key"]
    assert _starts(marker) == [f"start {key}"]
    settle = json.dumps([recovered["checkpoint"], {"outcome": "done", "result": "charged 500"}])
    done = _run(script, *common, "answer", str(marker), settle)
    assert done["final"] == "result: charged 500", done
    assert len(_starts(marker)) == 1
    assert done["audit"] == [["done", "ann", "resume"], ["approved", "ann", "resume"]]


_ROUND = textwrap.dedent(
    """
    import asyncio, json, sys
    from plait import AgentContext, ChatModelAgent, Hooks, Runner, tool
    from plait.stores import PostgresStore, RedisStore, SqliteStore
    from plait.testing import FunctionModel, call, calls

    kind, where, prefix, mode, marker = sys.argv[1:6]

    def note(line):
        with open(marker, "a") as out:
            out.write(line + "\\n")

    @tool(effect="once")
    async def pay(ctx: AgentContext, cents: int) -> str:
        \"\"\"Pay.\"\"\"
        note(f"pay {ctx.idempotency_key}")
        return f"paid {cents} in the {mode} process"

    @tool
    async def ship() -> str:
        \"\"\"Ship the order.\"\"\"
        note(f"ship in the {mode} process")
        if mode == "crash":
            await asyncio.sleep(3600)  # killed here, after pay finished
        return "shipped"

    class Noted(Hooks):
        async def after_tool(self, ctx, call, result):
            if call.name == "pay":  # its journal entry says finished by now
                note(f"finished {result}")
            return None

    def model(messages, tools):
        results = [m.content for m in messages if m.role == "tool"]
        if not results:
            return calls(call("pay", {"cents": 500}, id="pay-1"), call("ship", {}, id="ship-1"))
        return " | ".join(results)

    def open_store():
        if kind == "sqlite":
            return SqliteStore(where)
        if kind == "postgres":
            return PostgresStore(where, table_prefix=prefix)
        return RedisStore(where, prefix=prefix)

    async def main():
        store = open_store()
        agent = ChatModelAgent("shop", FunctionModel(model), tools=[pay, ship])
        runner = Runner(agent, store=store, durability="step", hooks=[Noted()])
        if mode == "crash":
            result = await runner.query("pay and ship", checkpoint_id="round-run").collect()
        else:
            result = await runner.resume("round-run").collect()
        out = {"final": result.final_output, "error": repr(result.error) if result.error else None}
        await store.close()
        print(json.dumps(out))

    asyncio.run(main())
    """
)


def _lines(marker: Path, start: str) -> list[str]:
    return [line for line in _starts(marker) if line.startswith(start)]


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_a_once_call_that_finished_before_a_kill_answers_from_its_journal(
    kind: str, tmp_path: Path
) -> None:
    script, marker = tmp_path / "round.py", tmp_path / "marker"
    script.write_text(_ROUND)
    prefix = f"r{uuid.uuid4().hex[:10]}" + ("_" if kind == "postgres" else ":")
    common = (kind, _where(kind, tmp_path), prefix)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, str(script), *common, "crash", str(marker)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not (_lines(marker, "finished") and _lines(marker, "ship")):  # pay done, ship held
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, _starts(marker)
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    if proc.stderr is not None:
        proc.stderr.close()
    recovered = _run(script, *common, "recover", str(marker))
    assert recovered == {
        "final": "paid 500 in the crash process | shipped",
        "error": None,
    }, recovered
    assert len(_lines(marker, "pay")) == 1, _starts(marker)  # pay ran once, ship twice
    assert _lines(marker, "ship") == ["ship in the crash process", "ship in the recover process"]
