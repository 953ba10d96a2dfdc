"""Interrupts raised inside nested agents (a team member, an agent run as a tool, a graph's
agent node) through the official langgraph-sdk client: each shows in the stream's
`__interrupt__`, the thread's `interrupts` and its state with one id, and `command`
resumes it exactly once (by value, or `{interrupt id: value}` for several at once)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.protocols.agent_protocol.support import Served

ASK = {"messages": [{"role": "user", "content": "go"}]}


async def _pause(client: Served, agent: str) -> tuple[str, list[dict[str, Any]]]:
    """Stream a run of `agent` on a new thread to its pause; return the thread and the
    interrupts the stream announced, checked against the thread's and its state's."""
    key = (await client.ann.threads.create())["thread_id"]
    parts = [
        part
        async for part in client.ann.runs.stream(
            key, agent, input=ASK, stream_mode=["values", "updates"]
        )
    ]
    run_id = parts[0].data["run_id"]
    [announced] = [
        p.data["__interrupt__"] for p in parts if p.event == "updates" and "__interrupt__" in p.data
    ]
    [in_values] = [
        p.data["__interrupt__"] for p in parts if p.event == "values" and "__interrupt__" in p.data
    ]
    assert in_values == announced
    thread = await client.ann.threads.get(key)
    assert thread["status"] == "interrupted"
    assert list(thread["interrupts"].values()) == [announced]
    assert (await client.ann.threads.get_state(key))["interrupts"] == announced
    assert (await client.ann.runs.get(key, run_id))["status"] == "interrupted"
    return key, announced


async def _refused_again(client: Served, key: str, agent: str, resume: Any) -> None:
    with pytest.raises(httpx.HTTPStatusError) as refused:  # wait raises httpx's own
        await client.ann.runs.wait(key, agent, command={"resume": resume})
    assert refused.value.response.status_code == 409


async def test_a_team_members_interrupt_is_resumed_once(kinds: Served) -> None:
    key, [pending] = await _pause(kinds, "office")
    assert pending["value"] == {"question": "approve wire?"}
    values = await kinds.ann.runs.wait(key, "office", command={"resume": "ok"})
    contents = [m["content"] for m in values["messages"]]
    assert "wire=ok" in contents
    assert contents[-1] == "wired"
    assert values["messages"][-1]["name"] == "payer"
    await _refused_again(kinds, key, "office", "again")
    assert (await kinds.ann.threads.get(key))["status"] == "idle"


async def test_two_interrupts_of_an_agent_run_as_a_tool_are_resumed_by_id(kinds: Served) -> None:
    key, pending = await _pause(kinds, "boss")
    asks = {p["value"]["question"]: p["id"] for p in pending}
    assert set(asks) == {"approve a?", "approve b?"}
    resume = {asks["approve a?"]: "yes", asks["approve b?"]: "no"}
    values = await kinds.ann.runs.wait(key, "boss", command={"resume": resume})
    assert values["messages"][-1]["content"] == "a=yes b=no"
    await _refused_again(kinds, key, "boss", resume)


async def test_an_interrupt_not_answered_asks_again_with_a_fresh_id(kinds: Served) -> None:
    key, pending = await _pause(kinds, "boss")
    asks = {p["value"]["question"]: p["id"] for p in pending}
    partial = await kinds.ann.runs.wait(
        key, "boss", command={"resume": {asks["approve a?"]: "yes"}}
    )
    [again] = partial["__interrupt__"]
    assert again["value"] == {"question": "approve b?"}
    assert again["id"] not in asks.values()
    await _refused_again(kinds, key, "boss", {asks["approve b?"]: "no"})  # the old id is done
    values = await kinds.ann.runs.wait(key, "boss", command={"resume": {again["id"]: "no"}})
    assert values["messages"][-1]["content"] == "a=yes b=no"


async def test_one_value_for_two_interrupts_is_refused_and_keeps_them(kinds: Served) -> None:
    key, pending = await _pause(kinds, "boss")
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await kinds.ann.runs.wait(key, "boss", command={"resume": "yes"})
    assert refused.value.response.status_code == 400
    assert "targets" in refused.value.response.json()["error"]["message"]
    assert (await kinds.ann.threads.get_state(key))["interrupts"] == pending


async def test_an_interrupt_in_a_graphs_agent_node_is_resumed_once(kinds: Served) -> None:
    key, [pending] = await _pause(kinds, "review")
    assert pending["value"] == {"question": "approve sign?"}
    state = await kinds.ann.threads.get_state(key)
    assert [m["content"] for m in state["values"]["messages"]] == ["go"]
    assert state["next"] == ["review"]
    values = await kinds.ann.runs.wait(key, "review", command={"resume": {pending["id"]: "yes"}})
    assert [m["content"] for m in values["messages"]] == ["go", "signed"]
    await _refused_again(kinds, key, "review", "yes")
