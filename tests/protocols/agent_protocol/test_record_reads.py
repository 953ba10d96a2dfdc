"""What a streamed run on a new thread reads and writes of its thread's two documents: each
write a compare-and-set of the store, each change starting from what the run last read or
wrote of that document (so a run reads each document once, at its start)."""

from __future__ import annotations

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
    assert (store.reads[runs], store.writes[runs]) == (1, 3)  # reserved, started, ended
