"""Sessions, cancel, per-step checkpoints and resuming in another process, on real stores."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from plait import ChatModelAgent, Message, Runner, Team, tool
from plait.errors import CheckpointCorrupt, ResumeError, RunCancelled, TokenBudgetExceeded
from plait.messages import Usage
from plait.stores import MemoryStore, SqliteStore, Store
from plait.testing import FunctionModel, ScriptedModel, call, reply

ROOT = Path(__file__).resolve().parents[2]
PG_DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("PLAIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


async def _postgres() -> Store:
    from plait.stores import PostgresStore

    store = PostgresStore(PG_DSN, table_prefix=f"t{uuid.uuid4().hex[:10]}_")
    try:
        await store.get_session("probe")
    except Exception as exc:  # no server: only on a machine without one
        pytest.skip(f"no PostgreSQL server at {PG_DSN}: {exc}")
    return store


async def _redis() -> Store:
    from plait.stores import RedisStore

    store = RedisStore(REDIS_URL, prefix=f"t{uuid.uuid4().hex[:10]}:")
    try:
        await store.get_session("probe")
    except Exception as exc:
        pytest.skip(f"no Redis server at {REDIS_URL}: {exc}")
    return store


@tool
def approve(item: str) -> str:
    """Ask a person.

    Args:
        item: What to approve.
    """
    from plait import interrupt

    return f"{item}: {interrupt({'approve': item})}"


# --- sessions --------------------------------------------------------------------------------


async def test_a_session_continues_across_runner_instances() -> None:
    store = MemoryStore()
    first_model = ScriptedModel([reply("Nice to meet you, Ann.")])

    @tool
    def remember(name: str) -> str:
        """Remember a name.

        Args:
            name: The name.
        """
        from plait import run_context

        run_context().session_values["name"] = name
        return "remembered"

    agent = ChatModelAgent("A", first_model, tools=[remember], instruction="User: {name?}")
    await Runner(agent, store=store).query("I am Ann", session_id="s1").collect()
    second_model = ScriptedModel([call("remember", {"name": "Ann"}), reply("Your name is Ann.")])
    agent2 = ChatModelAgent("A", second_model, tools=[remember], instruction="User: {name?}")
    result = await Runner(agent2, store=store).query("Who am I?", session_id="s1").collect()
    assert result.final_output == "Your name is Ann."
    assert [m.content for m in second_model.requests[0].messages] == [
        "User: ",
        "I am Ann",
        "Nice to meet you, Ann.",
        "Who am I?",
    ]
    third_model = ScriptedModel([reply("ok")])
    agent3 = ChatModelAgent("A", third_model, instruction="User: {name?}")
    await Runner(agent3, store=store).query("again", session_id="s1").collect()
    seen = third_model.requests[0].messages
    assert seen[0].content == "User: Ann"  # the value set in turn 2 was kept
    assert [m.role for m in seen[1:]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]


async def test_a_failed_turn_is_kept_in_the_session() -> None:
    store = MemoryStore()
    agent = ChatModelAgent("A", ScriptedModel([reply("one")]))
    await Runner(agent, store=store).query("first", session_id="s").collect()
    broken = ChatModelAgent("A", ScriptedModel([]))
    runner = Runner(broken, store=store)
    result = await runner.query("second", session_id="s").collect()
    assert result.error is not None
    view = await runner.sessions.get("s")
    assert view is not None
    assert [(m.name, m.content) for m in view.messages] == [
        ("user", "first"),
        ("A", "one"),
        ("user", "second"),
    ]
    assert [s.session_id for s in await runner.sessions.list()] == ["s"]


@tool
def explode(item: str) -> str:
    """Fail.

    Args:
        item: Anything.
    """
    raise RuntimeError("boom")


async def test_a_failed_turn_keeps_what_came_before_the_failure_but_no_unanswered_call() -> None:
    store = MemoryStore()
    model = ScriptedModel(
        [
            call("approve_free", {"item": "x"}),
            reply("looked it up"),
            call("explode", {"item": "y"}),
        ]
    )

    @tool
    def approve_free(item: str) -> str:
        """Look.

        Args:
            item: Anything.
        """
        return "seen " + item

    agent = ChatModelAgent("A", model, tools=[approve_free, explode], tool_errors="raise")
    runner = Runner(agent, store=store)
    first = await runner.query("look", session_id="s").collect()
    assert first.error is None
    failed = await runner.query("now fail", session_id="s").collect()
    assert failed.error is not None
    view = await runner.sessions.get("s")
    assert view is not None
    kept = [(m.role, m.content, [c.name for c in m.tool_calls]) for m in view.messages]
    assert kept == [
        ("user", "look", []),
        ("assistant", "", ["approve_free"]),
        ("tool", "seen x", []),
        ("assistant", "looked it up", []),
        ("user", "now fail", []),
    ]  # the call to explode got no result: left out
    again = Runner(ChatModelAgent("A", ScriptedModel([reply("retried")])), store=store)
    retried = await again.query("retry", session_id="s").collect()
    assert retried.final_output == "retried"


async def test_a_paused_turn_joins_the_session_when_resumed() -> None:
    store = MemoryStore()
    model = ScriptedModel([call("approve", {"item": "x"}), reply("approved"), reply("next turn")])
    runner = Runner(ChatModelAgent("A", model, tools=[approve]), store=store)
    paused = await runner.query("please", session_id="s").collect()
    assert await store.get_session("s") is None
    await runner.resume(paused.checkpoint_id, value="yes").collect()  # type: ignore[arg-type]
    await runner.query("and then?", session_id="s").collect()
    roles = [m.role for m in model.requests[2].messages]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]


async def test_a_corrupt_session_is_refused_as_the_runs_error() -> None:
    store = MemoryStore()
    await store.put_session("s", b"not a session")
    result = await (
        Runner(ChatModelAgent("A", ScriptedModel([])), store=store)
        .query("x", session_id="s")
        .collect()
    )
    assert isinstance(result.error, CheckpointCorrupt)
    assert "not a plait session" in str(result.error)
    assert await store.get_session("s") == b"not a session"  # left as it was


# --- cancel ----------------------------------------------------------------------------------


async def test_cancel_stops_at_a_safe_point_and_the_checkpoint_resumes() -> None:
    ran: list[int] = []

    @tool
    async def step(n: int) -> str:
        """Do one step.

        Args:
            n: Which step.
        """
        ran.append(n)
        return f"step {n} done"

    model = ScriptedModel(
        [call("step", {"n": 1}), call("step", {"n": 2}), call("step", {"n": 3}), reply("all done")]
    )
    runner = Runner(ChatModelAgent("A", model, tools=[step]))
    stream = runner.query("go")
    async for event in stream:
        if event.message is not None and event.message.role == "tool":
            assert runner.cancel(stream.checkpoint_id)  # after step 1's result
    result = await stream.collect()
    assert isinstance(result.error, RunCancelled)
    assert result.checkpoint_id == stream.checkpoint_id
    assert ran == [1] and len(model.requests) == 1
    resumed = await runner.resume(stream.checkpoint_id).collect()
    assert resumed.final_output == "all done"
    assert ran == [1, 2, 3]
    assert not runner.cancel("unknown-run")


# --- per-step durability and other processes ------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import asyncio, json, os, sys, time
    from plait import ChatModelAgent, Runner, tool
    from plait.stores import SqliteStore, PostgresStore
    from plait.testing import ScriptedModel, call, reply

    store_kind, where, mode, checkpoint_id, log = sys.argv[1:6]

    @tool
    def work(n: int) -> str:
        \"\"\"Do step n.

        Args:
            n: The step.
        \"\"\"
        with open(log, "a") as f:
            f.write(f"{n}\\n")
        if mode == "crash" and n == 3:
            time.sleep(60)  # killed here
        return f"step {n}"

    @tool
    def approve() -> str:
        \"\"\"Ask a person.\"\"\"
        from plait import interrupt
        return f"approved: {interrupt('ok?')}"

    script = [call("work", {"n": n}) for n in (1, 2, 3, 4)]
    script += [call("approve", {}), reply("finished")]
    if store_kind == "sqlite":
        store = SqliteStore(where)
    else:
        store = PostgresStore(where, table_prefix=os.environ["PREFIX"])

    async def main():
        model = ScriptedModel(script[int(os.environ.get("SKIP", "0")):])
        agent = ChatModelAgent("Worker", model, tools=[work, approve])
        runner = Runner(agent, store=store, durability="step")
        if mode == "resume":
            if "VALUE" in os.environ:
                stream = runner.resume(checkpoint_id, value=os.environ["VALUE"])
            else:
                stream = runner.resume(checkpoint_id)
        else:
            stream = runner.query("go", checkpoint_id=checkpoint_id)
        result = await stream.collect()
        error = str(result.error) if result.error else None
        interrupts = [c.id for c in result.interrupts]
        print(json.dumps({"final": result.final_output, "error": error, "interrupts": interrupts,
                          "checkpoint": result.checkpoint_id}))
        await store.close()

    asyncio.run(main())
    """
)


def _worker(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
    )


def _finish(proc: subprocess.Popen[str]) -> dict[str, object]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_kill_9_mid_run_then_resume_from_the_last_step(kind: str, tmp_path: Path) -> None:
    log = tmp_path / "steps.log"
    env = {"PREFIX": f"k{uuid.uuid4().hex[:10]}_"}
    where = str(tmp_path / "plait.db") if kind == "sqlite" else PG_DSN
    if kind == "postgres":

        async def probe() -> None:
            await (await _postgres()).close()  # skips when no server answers

        asyncio.run(probe())
    proc = _worker(tmp_path, kind, where, "crash", "job-1", str(log), env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if log.exists() and log.read_text().split() == ["1", "2", "3"]:
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise AssertionError(f"the worker did not reach step 3: {proc.communicate(timeout=10)}")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    # a fresh process resumes from the last completed step (2): steps 1-2 are not redone
    resumed = _finish(
        _worker(tmp_path, kind, where, "resume", "job-1", str(log), env={**env, "SKIP": "2"})
    )
    assert log.read_text().split() == ["1", "2", "3", "3", "4"]
    assert resumed["final"] is None and len(resumed["interrupts"]) == 1  # type: ignore[arg-type]
    assert resumed["checkpoint"] not in (None, "job-1")  # the pause is a new checkpoint
    done = _finish(
        _worker(
            tmp_path,
            kind,
            where,
            "resume",
            str(resumed["checkpoint"]),
            str(log),
            env={**env, "SKIP": "5", "VALUE": "yes"},
        )
    )
    assert done == {"final": "finished", "error": None, "interrupts": [], "checkpoint": None}


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
async def test_resume_in_a_fresh_runner_and_concurrent_resumes_have_one_winner(
    kind: str, tmp_path: Path
) -> None:
    store: Store
    if kind == "sqlite":
        store = SqliteStore(tmp_path / "plait.db")
    elif kind == "postgres":
        store = await _postgres()
    else:
        store = await _redis()
    async with store:
        first = Runner(
            ChatModelAgent("A", ScriptedModel([call("approve", {"item": "x"})]), tools=[approve]),
            store=store,
        )
        paused = await first.query("q").collect()
        assert paused.checkpoint_id is not None

        async def attempt() -> str:
            model = ScriptedModel([reply("done")])
            fresh = Runner(ChatModelAgent("A", model, tools=[approve]), store=store)
            try:
                result = await fresh.resume(paused.checkpoint_id, value="yes").collect()  # type: ignore[arg-type]
            except ResumeError:
                return "rejected"
            return str(result.final_output)

        outcomes = await asyncio.gather(*(attempt() for _ in range(6)))
        assert sorted(outcomes) == ["done"] + ["rejected"] * 5


def _spending_team(budget: int) -> Team:
    """A team whose lead asks for approval, looks something up, then answers: three model
    calls of 10 tokens each, the same whichever process makes them."""

    @tool
    def lookup() -> str:
        """Look something up."""
        return "looked up"

    def lead_turn(messages: list[Message], tools: list[Any]) -> Message:
        spent = Usage(output_tokens=10)
        done = [m.name for m in messages if m.role == "tool"]
        if not done:
            return call("approve", {"item": "x"}, usage=spent)
        if done == ["approve"]:
            return call("lookup", {}, usage=spent)
        return reply("done", usage=spent)

    lead = ChatModelAgent("lead", FunctionModel(lead_turn), tools=[approve, lookup])
    helper = ChatModelAgent("helper", ScriptedModel([]), description="helps")
    return Team.coordinator(lead, [helper], name="crew", total_token_budget=budget)


@pytest.mark.parametrize(("budget", "ends"), [(25, "over"), (30, "within")])
async def test_a_team_token_budget_holds_across_a_pause_resumed_by_a_new_runner(
    budget: int, ends: str, tmp_path: Path
) -> None:
    async with SqliteStore(tmp_path / "plait.db") as store:
        paused = await Runner(_spending_team(budget), store=store).query("go").collect()
        assert paused.checkpoint_id is not None and paused.usage.total_tokens == 10
    async with SqliteStore(tmp_path / "plait.db") as store:  # another process, in effect
        resumed = await (
            Runner(_spending_team(budget), store=store).resume(paused.checkpoint_id, value="ok")
        ).collect()
    if ends == "over":  # the third call's 10 tokens make 30, as without the pause
        assert isinstance(resumed.error, TokenBudgetExceeded)
        assert "spent 30 tokens, over its total_token_budget=25" in str(resumed.error)
    else:
        assert resumed.error is None and resumed.final_output == "done"
    assert resumed.usage.total_tokens == 30


async def test_step_checkpoints_do_not_change_what_the_caller_sees(tmp_path: Path) -> None:
    model_a = ScriptedModel([call("approve", {"item": "a"}), reply("end")])
    store = SqliteStore(tmp_path / "p.db")
    async with store:
        events = [
            e
            async for e in Runner(
                ChatModelAgent("A", model_a, tools=[approve]), store=store, durability="step"
            ).query("q")
        ]
    assert [e.action.interrupted is not None for e in events if e.action] == [True]
    assert len(events) == 2  # the model's call, then the single interrupt event


async def test_cancelling_the_consumer_keeps_the_last_step_checkpoint(tmp_path: Path) -> None:
    started = asyncio.Event()
    ran: list[int] = []
    blocking = {"on": True}

    @tool
    async def work(n: int) -> str:
        """Do step n.

        Args:
            n: The step.
        """
        ran.append(n)
        if n == 2 and blocking["on"]:
            started.set()
            await asyncio.sleep(30)
        return f"step {n}"

    script = [call("work", {"n": 1}), call("work", {"n": 2}), reply("done")]
    store = SqliteStore(tmp_path / "p.db")
    async with store:
        agent = ChatModelAgent("A", ScriptedModel(script), tools=[work])
        stream = Runner(agent, store=store, durability="step").query("go", checkpoint_id="job")

        async def consume() -> None:
            async for _ in stream:
                pass

        task = asyncio.create_task(consume())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        blocking["on"] = False
        resumed_model = ScriptedModel([call("work", {"n": 2}), reply("done")])
        fresh = Runner(ChatModelAgent("A", resumed_model, tools=[work]), store=store)
        result = await fresh.resume("job").collect()
    assert result.final_output == "done"
    assert ran == [1, 2, 2]  # step 1 was not redone; the interrupted step 2 was


class VanishingStore(MemoryStore):
    """A store whose server goes away: every write fails."""

    async def put_checkpoint(self, *args: Any, **kwargs: Any) -> int:
        raise ConnectionError("server closed the connection")

    async def put_session(self, *args: Any, **kwargs: Any) -> int:
        raise ConnectionError("server closed the connection")


async def test_a_store_that_goes_away_is_a_typed_error_and_the_events_are_kept() -> None:
    from plait.errors import StoreError

    model = ScriptedModel([call("approve", {"item": "x"}), reply("done")])
    runner = Runner(ChatModelAgent("A", model, tools=[approve]), store=VanishingStore())
    paused = await runner.query("q").collect()
    assert isinstance(paused.error, StoreError)
    assert paused.error.operation == "writing a checkpoint"
    assert "ConnectionError: server closed the connection" in str(paused.error)
    assert paused.events[0].message is not None  # what happened before is still there
    talk = Runner(ChatModelAgent("B", ScriptedModel([reply("hi")])), store=VanishingStore())
    result = await talk.query("q", session_id="s").collect()
    assert [e.message.message.content for e in result.events if e.message] == ["hi"]  # type: ignore[union-attr]
    assert isinstance(result.error, StoreError)
    assert result.error.operation == "writing a session"
