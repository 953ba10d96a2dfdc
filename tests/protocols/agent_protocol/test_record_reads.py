"""What a streamed run on a new thread reads and writes of its thread's two documents: each
write a compare-and-set of the store, each change starting from what the run last read or
wrote of that document (so a run reads each document at most once, at its start; the runs
of a thread it just made not at all, unless they were written already)."""

from __future__ import annotations

import asyncio
import json

import httpx

from plait.server import create_app
from tests.protocols.agent_protocol.support import KEYS, CountingStore, make_agents
from tests.server.support import ServerThread


def test_a_run_reads_each_of_its_thread_s_documents_once() -> None:
    store = CountingStore()
    app = create_app(make_agents(), store=store, api_keys=KEYS)
    body = {
        "assistant_id": "echo",
        "input": {"messages": [{"role": "user", "content": "hi"}]},
        "if_not_exists": "create",
    }
    with ServerThread(app) as server:
        url = f"{server.url}/threads/t-counted/runs/stream"
        response = httpx.post(url, json=body, headers={"x-api-key": "key-ann"})
        assert "echo: hi" in response.text and "event: end" in response.text
    thread, runs = "ann/ap/thread/t-counted", "ann/ap/runs/t-counted"
    assert (store.reads[thread], store.writes[thread]) == (1, 2)  # made, then noted
    assert (store.reads[runs], store.writes[runs]) == (0, 3)  # reserved, started, ended


def test_a_new_thread_whose_runs_were_written_before_has_them_read() -> None:
    """A thread made again under the id of a deleted one finds that one's runs: a run left
    reserved by a worker that is gone is released (ended `interrupted`), so the thread is
    free for the new run."""
    store = CountingStore()
    runs = "ann/ap/runs/t-again"
    left = {
        "thread_id": "t-again",
        "assistant_id": "echo",
        "created_at": "2000-01-01T00:00:00+00:00",
        "updated_at": "2000-01-01T00:00:00+00:00",
        "metadata": {},
        "multitask_strategy": "reject",
        "status": "pending",
        "checkpoint": None,
        "webhook": None,
    }
    asyncio.run(store.put_session(runs, json.dumps({"r-left": left}).encode()))
    app = create_app(make_agents(), store=store, api_keys=KEYS)
    body = {
        "assistant_id": "echo",
        "input": {"messages": [{"role": "user", "content": "hi"}]},
        "if_not_exists": "create",
    }
    headers = {"x-api-key": "key-ann"}
    with ServerThread(app) as server:
        url = f"{server.url}/threads/t-again/runs"
        response = httpx.post(f"{url}/stream", json=body, headers=headers)
        assert "echo: hi" in response.text and "event: end" in response.text
        listed = httpx.get(url, headers=headers).json()
    assert {run["run_id"]: run["status"] for run in listed}.get("r-left") == "interrupted"
    assert [run["status"] for run in listed if run["run_id"] != "r-left"] == ["success"]
    assert store.reads[runs] >= 1
