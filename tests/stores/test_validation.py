"""The Runner checks ttls and ids before any store is touched, with the stores' own rules."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from plait import AgentEvent, AgentInput, ChatModelAgent, Message, RunContext, Runner, tool
from plait.errors import CheckpointNotFound, UsageError
from plait.stores import MemoryStore, SqliteStore
from plait.stores.base import MAX_ID_LENGTH, MAX_RUN_ID_LENGTH, MAX_TTL, check_id, check_ttl
from plait.testing import ScriptedModel, call, reply

BAD_TTLS: list[Any] = [-1, 0, 0.0, math.nan, math.inf, MAX_TTL + 1, True, "60"]
BAD_IDS: list[Any] = ["", "a\x00b", "new\nline", "\udc80", "x" * (MAX_ID_LENGTH + 1), 7, b"id"]


class Asker:
    """An agent that pauses at once."""

    name = "asker"
    description = ""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        answer = ctx.interrupt("may I?")
        yield ctx.event(message=Message.assistant(f"got {answer}"))


class UntouchableStore(MemoryStore):
    """A store that fails the test when any of its methods is called."""

    def __getattribute__(self, name: str) -> Any:
        if name.endswith(("_checkpoint", "_session", "_session_record")):
            raise AssertionError(f"the store was touched: {name}")
        return super().__getattribute__(name)


@pytest.mark.parametrize("ttl", BAD_TTLS, ids=repr)
@pytest.mark.parametrize("name", ["checkpoint_ttl", "session_ttl"])
def test_runner_refuses_bad_ttls_when_built(name: str, ttl: Any) -> None:
    with pytest.raises(UsageError, match=f"{name} must be a number of seconds") as caught:
        Runner(Asker(), **{name: ttl})
    assert "None for no expiry" in str(caught.value)


async def test_runner_accepts_positive_finite_ttls_and_none() -> None:
    for ttl in (0.5, 60, float(MAX_TTL), None):
        runner = Runner(Asker(), checkpoint_ttl=ttl, session_ttl=ttl)
        paused = await runner.query("q", session_id="s").collect()
        assert paused.error is None and paused.checkpoint_id is not None
        assert (await runner.resume(paused.checkpoint_id, value="yes").collect()).error is None


def _id_calls(runner: Runner, bad: Any) -> list[Callable[[], object]]:
    """Return every Runner call that takes an id, each given `bad`."""
    return [
        lambda: runner.query("q", checkpoint_id=bad),
        lambda: runner.query("q", session_id=bad),
        lambda: runner.run([Message.user("q")], checkpoint_id=bad),
        lambda: runner.run_sync([Message.user("q")], session_id=bad),
        lambda: runner.query_sync("q", checkpoint_id=bad),
        lambda: runner.resume(bad, value="yes"),
        lambda: runner.resume_sync(bad, value="yes"),
    ]


@pytest.mark.parametrize("bad", BAD_IDS, ids=lambda bad: repr(bad)[:20])
async def test_runner_refuses_bad_ids_before_touching_the_store(bad: Any) -> None:
    runner = Runner(Asker(), store=UntouchableStore())
    for make in _id_calls(runner, bad):
        with pytest.raises(UsageError, match="ids are str of 1 to"):
            make()
    with pytest.raises(UsageError, match="checkpoint_id"):
        await runner.read_checkpoint(bad)


async def test_new_run_ids_are_at_most_256_characters_and_read_ids_512() -> None:
    runner = Runner(Asker(), store=UntouchableStore())
    longest = "r" * MAX_RUN_ID_LENGTH
    for make in _id_calls(runner, longest + "r")[:5]:  # the calls that start a run
        with pytest.raises(UsageError, match="longer than 256 characters"):
            make()
    reader = Runner(Asker())
    with pytest.raises(CheckpointNotFound):
        await reader.read_checkpoint("c" * MAX_ID_LENGTH)
    with pytest.raises(CheckpointNotFound):
        await reader.resume("c" * MAX_ID_LENGTH, value="yes").collect()
    paused = await reader.query("q", checkpoint_id=longest, session_id=longest).collect()
    assert paused.error is None and paused.checkpoint_id == longest


@tool
async def lookup() -> str:
    """Look something up."""
    return "found"


async def test_step_snapshots_of_the_longest_run_id_fit_every_store(tmp_path: Path) -> None:
    longest = "é" * MAX_RUN_ID_LENGTH
    async with SqliteStore(tmp_path / "plait.db") as store:
        model = ScriptedModel([call("lookup", {}), reply("done")])
        agent = ChatModelAgent("A", model, tools=[lookup])
        runner = Runner(agent, store=store, durability="step", keep_steps=True)
        result = await runner.query("go", checkpoint_id=longest).collect()
        assert result.error is None and result.final_output == "done"
        assert (await runner.read_checkpoint(f"{longest}.step-1")).running


def test_a_huge_bad_value_is_quoted_short_with_its_size() -> None:
    with pytest.raises(UsageError) as too_long:
        check_id("y" * 1_000_000, "session_id")
    message = str(too_long.value)
    assert "'yyyy" in message and "(1000000 characters)" in message
    assert len(message) < 500
    with pytest.raises(UsageError) as not_a_number:
        check_ttl("9" * 100_000)
    assert "(100000 characters)" in str(not_a_number.value)
    assert len(str(not_a_number.value)) < 400
    with pytest.raises(UsageError, match="too large to show"):
        check_ttl(10**100_000)


def test_a_bad_character_is_named_with_its_position() -> None:
    with pytest.raises(UsageError, match=r"'a\\x00b' has U\+0000 at index 1"):
        check_id("a\x00b", "checkpoint_id")
    with pytest.raises(UsageError, match=r"has U\+DC80 at index 4"):
        check_id("lone\udc80", "checkpoint_id")
    assert check_id("café-🙂") == "café-🙂"


def test_a_redis_prefix_is_bounded_and_its_repr_short() -> None:
    from plait.stores import RedisStore

    with pytest.raises(UsageError, match="at most 128 characters") as caught:
        RedisStore("redis://127.0.0.1:6379/0", prefix="p" * 10_000)
    assert len(caught.value.message) < 400
    assert len(repr(RedisStore("redis://127.0.0.1:6379/0", prefix="p" * 128))) < 400
