"""A thread's history through the official langgraph-sdk client: the step snapshots its runs
kept, newest first under its state now, each readable with get_state; what a thread cannot
do with an earlier checkpoint answers 501."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from langgraph_sdk.errors import APIStatusError, NotFoundError

from tests.protocols.agent_protocol.support import WORKING, Served

ASK = {"messages": [{"role": "user", "content": "go"}]}


def _texts(state: dict) -> list[str]:
    return [m["content"] for m in state["values"]["messages"]]


def _id(state: dict) -> str:
    return str(state["checkpoint"]["checkpoint_id"])


async def test_the_history_is_the_kept_steps_newest_first_under_the_state_now(
    kinds: Served,
) -> None:
    key = (await kinds.ann.threads.create())["thread_id"]
    await kinds.ann.runs.wait(key, "stepper", input=ASK)
    [run] = await kinds.ann.runs.list(key)
    history = await kinds.ann.threads.get_history(key)
    now, second, first = history
    assert now == await kinds.ann.threads.get_state(key)
    assert _texts(now)[-1] == "noted twice"
    assert now["values"]["count"] == 2
    assert (now["next"], now["tasks"], now["interrupts"]) == ([], [], [])
    # each step: the thread's values when it was kept (a model call and its tool round)
    assert _texts(first) == ["go", "", "noted 1"]
    assert _texts(second) == ["go", "", "noted 1", "", "noted 2"]
    assert (first["values"]["count"], second["values"]["count"]) == (1, 2)
    assert [s["next"] for s in (first, second)] == [["stepper"], ["stepper"]]
    assert [s["metadata"]["step"] for s in history] == [3, 2, 1]
    assert [s["metadata"]["run_step"] for s in (second, first)] == [2, 1]
    assert {s["metadata"]["run_id"] for s in (second, first)} == {run["run_id"]}
    assert first["metadata"]["writes"]["stepper"]["messages"][0]["content"] == "noted 1"
    assert first["metadata"]["source"] == "loop"
    # the parents chain them, oldest last
    assert [s["parent_checkpoint"] for s in history] == [
        second["checkpoint"],
        first["checkpoint"],
        None,
    ]
    # every one is read again by its id, as get_history gave it
    for state in history:
        assert await kinds.ann.threads.get_state(key, checkpoint_id=_id(state)) == state
        assert await kinds.ann.threads.get_state(key, checkpoint=state["checkpoint"]) == state


async def test_history_pages_filters_and_spans_runs(kinds: Served) -> None:
    key = (await kinds.ann.threads.create())["thread_id"]
    await kinds.ann.runs.wait(key, "stepper", input=ASK)
    await kinds.ann.runs.wait(
        key, "stepper", input={"messages": [{"role": "user", "content": "again"}]}
    )
    newer, older = [run["run_id"] for run in await kinds.ann.runs.list(key)]
    history = await kinds.ann.threads.get_history(key, limit=100)
    assert len(history) == 5  # the state now, and two steps of each run
    assert [s["metadata"].get("run_id") for s in history] == [None, newer, newer, older, older]
    assert _texts(history[2])[:6] == _texts(history[0])[:6]  # the first run's turn, then "again"
    assert _texts(history[2])[6:] == ["again", "", "noted 1"]
    page = await kinds.ann.threads.get_history(key, limit=2)
    assert page == history[:2]
    rest = await kinds.ann.threads.get_history(key, limit=10, before=page[-1]["checkpoint"])
    assert rest == history[2:]
    by_id = await kinds.ann.threads.get_history(key, before=_id(history[3]))
    assert by_id == history[4:]
    firsts = await kinds.ann.threads.get_history(key, metadata={"run_step": 1})
    assert firsts == [history[2], history[4]]
    one = await kinds.ann.threads.get_history(key, checkpoint={"checkpoint_id": _id(history[3])})
    assert one == [history[3]]


async def test_a_pause_shows_at_the_head_and_its_resume_keeps_steps(kinds: Served) -> None:
    key = (await kinds.ann.threads.create())["thread_id"]
    [empty] = await kinds.ann.threads.get_history(key)
    await kinds.ann.runs.wait(key, "boss", input=ASK)
    [paused] = await kinds.ann.threads.get_history(key)
    assert _id(paused) != _id(empty)  # the session is as it was, but its run paused
    assert _texts(paused) == ["go", ""]  # the paused turn: the question, the tool call
    pending = paused["interrupts"]
    assert [p["value"] for p in pending] == [
        {"question": "approve a?"},
        {"question": "approve b?"},
    ]
    assert paused["next"] == ["boss"]
    assert paused["tasks"][0]["name"] == "boss"
    assert paused["tasks"][0]["interrupts"] == pending
    answers = {pending[0]["id"]: "yes", pending[1]["id"]: "no"}
    await kinds.ann.runs.wait(key, "boss", command={"resume": answers})
    resumed = (await kinds.ann.runs.list(key))[0]["run_id"]
    now, step, nested = await kinds.ann.threads.get_history(key)
    assert _texts(now)[-1] == "a=yes b=no"
    assert now["interrupts"] == []
    assert _id(now) not in (_id(empty), _id(paused))
    # the clerk's tool round (run as the boss's tool), then the boss's: the resumed run's
    assert [s["metadata"]["agent"] for s in (nested, step)] == ["clerk", "boss"]
    assert {s["metadata"]["run_id"] for s in (nested, step)} == {resumed}
    assert nested["metadata"]["writes"]["clerk"]["messages"][0]["content"] == "b=no"
    assert (nested["next"], step["next"]) == (["clerk"], ["boss"])
    assert _texts(step)[-1] == "a=yes b=no"


async def test_update_state_writes_at_the_head_and_an_earlier_checkpoint_is_501(
    kinds: Served,
) -> None:
    key = (await kinds.ann.threads.create())["thread_id"]
    await kinds.ann.runs.wait(key, "stepper", input=ASK)
    before = await kinds.ann.threads.get_history(key)
    head = before[0]["checkpoint"]
    written = await kinds.ann.threads.update_state(key, {"mood": "calm"}, checkpoint=head)
    now = await kinds.ann.threads.get_state(key)
    assert written["checkpoint"] == now["checkpoint"] != head
    assert now["metadata"]["source"] == "update"
    assert now["parent_checkpoint"] == before[1]["checkpoint"]
    assert now["values"]["mood"] == "calm"
    earlier = _id(before[2])
    with pytest.raises(APIStatusError) as refused:
        await kinds.ann.threads.update_state(key, {"mood": "sad"}, checkpoint_id=earlier)
    assert refused.value.status_code == 501
    assert "forking" in refused.value.response.json()["error"]["message"]
    assert (
        f"/v1/runs/{earlier.split('.')[0]}/fork"
        in refused.value.response.json()["error"]["message"]
    )
    with pytest.raises(httpx.HTTPStatusError) as run_refused:  # wait raises httpx's own
        await kinds.ann.runs.wait(key, "stepper", input=ASK, checkpoint_id=earlier)
    assert run_refused.value.response.status_code == 501
    with pytest.raises(NotFoundError):
        await kinds.ann.threads.update_state(key, {"x": 1}, checkpoint_id="nope.step-1")
    with pytest.raises(NotFoundError):
        await kinds.ann.threads.get_state(key, checkpoint_id=head["checkpoint_id"])  # written over
    assert (await kinds.ann.threads.get_state(key))["values"]["mood"] == "calm"


async def test_copy_keeps_the_history_and_prune_forgets_or_deletes(kinds: Served) -> None:
    key = (await kinds.ann.threads.create())["thread_id"]
    await kinds.ann.runs.wait(key, "stepper", input=ASK)
    history = await kinds.ann.threads.get_history(key)
    copied = (await kinds.ann.threads.copy(key))["thread_id"]
    theirs = await kinds.ann.threads.get_history(copied)
    assert [_texts(s) for s in theirs] == [_texts(s) for s in history]
    assert [_id(s) for s in theirs[1:]] == [_id(s) for s in history[1:]]
    assert await kinds.ann.threads.prune([copied], strategy="keep_latest") == {"pruned_count": 1}
    [latest] = await kinds.ann.threads.get_history(copied)
    assert _texts(latest) == _texts(history[0])
    assert latest["parent_checkpoint"] is None
    assert len(await kinds.ann.threads.get_history(key)) == 3  # the original keeps its own
    assert await kinds.bob.threads.prune([key]) == {"pruned_count": 0}  # not bob's
    assert await kinds.ann.threads.prune([key, "nobody"]) == {"pruned_count": 1}
    with pytest.raises(NotFoundError):
        await kinds.ann.threads.get(key)


async def test_a_rolled_back_run_leaves_no_steps_an_interrupted_one_keeps_them(
    kinds: Served,
) -> None:
    for action, kept in (("rollback", 0), ("interrupt", 1)):
        WORKING.clear()
        key = (await kinds.ann.threads.create())["thread_id"]
        run = await kinds.ann.runs.create(key, "halter", input=ASK)
        assert await asyncio.to_thread(WORKING.wait, 10)  # its first step is kept by now
        assert len(await kinds.ann.threads.get_history(key)) == 2
        await kinds.ann.runs.cancel(key, run["run_id"], wait=True, action=action)
        steps = (await kinds.ann.threads.get_history(key))[1:]
        assert len(steps) == kept, action
        if kept:
            assert steps[0]["values"]["count"] == 7


async def test_another_users_thread_history_is_not_found(kinds: Served) -> None:
    key = (await kinds.ann.threads.create())["thread_id"]
    await kinds.ann.runs.wait(key, "stepper", input=ASK)
    [_, step, _] = await kinds.ann.threads.get_history(key)
    for call in (
        kinds.bob.threads.get_history(key),
        kinds.bob.threads.get_state(key, checkpoint_id=_id(step)),
        kinds.bob.threads.get_state(key, checkpoint=step["checkpoint"]),
    ):
        with pytest.raises(NotFoundError):
            await call
    other = (await kinds.bob.threads.create())["thread_id"]  # a step of ann's, on bob's thread
    with pytest.raises(NotFoundError):
        await kinds.bob.threads.get_state(other, checkpoint_id=_id(step))
