"""Runs on threads through the official langgraph-sdk client: wait, stream, interrupts
resumed with a command, background runs, each user's own."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
from langgraph_sdk.errors import APIStatusError, ConflictError, NotFoundError

from tests.protocols.agent_protocol.support import WORKING, Served


def _texts(values: dict) -> list[tuple[str, str]]:
    return [(m["type"], m["content"]) for m in values["messages"]]


async def test_wait_answers_the_thread_values(served: Served) -> None:
    thread = await served.ann.threads.create()
    key = thread["thread_id"]
    values = await served.ann.runs.wait(
        key, "echo", input={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert _texts(values) == [("human", "hi"), ("ai", "echo: hi")]
    again = await served.ann.runs.wait(
        key, "echo", input={"messages": [{"type": "human", "content": "more"}]}
    )
    assert _texts(again)[-1] == ("ai", "echo: more")
    state = await served.ann.threads.get_state(key)
    assert len(state["values"]["messages"]) == 4
    assert (await served.ann.threads.get(key))["status"] == "idle"
    runs = await served.ann.runs.list(key)
    assert [r["status"] for r in runs] == ["success", "success"]


async def test_stream_sends_metadata_values_updates_and_end(served: Served) -> None:
    thread = await served.ann.threads.create()
    parts = [
        part
        async for part in served.ann.runs.stream(
            thread["thread_id"],
            "echo",
            input={"messages": [{"role": "user", "content": "yo"}]},
            stream_mode=["values", "updates", "messages-tuple"],
        )
    ]
    events = [part.event for part in parts]
    assert events[0] == "metadata"
    assert events[-1] == "end"
    assert "updates" in events
    assert any(e == "messages" for e in events)
    last_values = [p.data for p in parts if p.event == "values"][-1]
    assert _texts(last_values) == [("human", "yo"), ("ai", "echo: yo")]
    update = next(p.data for p in parts if p.event == "updates")
    assert update["echo"]["messages"][0]["content"] == "echo: yo"
    run = await served.ann.runs.get(thread["thread_id"], parts[0].data["run_id"])
    assert run["status"] == "success"


async def test_values_are_the_thread_after_each_message(served: Served) -> None:
    key = (await served.ann.threads.create())["thread_id"]
    await served.ann.threads.update_state(key, {"mood": "calm"})
    sent = []
    for text in ("hi", "more"):
        parts = [
            part
            async for part in served.ann.runs.stream(
                key,
                "echo",
                input={"messages": [{"role": "user", "content": text}], "topic": text},
                stream_mode="values",
            )
        ]
        sent.append([p.data for p in parts if p.event == "values"])
    first, second = sent
    assert [_texts(v) for v in first] == [[("human", "hi")], [("human", "hi"), ("ai", "echo: hi")]]
    assert [len(v["messages"]) for v in second] == [3, 4]
    assert [(v["mood"], v["topic"]) for v in first + second] == [("calm", "hi")] * 2 + [
        ("calm", "more")
    ] * 2
    state = await served.ann.threads.get_state(key)
    assert second[-1] == state["values"]
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"plait:{key}/{n}")) for n in range(4)]
    assert [m["id"] for m in state["values"]["messages"]] == ids  # the same at every read


def test_events_go_out_as_compact_json(served: Served) -> None:
    text = "h\u00e9llo \u2603\u2028there"  # a line separator some clients split lines on
    body = {
        "assistant_id": "echo",
        "input": {"messages": [{"role": "user", "content": text}]},
        "if_not_exists": "create",
        "stream_mode": "values",
    }
    url = f"{served.url}/threads/t-compact/runs/stream"
    response = httpx.post(url, json=body, headers={"x-api-key": "key-ann"})
    lines = [line[len("data: ") :] for line in response.text.split("\r\n")]
    sent = [line for line in lines if line.startswith("{")]  # metadata, then values
    assert [json.loads(line)["messages"][-1]["content"] for line in sent[1:]] == [
        text,
        f"echo: {text}",
    ]
    for line in sent:
        compact = json.dumps(json.loads(line), separators=(",", ":"), ensure_ascii=False)
        assert line == compact.replace("\u2028", "\\u2028")


async def test_an_interrupt_is_resumed_once_with_a_command(served: Served) -> None:
    thread = await served.ann.threads.create()
    key = thread["thread_id"]
    parts = [
        part
        async for part in served.ann.runs.stream(
            key, "asker", input={"messages": [{"role": "user", "content": "pay it"}]}
        )
    ]
    paused = [p.data for p in parts if p.event == "values" and "__interrupt__" in p.data]
    assert paused[0]["__interrupt__"][0]["value"] == {"question": "approve pay?"}
    found = await served.ann.threads.get(key)
    assert found["status"] == "interrupted"
    state = await served.ann.threads.get_state(key)
    assert state["interrupts"][0]["value"] == {"question": "approve pay?"}
    values = await served.ann.runs.wait(key, "asker", command={"resume": "yes"})
    assert _texts(values)[-1] == ("ai", "paid")
    tool = [m for m in values["messages"] if m["type"] == "tool"]
    assert tool[0]["content"] == "pay=yes"
    with pytest.raises(httpx.HTTPStatusError) as refused:  # wait raises httpx's own
        await served.ann.runs.wait(key, "asker", command={"resume": "again"})
    assert refused.value.response.status_code == 409
    assert (await served.ann.threads.get(key))["status"] == "idle"


async def test_a_team_runs_as_an_assistant(served: Served) -> None:
    thread = await served.ann.threads.create()
    parts = [
        part
        async for part in served.ann.runs.stream(
            thread["thread_id"],
            "desk",
            input={"messages": [{"role": "user", "content": "my bill"}]},
            stream_mode="updates",
        )
    ]
    nodes = [next(iter(p.data)) for p in parts if p.event == "updates"]
    assert "triage" in nodes
    assert "billing" in nodes


async def test_background_run_join_and_delete(served: Served) -> None:
    thread = await served.ann.threads.create()
    key = thread["thread_id"]
    run = await served.ann.runs.create(
        key, "echo", input={"messages": [{"role": "user", "content": "later"}]}, metadata={"n": 1}
    )
    assert run["metadata"] == {"n": 1}
    values = await served.ann.runs.join(key, run["run_id"])
    assert _texts(values)[-1] == ("ai", "echo: later")
    assert (await served.ann.runs.get(key, run["run_id"]))["status"] == "success"
    await served.ann.runs.delete(key, run["run_id"])
    with pytest.raises(NotFoundError):
        await served.ann.runs.get(key, run["run_id"])


async def test_a_run_can_create_its_thread(served: Served) -> None:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await served.ann.runs.wait("t-new", "echo", input={"messages": []})
    assert refused.value.response.status_code == 404
    values = await served.ann.runs.wait(
        "t-new",
        "echo",
        input={"messages": [{"role": "user", "content": "x"}]},
        if_not_exists="create",
    )
    assert _texts(values)[-1] == ("ai", "echo: x")


async def test_an_assistant_configuration_reaches_the_run(served: Served) -> None:
    made = await served.ann.assistants.create(
        "echo", config={"configurable": {"instruction": "Say it twice."}}
    )
    thread = await served.ann.threads.create()
    key = thread["thread_id"]
    await served.ann.runs.wait(
        key, made["assistant_id"], input={"messages": [{"role": "user", "content": "a"}]}
    )
    runs = await served.ann.runs.list(key)
    assert runs[0]["assistant_id"] == made["assistant_id"]


async def test_another_users_runs_are_not_found(served: Served) -> None:
    thread = await served.ann.threads.create()
    key = thread["thread_id"]
    run = await served.ann.runs.create(
        key, "echo", input={"messages": [{"role": "user", "content": "mine"}]}
    )
    await served.ann.runs.join(key, run["run_id"])
    for call in (
        served.bob.runs.get(key, run["run_id"]),
        served.bob.runs.list(key),
        served.bob.runs.cancel(key, run["run_id"]),
        served.bob.runs.delete(key, run["run_id"]),
    ):
        with pytest.raises(NotFoundError):
            await call
    for waiting in (  # join and wait raise httpx's own error
        served.bob.runs.join(key, run["run_id"]),
        served.bob.runs.wait(key, "echo", input={"messages": []}),
    ):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await waiting
        assert refused.value.response.status_code == 404


async def test_cancel_interrupts_and_the_thread_goes_on(served: Served) -> None:
    WORKING.clear()
    thread = await served.ann.threads.create()
    key = thread["thread_id"]
    run = await served.ann.runs.create(
        key, "worker", input={"messages": [{"role": "user", "content": "go"}]}
    )
    assert await asyncio.to_thread(WORKING.wait, 10)
    assert (await served.ann.threads.get(key))["status"] == "busy"
    with pytest.raises(ConflictError):  # the reject strategy
        await served.ann.runs.create(key, "echo", input={"messages": []})
    await served.ann.runs.cancel(key, run["run_id"], wait=True)
    assert (await served.ann.runs.get(key, run["run_id"]))["status"] == "interrupted"
    assert (await served.ann.threads.get(key))["status"] == "idle"
    values = await served.ann.runs.wait(
        key, "echo", input={"messages": [{"role": "user", "content": "next"}]}
    )
    assert _texts(values)[-1] == ("ai", "echo: next")


async def test_of_two_runs_started_at_once_on_a_thread_one_is_refused(served: Served) -> None:
    WORKING.clear()
    key = (await served.ann.threads.create())["thread_id"]
    ask = {"messages": [{"role": "user", "content": "go"}]}
    results = await asyncio.gather(
        *(served.ann.runs.create(key, "worker", input=ask) for _ in range(2)),
        return_exceptions=True,
    )
    started = [r for r in results if isinstance(r, dict)]
    refused = [r for r in results if isinstance(r, ConflictError)]
    assert (len(started), len(refused)) == (1, 1), results
    assert await asyncio.to_thread(WORKING.wait, 10)
    await served.ann.runs.cancel(key, started[0]["run_id"], wait=True)
    assert [r["status"] for r in await served.ann.runs.list(key)] == ["interrupted"]


async def test_custom_events_stream(served: Served) -> None:
    thread = await served.ann.threads.create()
    parts = [
        part
        async for part in served.ann.runs.stream(
            thread["thread_id"],
            "reporter",
            input={"messages": [{"role": "user", "content": "go"}]},
            stream_mode=["custom", "debug"],
        )
    ]
    assert [p.data for p in parts if p.event == "custom"] == [{"progress": 100}]
    assert any(p.event == "debug" for p in parts)


async def test_what_is_not_served_answers_501(served: Served) -> None:
    thread = await served.ann.threads.create()
    with pytest.raises(APIStatusError) as refused:
        await served.ann.runs.create(
            thread["thread_id"], "echo", input={"messages": []}, interrupt_before=["echo"]
        )
    assert refused.value.status_code == 501


async def test_debug_and_messages_tuple_stream_together(served: Served) -> None:
    thread = await served.ann.threads.create()
    parts = [
        part
        async for part in served.ann.runs.stream(
            thread["thread_id"],
            "echo",
            input={"messages": [{"role": "user", "content": "both"}]},
            stream_mode=["debug", "messages-tuple"],
        )
    ]
    events = [part.event for part in parts]
    assert events[0] == "metadata"
    assert events[-1] == "end"
    chunks = [p.data[0]["content"] for p in parts if p.event == "messages"]
    assert "".join(chunks) == "echo: both"
    (payload,) = [p.data["payload"] for p in parts if p.event == "debug"]  # its whole stream
    assert payload["agent_name"] == "echo"
    streamed = payload["output"]["message"]["stream"]
    assert "".join(chunk["content"] for chunk in streamed) == "echo: both"


async def test_wait_and_join_of_a_paused_run_answer_its_turn(served: Served) -> None:
    thread = await served.ann.threads.create()
    key = thread["thread_id"]
    values = await served.ann.runs.wait(
        key, "asker", input={"messages": [{"role": "user", "content": "pay it"}]}
    )
    assert values["__interrupt__"][0]["value"] == {"question": "approve pay?"}
    assert _texts(values)[0] == ("human", "pay it")
    calls = [m["tool_calls"] for m in values["messages"] if m["type"] == "ai"]
    assert calls[0][0]["name"] == "approve"
    shown = (await served.ann.threads.get(key))["values"]
    assert values["messages"] == shown["messages"]
    run = (await served.ann.runs.list(key))[0]
    joined = await served.ann.runs.join(key, run["run_id"])
    assert joined["messages"] == shown["messages"]
    assert joined["__interrupt__"] == values["__interrupt__"]
