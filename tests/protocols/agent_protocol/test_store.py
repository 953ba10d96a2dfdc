"""The store through the official langgraph-sdk client: items under namespaces, searched
and listed, with ttls, each user's own, served by any worker sharing the store."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from langgraph_sdk.errors import NotFoundError

from tests.protocols.agent_protocol.support import Served, serve
from tests.server.support import WAIT


async def test_put_get_replace_and_delete(served: Served) -> None:
    store = served.ann.store
    await store.put_item(["notes", "ann"], "a", {"text": "hi"})
    item = await store.get_item(["notes", "ann"], "a")
    assert item["namespace"] == ["notes", "ann"]
    assert (item["key"], item["value"], item["expires_at"]) == ("a", {"text": "hi"}, None)
    await store.put_item(["notes", "ann"], "a", {"text": "bye"})
    again = await store.get_item(["notes", "ann"], "a")
    assert again["value"] == {"text": "bye"}
    assert again["created_at"] == item["created_at"]
    await store.delete_item(["notes", "ann"], "a")
    with pytest.raises(NotFoundError):
        await store.get_item(["notes", "ann"], "a")
    await store.delete_item(["notes", "ann"], "a")  # deleting nothing is no error


async def test_another_users_items_are_invisible(served: Served) -> None:
    await served.ann.store.put_item(["notes"], "a", {"text": "ann's"})
    with pytest.raises(NotFoundError):
        await served.bob.store.get_item(["notes"], "a")
    assert (await served.bob.store.search_items(["notes"]))["items"] == []
    assert (await served.bob.store.list_namespaces())["namespaces"] == []
    await served.bob.store.put_item(["notes"], "a", {"text": "bob's"})
    await served.bob.store.delete_item(["notes"], "a")
    assert (await served.ann.store.get_item(["notes"], "a"))["value"] == {"text": "ann's"}


async def test_items_written_at_once_are_all_kept(served: Served) -> None:
    store = served.ann.store
    await asyncio.gather(*(store.put_item(["many"], f"k{n}", {"n": n}) for n in range(8)))
    found = await store.search_items(["many"], limit=100)
    assert sorted(i["value"]["n"] for i in found["items"]) == list(range(8))


async def test_search_by_prefix_filter_and_page(served: Served) -> None:
    store = served.ann.store
    for n in range(4):
        await store.put_item(["docs", f"d{n % 2}"], f"k{n}", {"n": n, "even": n % 2 == 0})
    await store.put_item(["other"], "x", {"n": 9})
    found = await store.search_items(["docs"])
    assert [i["key"] for i in found["items"]] == ["k3", "k2", "k1", "k0"]  # newest first
    evens = await store.search_items(["docs"], filter={"even": True})
    assert [i["key"] for i in evens["items"]] == ["k2", "k0"]
    big = await store.search_items([], filter={"n": {"$gte": 2}})
    assert [i["key"] for i in big["items"]] == ["x", "k3", "k2"]
    inside = await store.search_items(["docs", "d1"])
    assert [i["key"] for i in inside["items"]] == ["k3", "k1"]
    page = await store.search_items(["docs"], limit=2, offset=1)
    assert [i["key"] for i in page["items"]] == ["k2", "k1"]


async def test_a_query_finds_shared_words_best_first(served: Served) -> None:
    store = served.ann.store
    await store.put_item(["m"], "tea", {"text": "I like green tea.", "tags": ["drinks"]})
    await store.put_item(["m"], "both", {"text": "Green TEA and coffee"})
    await store.put_item(["m"], "hidden", {"text": "green tea"}, index=False)
    await store.put_item(["m"], "titled", {"title": "tea", "body": "green"}, index=["title"])
    await store.put_item(["m"], "none", {"text": "water"})
    found = (await store.search_items(["m"], query="green tea, coffee!"))["items"]
    assert [(i["key"], i["score"]) for i in found] == [("both", 3), ("tea", 2), ("titled", 1)]
    tagged = await store.search_items(["m"], query="drinks")
    assert [i["key"] for i in tagged["items"]] == ["tea"]


async def test_list_namespaces(served: Served) -> None:
    store = served.ann.store
    for namespace in (["a", "b", "c"], ["a", "b", "d"], ["a", "x"], ["z", "b"]):
        await store.put_item(namespace, "k", {"v": 1})
    every = (await store.list_namespaces())["namespaces"]
    assert every == [["a", "b", "c"], ["a", "b", "d"], ["a", "x"], ["z", "b"]]
    assert (await store.list_namespaces(prefix=["a", "b"]))["namespaces"] == [
        ["a", "b", "c"],
        ["a", "b", "d"],
    ]
    assert (await store.list_namespaces(suffix=["b"]))["namespaces"] == [["z", "b"]]
    assert (await store.list_namespaces(prefix=["*", "b"]))["namespaces"] == [
        ["a", "b", "c"],
        ["a", "b", "d"],
        ["z", "b"],
    ]
    shallow = await store.list_namespaces(max_depth=1)
    assert shallow["namespaces"] == [["a"], ["z"]]
    page = await store.list_namespaces(limit=2, offset=1)
    assert page["namespaces"] == [["a", "b", "d"], ["a", "x"]]


async def test_reading_an_item_starts_its_ttl_again(served: Served) -> None:
    store = served.ann.store
    await store.put_item(["t"], "k", {"v": 1}, ttl=60)
    first = (await store.get_item(["t"], "k", refresh_ttl=False))["expires_at"]
    assert first is not None
    assert (await store.get_item(["t"], "k", refresh_ttl=False))["expires_at"] == first
    refreshed = (await store.get_item(["t"], "k"))["expires_at"]
    assert refreshed > first
    searched = (await store.search_items(["t"]))["items"][0]["expires_at"]
    assert searched > refreshed
    kept = await store.search_items(["t"], refresh_ttl=False)
    assert kept["items"][0]["expires_at"] == searched


async def test_an_item_is_gone_once_its_ttl_passed(served: Served) -> None:
    store = served.ann.store
    await store.put_item(["t"], "brief", {"v": 1}, ttl=0.005)  # 0.3 seconds
    await store.put_item(["t"], "kept", {"v": 2})
    deadline = time.monotonic() + WAIT
    while (await store.search_items(["t"], refresh_ttl=False))["items"][-1]["key"] == "brief":
        assert time.monotonic() < deadline, "the item never expired"
        await asyncio.sleep(0.05)
    with pytest.raises(NotFoundError):
        await store.get_item(["t"], "brief")
    assert [i["key"] for i in (await store.search_items(["t"]))["items"]] == ["kept"]


async def test_any_worker_serves_the_items(tmp_path: Path) -> None:
    async with serve(tmp_path) as one, serve(tmp_path) as two:
        await one.ann.store.put_item(["shared"], "k", {"v": 1})
        assert (await two.ann.store.get_item(["shared"], "k"))["value"] == {"v": 1}
        await two.ann.store.delete_item(["shared"], "k")
        with pytest.raises(NotFoundError):
            await one.ann.store.get_item(["shared"], "k")


@pytest.mark.parametrize(
    "body",
    [
        {"namespace": [], "key": "k", "value": {}},
        {"namespace": ["a.b"], "key": "k", "value": {}},
        {"namespace": ["a"], "key": "", "value": {}},
        {"namespace": ["a"], "key": "k", "value": {}, "ttl": 0},
        {"namespace": ["a"], "key": "k", "value": {}, "ttl": -5},
        {"namespace": ["a"], "key": "k", "value": "not an object"},
    ],
)
def test_a_bad_item_is_refused(served: Served, body: dict[str, object]) -> None:
    headers = {"x-api-key": "key-ann"}
    response = httpx.put(f"{served.url}/store/items", json=body, headers=headers)
    assert response.status_code == 422, response.text
    listed = httpx.post(f"{served.url}/store/namespaces", json={}, headers=headers)
    assert listed.json() == {"namespaces": []}


def test_a_page_too_large_is_refused(served: Served) -> None:
    headers = {"x-api-key": "key-ann"}
    search = {"namespace_prefix": [], "limit": 100_000}
    response = httpx.post(f"{served.url}/store/items/search", json=search, headers=headers)
    assert response.status_code == 422
