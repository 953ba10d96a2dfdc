"""The same quota on every route: once a user's day has no room, a new run is `429` with
`Retry-After` on the OpenAI-compatible routes (the `openai` client), the Agent Protocol
(the `langgraph-sdk` client) and AG-UI, and an A2A task fails with `QuotaExceeded`; the
model calls of each route are in the ledger."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from langgraph_sdk import get_client

from plait.server import Quota, create_app
from plait.stores import SqliteStore
from tests.server.quota_support import Clock, Gate, make_quota_agents
from tests.server.support import WAIT, ServerThread

pytestmark = pytest.mark.timeout(60)

KEYS = {"key-alice": "alice", "key-bob": "bob"}
ALICE = {"authorization": "Bearer key-alice"}
NOON_TO_MIDNIGHT = str(12 * 3600)


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    """Serve the quota agents with every protocol; alice may make one model call a day."""
    app = create_app(
        make_quota_agents([]),
        store=SqliteStore(tmp_path / "plait.db"),
        api_keys=KEYS,
        quotas={"alice": Quota(model_calls_per_day=1)},
        clock=Clock(),
        a2a=True,
    )
    with ServerThread(app) as running:
        yield running.url


def _over(status: int, headers: httpx.Headers, error: dict[str, object]) -> None:
    assert status == 429
    assert headers["retry-after"] == NOON_TO_MIDNIGHT
    assert error["quota"] == "model_calls_per_day"
    assert error["retry_after"] == int(NOON_TO_MIDNIGHT)


async def test_the_openai_client_is_refused_with_429_once_the_day_is_spent(url: str) -> None:
    def chat(key: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=key, timeout=WAIT, max_retries=0)

    async with chat("key-alice") as alice, chat("key-bob") as bob:
        message = [{"role": "user", "content": "hi"}]
        first = await alice.chat.completions.create(model="echo", messages=message)  # type: ignore[arg-type]
        assert first.choices[0].message.content == "hi"
        with pytest.raises(openai.RateLimitError) as refused:
            await alice.chat.completions.create(model="echo", messages=message)  # type: ignore[arg-type]
        response = refused.value.response
        error = response.json()["error"]
        _over(response.status_code, response.headers, error)
        assert error["code"] == "quota_exceeded"
        with pytest.raises(openai.RateLimitError):
            await alice.responses.create(model="echo", input="hi")
        answer = await bob.chat.completions.create(model="echo", messages=message)  # type: ignore[arg-type]
        assert answer.choices[0].message.content == "hi"
    async with httpx.AsyncClient(base_url=url, headers=ALICE, timeout=WAIT) as http:
        usage = (await http.get("/v1/usage")).json()["rows"]
    assert [(r["agent"], r["user"]) for r in usage] == [("echo", "alice")]


async def test_the_langgraph_client_is_refused_with_429_once_the_day_is_spent(url: str) -> None:
    async with get_client(url=url, api_key="key-alice") as alice:
        thread = await alice.threads.create()
        values = await alice.runs.wait(thread["thread_id"], "echo", input={"messages": "hi"})
        assert values["messages"][-1]["content"] == "hi"  # type: ignore[index,call-overload]
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await alice.runs.wait(thread["thread_id"], "echo", input={"messages": "again"})
        response = refused.value.response
        _over(response.status_code, response.headers, response.json()["error"])
        with pytest.raises(httpx.HTTPStatusError) as stateless:
            await alice.runs.wait(None, "echo", input={"messages": "no thread"})
        assert stateless.value.response.status_code == 429


def test_agui_is_refused_with_429_once_the_day_is_spent(url: str) -> None:
    def body(run: str) -> dict[str, object]:
        message = {"id": run, "role": "user", "content": "hi"}
        return {"threadId": "t1", "runId": run, "messages": [message]}

    with httpx.Client(base_url=url, headers=ALICE, timeout=WAIT) as http:
        with http.stream("POST", "/agui/echo", json=body("r1")) as first:
            assert first.status_code == 200
            first.read()
        refused = http.post("/agui/echo", json=body("r2"))
        _over(refused.status_code, refused.headers, refused.json()["error"])


def test_an_a2a_task_fails_with_quota_exceeded_once_the_day_is_spent(url: str) -> None:
    def send(text: str) -> dict[str, object]:
        message = {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": text}
        return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}

    with httpx.Client(base_url=f"{url}/a2a/echo", headers=ALICE, timeout=WAIT) as http:
        first = http.post("/", json=send("first")).json()["result"]
        assert first["status"]["state"] == "completed"
        failed = http.post("/", json=send("second")).json()["result"]
        assert failed["status"]["state"] == "failed"
        text = json.dumps(failed["status"]["message"])
        assert "QuotaExceeded" in text and "model_calls_per_day" in text
    rows = httpx.get(f"{url}/v1/usage", headers=ALICE, timeout=WAIT).json()["rows"]
    assert len(rows) == 1


async def test_enqueue_waits_for_a_place_up_to_max_queued_runs(tmp_path: Path) -> None:
    gate = Gate()
    app = create_app(
        make_quota_agents([], gate),
        store=SqliteStore(tmp_path / "plait.db"),
        api_keys=KEYS,
        quotas={"alice": Quota(max_concurrent_runs=1, max_queued_runs=1)},
        clock=Clock(),
    )
    with ServerThread(app) as running:
        async with get_client(url=running.url, api_key="key-alice") as alice:
            threads = [(await alice.threads.create())["thread_id"] for _ in range(4)]
            first = await alice.runs.create(threads[0], "blocker", input={"messages": "go"})
            assert await asyncio.to_thread(gate.entered.wait, WAIT)
            with pytest.raises(httpx.HTTPStatusError) as rejected:  # not enqueue: refused
                await alice.runs.create(threads[1], "echo", input={"messages": "hi"})
            assert rejected.value.response.json()["error"]["quota"] == "max_concurrent_runs"

            def queued(thread: str) -> Any:
                return alice.runs.create(
                    thread, "echo", input={"messages": "hi"}, multitask_strategy="enqueue"
                )

            waiting = [asyncio.ensure_future(queued(t)) for t in threads[2:]]
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            [full] = done  # one waits in the queue, the other finds it full
            with pytest.raises(httpx.HTTPStatusError) as refused:
                full.result()
            error = refused.value.response.json()["error"]
            assert (error["type"], error["quota"]) == ("quota_exceeded", "max_queued_runs")
            [later] = [task for task in waiting if task is not full]
            assert not later.done()
            gate.opened.set()  # the first run ends: the queued one gets its place
            await alice.runs.join(threads[0], first["run_id"])
            started = await asyncio.wait_for(later, WAIT)
            thread = threads[2] if later is waiting[0] else threads[3]
            values = await alice.runs.join(thread, started["run_id"])
            assert values["messages"][-1]["content"] == "hi"  # type: ignore[index,call-overload]
