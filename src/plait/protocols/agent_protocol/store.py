"""The store (`/store…`): JSON items a user keeps across threads, each under a namespace
(a path of labels, like a folder) and a key.

The items live in the user's `store` document in the server's store
(`plait.protocols.agent_protocol.documents`), so every worker sharing the store serves
them and each user sees only their own: another user's namespace is invisible, and an item
nobody has is `404`. `put_item` writes an item (replacing the one under the same key),
`get_item` reads one, `delete_item` removes one (nothing happens if there is none).

A `ttl` is in minutes, as the SDK sends it: the item is gone once that long has passed
since it was written or last refreshed. Reading an item (`get_item`, and the items a
`search_items` page returns) refreshes its ttl unless `refresh_ttl` is false. Expired
items are never shown and are dropped from the document at its next write.

`search_items` lists the items under a namespace prefix, newest first, keeps those whose
value has each `filter` field (a value equal to it, or a `{"$eq" | "$ne" | "$gt" | "$gte" |
"$lt" | "$lte": value}` comparison), and with a `query` keeps those sharing a word with it,
most shared words first, with `score` the number of distinct shared words. Words are cut as
the memory services cut them (`plait.memory.base.words`: runs of letters and digits, case
folded, nothing stemmed); an item's words are those of the strings in its value, or of the
fields its `index` names (`index=False`: no query finds it). `list_namespaces` lists the
namespaces that have items, sorted, matching `prefix` and `suffix` (a `"*"` label matches
any label), each cut to `max_depth` labels.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Query, Response
from pydantic import Field

from plait.errors import UsageError
from plait.memory.base import words
from plait.protocols.agent_protocol.documents import Document, now
from plait.protocols.agent_protocol.shapes import Body, errors, router_of
from plait.server.caller import Caller
from plait.server.limits import ApiError
from plait.stores.base import MAX_TTL, check_id

__all__ = ["store_router"]

_DOC = "store"
#: The longest namespace label or item key, in characters.
MAX_LABEL = 256
#: The most labels a namespace has.
MAX_DEPTH = 32
#: The most items or namespaces one page lists.
MAX_PAGE = 1000
#: The comparisons a filter field may use, by name.
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: bool(a == b),
    "$ne": lambda a, b: bool(a != b),
    "$gt": lambda a, b: bool(a > b),
    "$gte": lambda a, b: bool(a >= b),
    "$lt": lambda a, b: bool(a < b),
    "$lte": lambda a, b: bool(a <= b),
}


class ItemPut(Body):
    """What `store.put_item` sends."""

    namespace: list[str]
    key: str
    value: dict[str, Any]
    index: Literal[False] | list[str] | None = None
    ttl: float | None = None


class ItemDelete(Body):
    """What `store.delete_item` sends."""

    namespace: list[str]
    key: str


class ItemSearch(Body):
    """What `store.search_items` sends."""

    namespace_prefix: list[str] = Field(default_factory=list)
    filter: dict[str, Any] | None = None
    limit: int = Field(10, ge=0, le=MAX_PAGE)
    offset: int = Field(0, ge=0)
    query: str | None = None
    refresh_ttl: bool | None = None


class NamespaceList(Body):
    """What `store.list_namespaces` sends."""

    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = Field(None, ge=1)
    limit: int = Field(100, ge=0, le=MAX_PAGE)
    offset: int = Field(0, ge=0)


def _check_label(value: str, what: str) -> None:
    """Refuse a label or key no namespace can hold (`422`)."""
    try:
        check_id(value, what, max_length=MAX_LABEL)
    except UsageError as exc:
        raise ApiError(422, exc.message) from None


def _check_namespace(namespace: Sequence[str]) -> tuple[str, ...]:
    """Return `namespace` if an item can live in it: 1 to `MAX_DEPTH` labels without "."."""
    if not namespace:
        raise ApiError(422, "namespace: an item's namespace has at least one label")
    if len(namespace) > MAX_DEPTH:
        raise ApiError(422, f"namespace: at most {MAX_DEPTH} labels, got {len(namespace)}")
    for label in namespace:
        _check_label(label, "a namespace label")
        if "." in label:
            raise ApiError(422, f"namespace: a label cannot hold '.', got {label[:200]!r}")
    return tuple(namespace)


def _expiry(ttl: float | None, at: float) -> float | None:
    """Return when an item written at `at` with `ttl` minutes expires (None: never)."""
    return None if ttl is None else at + ttl * 60


def _check_ttl(ttl: float | None) -> None:
    """Refuse a ttl that is not None or a number of minutes above 0 (`422`)."""
    if ttl is not None and not 0 < ttl * 60 <= MAX_TTL:
        raise ApiError(422, f"ttl: minutes above 0 and at most {MAX_TTL // 60}, got {ttl}")


def _live(
    stored: dict[str, Any], at: float
) -> Iterator[tuple[tuple[str, ...], str, dict[str, Any]]]:
    """Yield each item of the document that has not expired at `at`."""
    for space, items in stored.items():
        namespace = tuple(json.loads(space))
        for key, item in items.items():
            if item.get("expires") is None or item["expires"] > at:
                yield namespace, key, item


def _purge(stored: dict[str, Any], at: float) -> None:
    """Drop from the document the items expired at `at`, and namespaces left empty."""
    for space in list(stored):
        items = stored[space]
        for key in [k for k, item in items.items() if (item.get("expires") or at + 1) <= at]:
            del items[key]
        if not items:
            del stored[space]


def _item_json(namespace: Sequence[str], key: str, item: dict[str, Any]) -> dict[str, Any]:
    """Return an item as the SDK reads it (with `expires_at` when it has a ttl)."""
    expires = item.get("expires")
    return {
        "namespace": list(namespace),
        "key": key,
        "value": item["value"],
        "created_at": item["created_at"],
        "updated_at": item["updated_at"],
        "expires_at": None if expires is None else datetime.fromtimestamp(expires, UTC).isoformat(),
    }


def _put(stored: dict[str, Any], body: ItemPut, at: float) -> None:
    """Write the item of `body` into the document."""
    _purge(stored, at)
    space = json.dumps(list(body.namespace))
    items = stored.setdefault(space, {})
    stamp = now()
    created = items.get(body.key, {}).get("created_at", stamp)
    items[body.key] = {
        "value": body.value,
        "index": body.index,
        "ttl": body.ttl,
        "expires": _expiry(body.ttl, at),
        "created_at": created,
        "updated_at": stamp,
    }


def _refresh(stored: dict[str, Any], found: Sequence[tuple[Sequence[str], str]], at: float) -> None:
    """Start again the ttl of each found item (namespace, key) that has one."""
    for namespace, key in found:
        item = stored.get(json.dumps(list(namespace)), {}).get(key)
        if item is not None and item.get("ttl") is not None:
            item["expires"] = _expiry(item["ttl"], at)


async def _get(who: Caller, namespace: tuple[str, ...], key: str, refresh: bool) -> dict[str, Any]:
    """Return the caller's item, its ttl started again when `refresh`, or `404`."""
    at = time.time()

    def find(stored: dict[str, Any]) -> dict[str, Any] | None:
        for space, name, item in _live(stored, at):
            if space == namespace and name == key:
                return item
        return None

    document = Document(who, _DOC)
    item = find(await document.read())
    if item is not None and refresh and item.get("ttl") is not None:

        def edit(stored: dict[str, Any]) -> dict[str, Any] | None:
            _refresh(stored, [(namespace, key)], at)
            return find(stored)

        item = await document.change(edit)
    if item is None:
        raise ApiError(404, f"no item '{key[:128]}' in namespace {list(namespace)!r:.200}")
    return _item_json(namespace, key, item)


def _compare(found: Any, wanted: Any) -> bool:
    """Return whether a value's field `found` passes the filter's `wanted`."""
    if isinstance(wanted, dict) and wanted and all(op in _COMPARE for op in wanted):
        try:
            return all(_COMPARE[op](found, operand) for op, operand in wanted.items())
        except TypeError:  # an order between values that have none (a str and a number)
            return False
    return bool(found == wanted)


def _passes(value: dict[str, Any], filter: dict[str, Any]) -> bool:
    """Return whether `value` has every field of `filter`, each passing it."""
    return all(name in value and _compare(value[name], w) for name, w in filter.items())


def _strings(value: Any) -> Iterator[str]:
    """Yield every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from _strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner)


def _field(value: Any, path: str) -> Any:
    """Return the field at a dotted `path` of a JSON value (None when there is none)."""
    for name in path.split("."):
        value = value.get(name) if isinstance(value, dict) else None
    return value


def _words_of(item: dict[str, Any]) -> set[str]:
    """Return the words a query finds the item by."""
    index = item.get("index")
    if index is False:
        return set()
    parts = [item["value"]] if index is None else [_field(item["value"], p) for p in index]
    return {word for part in parts for text in _strings(part) for word in words(text)}


def _search(stored: dict[str, Any], body: ItemSearch, at: float) -> list[dict[str, Any]]:
    """Return the items of the document that `body` finds, best first, in one page."""
    prefix = tuple(body.namespace_prefix)
    wanted = set(words(body.query)) if body.query else set()
    found = []
    for namespace, key, item in _live(stored, at):
        if namespace[: len(prefix)] != prefix or not _passes(item["value"], body.filter or {}):
            continue
        shared = len(wanted & _words_of(item)) if body.query else None
        if shared != 0:
            found.append((shared, namespace, key, item))
    found.sort(key=lambda f: f[3]["updated_at"], reverse=True)
    found.sort(key=lambda f: f[0] or 0, reverse=True)
    page = found[body.offset : body.offset + body.limit]
    return [{**_item_json(n, k, item), "score": shared} for shared, n, k, item in page]


async def _search_items(who: Caller, body: ItemSearch) -> dict[str, Any]:
    """Return a page of the caller's items that `body` finds, their ttls started again
    unless `refresh_ttl` is false."""
    at = time.time()
    document = Document(who, _DOC)
    page = _search(await document.read(), body, at)
    refresh = [(item["namespace"], item["key"]) for item in page if item["expires_at"]]
    if refresh and body.refresh_ttl is not False:

        def edit(stored: dict[str, Any]) -> list[dict[str, Any]]:
            _refresh(stored, refresh, at)
            return _search(stored, body, at)

        page = await document.change(edit)
    return {"items": page}


def _fits(namespace: tuple[str, ...], pattern: Sequence[str], at_end: bool) -> bool:
    """Return whether `namespace` starts (`at_end`: ends) with `pattern`, "*" any label."""
    if len(pattern) > len(namespace):
        return False
    part = namespace[len(namespace) - len(pattern) :] if at_end else namespace[: len(pattern)]
    return all(p in ("*", label) for p, label in zip(pattern, part, strict=True))


def _namespaces(stored: dict[str, Any], body: NamespaceList, at: float) -> list[list[str]]:
    """Return the page of the document's namespaces that `body` asks for."""
    every = {namespace for namespace, _, _ in _live(stored, at)}
    kept = {
        namespace[: body.max_depth] if body.max_depth else namespace
        for namespace in every
        if _fits(namespace, body.prefix or [], False) and _fits(namespace, body.suffix or [], True)
    }
    ordered = sorted(kept)
    return [list(n) for n in ordered[body.offset : body.offset + body.limit]]


def store_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the `/store…` routes; `caller` is the app's dependency that checks the API
    key."""
    return router_of("store", caller, _item_routes, _listing_routes)


def _item_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes that write, read and delete one item."""

    @router.put(
        "/store/items", status_code=204, summary="Write an item", responses=errors(401, 422)
    )
    async def put_item(body: ItemPut, who: Caller = who_dep) -> Response:
        """Write `value` under `namespace` and `key`, replacing what was there."""
        _check_namespace(body.namespace)
        _check_label(body.key, "an item's key")
        _check_ttl(body.ttl)
        await Document(who, _DOC).change(lambda stored: _put(stored, body, time.time()))
        return Response(status_code=204)

    @router.get("/store/items", summary="Read an item", responses=errors(401, 404, 422))
    async def get_item(
        namespace: str,
        key: str,
        refresh_ttl: bool = Query(True, description="Start the item's ttl again."),
        who: Caller = who_dep,
    ) -> dict[str, Any]:
        """Return the item (`namespace` is its labels joined by ".")."""
        labels = _check_namespace(namespace.split(".") if namespace else [])
        return await _get(who, labels, key, refresh_ttl)

    @router.delete(
        "/store/items", status_code=204, summary="Delete an item", responses=errors(401, 422)
    )
    async def delete_item(body: ItemDelete, who: Caller = who_dep) -> Response:
        """Delete the item, if there is one."""
        space = json.dumps(list(_check_namespace(body.namespace)))

        def edit(stored: dict[str, Any]) -> None:
            _purge(stored, time.time())
            items = stored.get(space, {})
            items.pop(body.key, None)
            if not items:
                stored.pop(space, None)

        await Document(who, _DOC).change(edit)
        return Response(status_code=204)


def _listing_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes that search items and list namespaces."""

    @router.post("/store/items/search", summary="Search items", responses=errors(401, 422))
    async def search_items(body: ItemSearch, who: Caller = who_dep) -> dict[str, Any]:
        """Return the items under `namespace_prefix` that match `filter` and `query`."""
        return await _search_items(who, body)

    @router.post("/store/namespaces", summary="List namespaces", responses=errors(401, 422))
    async def list_namespaces(body: NamespaceList, who: Caller = who_dep) -> dict[str, Any]:
        """Return the namespaces that have items, matching `prefix` and `suffix`."""
        stored = await Document(who, _DOC).read()
        return {"namespaces": _namespaces(stored, body, time.time())}
