"""Where threads and their runs are kept: what an earlier plait stored (one document of
threads and one of runs per user) is read, listed and run on as before, each user's own;
a run on a new thread leaves a record of its own beside each of the user's threads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langgraph_sdk.errors import NotFoundError

from plait.stores.sqlite import SqliteStore
from tests.protocols.agent_protocol.support import serve

STAMP = "2025-01-02T03:04:05+00:00"


def _thread(metadata: dict[str, str]) -> dict[str, object]:
    return {"metadata": metadata, "created_at": STAMP, "updated_at": STAMP, "run": None}


def _run(thread_id: str) -> dict[str, object]:
    return {
        "thread_id": thread_id,
        "assistant_id": "echo",
        "created_at": STAMP,
        "updated_at": STAMP,
        "metadata": {"old": True},
        "multitask_strategy": "reject",
        "status": "success",
        "checkpoint": None,
        "webhook": None,
    }


async def _store_as_before(path: Path) -> None:
    """Write ann's and bob's threads and runs as plait wrote them before."""
    store = SqliteStore(path)
    threads = {"t-old": _thread({"k": "v"}), "t-two": _thread({"k": "w"})}
    runs = {"r-old": _run("t-old"), "r-two": _run("t-two")}
    await store.put_session("ann/ap/threads", json.dumps(threads).encode())
    await store.put_session("ann/ap/runs", json.dumps(runs).encode())
    await store.put_session("bob/ap/threads", json.dumps({"t-bob": _thread({})}).encode())
    await store.close()


async def test_threads_and_runs_stored_before_are_served(tmp_path: Path) -> None:
    await _store_as_before(tmp_path / "ap.db")
    async with serve(tmp_path) as served:
        ann = served.ann
        assert (await ann.threads.get("t-old"))["metadata"] == {"k": "v"}
        found = await ann.threads.search(metadata={"k": "w"})
        assert [t["thread_id"] for t in found] == ["t-two"]
        assert await ann.threads.count() == 2
        runs = await ann.runs.list("t-old")
        assert [(r["run_id"], r["metadata"]) for r in runs] == [("r-old", {"old": True})]
        assert (await ann.runs.get("t-two", "r-two"))["status"] == "success"
        values = await ann.runs.wait(
            "t-old", "echo", input={"messages": [{"role": "user", "content": "again"}]}
        )
        assert values["messages"][-1]["content"] == "echo: again"
        assert len(await ann.runs.list("t-old")) == 2
        with pytest.raises(NotFoundError):
            await ann.threads.get("t-bob")
        assert [t["thread_id"] for t in await served.bob.threads.search()] == ["t-bob"]
    store = SqliteStore(tmp_path / "ap.db")
    try:  # the old documents are gone once moved
        assert await store.get_session("ann/ap/threads") is None
        assert await store.get_session("ann/ap/runs") is None
    finally:
        await store.close()


async def test_each_thread_and_its_runs_have_records_of_their_own(tmp_path: Path) -> None:
    async with serve(tmp_path) as served:
        for name in ("a", "b", "c"):
            await served.ann.runs.wait(
                f"t-{name}",
                "echo",
                input={"messages": [{"role": "user", "content": name}]},
                if_not_exists="create",
            )
        await served.ann.threads.delete("t-b")
        listed = {t["thread_id"] for t in await served.ann.threads.search()}
        assert listed == {"t-a", "t-c"}
        assert await served.ann.threads.count() == 2
    store = SqliteStore(tmp_path / "ap.db")
    try:
        for name in ("a", "c"):
            thread = json.loads(await store.get_session(f"ann/ap/thread/t-{name}") or b"{}")
            assert thread["metadata"] == {"graph_id": "echo"}
            runs = json.loads(await store.get_session(f"ann/ap/runs/t-{name}") or b"{}")
            assert [run["status"] for run in runs.values()] == ["success"]
        assert await store.get_session("ann/ap/thread/t-b") is None
        listing = json.loads(await store.get_session("ann/ap/thread-list") or b"{}")
        assert list(listing["threads"]) == ["t-a", "t-c"]
    finally:
        await store.close()


async def test_a_long_thread_list_is_kept_in_order(tmp_path: Path) -> None:
    made = [f"t-{n:03}" for n in range(150)]  # more than two blocks of the list's texts
    async with serve(tmp_path) as served:
        for thread_id in made:
            await served.ann.threads.create(thread_id=thread_id)
        for thread_id in ("t-000", "t-070", "t-149"):
            await served.ann.threads.delete(thread_id)
        await served.ann.threads.create(thread_id="t-new")
        assert await served.ann.threads.count() == 148
    kept = [t for t in made if t not in ("t-000", "t-070", "t-149")] + ["t-new"]
    store = SqliteStore(tmp_path / "ap.db")
    try:
        listing = json.loads(await store.get_session("ann/ap/thread-list") or b"{}")
        assert list(listing["threads"]) == kept
    finally:
        await store.close()
