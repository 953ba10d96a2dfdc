"""The conformance suite every memory service passes.

Each check is an async function taking a fresh, empty service; `CHECKS` lists them. Run them
with any test runner, e.g. `@pytest.mark.parametrize("check", CHECKS)`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from plait._util.expect import raised
from plait.errors import UsageError
from plait.memory import limits
from plait.memory.base import MemoryService

__all__ = ["CHECKS", "Check"]

Check = Callable[[MemoryService], Awaitable[None]]


def _user() -> str:
    return f"user-{uuid.uuid4().hex}"


async def _texts(service: MemoryService, user: str, query: str, k: int = 5) -> list[str]:
    return [item.text for item in await service.search(user, query, k)]


async def added_memories_are_found(service: MemoryService) -> None:
    """`add` returns a new id; `search` finds the memory with its id, text and metadata."""
    user = _user()
    first = await service.add(user, "I like green tea in the morning.")
    second = await service.add(user, "My cat is called Miso.", {"topic": "pets"})
    assert isinstance(first, str) and isinstance(second, str) and first != second
    [item] = await service.search(user, "What tea do I like?")
    assert (item.id, item.text, item.metadata) == (first, "I like green tea in the morning.", None)
    assert isinstance(item.score, float) and item.score > 0
    [pet] = await service.search(user, "miso")
    assert (pet.id, pet.metadata) == (second, {"topic": "pets"})


async def more_shared_words_rank_higher(service: MemoryService) -> None:
    """Memories sharing more distinct words with the query come first, with higher scores;
    one sharing none is not found."""
    user = _user()
    one = await service.add(user, "alpha kilo lima mike november")
    three = await service.add(user, "alpha bravo charlie mike november")
    two = await service.add(user, "alpha bravo oscar mike november")
    await service.add(user, "papa quebec romeo sierra tango")
    items = await service.search(user, "Alpha, bravo and charlie?")
    assert [item.id for item in items] == [three, two, one]
    assert items[0].score > items[1].score > items[2].score


async def k_bounds_the_results(service: MemoryService) -> None:
    """`search` returns at most `k` memories (5 by default); `k` outside 1 to `MAX_K` is a
    `UsageError`."""
    user = _user()
    for n in range(8):
        await service.add(user, f"note {n} about the garden")
    assert len(await service.search(user, "garden")) == 5
    assert len(await service.search(user, "garden", k=3)) == 3
    assert len(await service.search(user, "garden", 1)) == 1
    assert len(await service.search(user, "garden", k=limits.MAX_K)) == 8
    for bad in (0, -1, limits.MAX_K + 1, True, 2.0, "3", None):
        await raised(UsageError, service.search(user, "garden", k=bad))  # type: ignore[arg-type]


async def case_and_punctuation_are_ignored(service: MemoryService) -> None:
    """Words match whatever their case and the punctuation around them."""
    user = _user()
    await service.add(user, "Black COFFEE, no sugar!")
    await service.add(user, "Write to jane.doe@example.com (the-new-address)")
    assert await _texts(service, user, "coffee") == ["Black COFFEE, no sugar!"]
    assert await _texts(service, user, '"Sugar?!"') == ["Black COFFEE, no sugar!"]
    assert await _texts(service, user, "EXAMPLE") == [
        "Write to jane.doe@example.com (the-new-address)"
    ]
    assert await _texts(service, user, "new_address") == [
        "Write to jane.doe@example.com (the-new-address)"
    ]


async def only_whole_words_match(service: MemoryService) -> None:
    """A word matches the same word only: no prefixes, no stems."""
    user = _user()
    await service.add(user, "The teapot is steaming")
    assert await service.search(user, "tea") == []
    assert await service.search(user, "team teapots steam") == []
    assert await _texts(service, user, "teapot") == ["The teapot is steaming"]


_HOSTILE = [
    '"',
    "'",
    '""',
    "''",
    "\\",
    "*",
    "tea*",
    "*tea",
    "^tea",
    "-tea",
    "+tea",
    "tea:*",
    "tea:A",
    "NEAR",
    "NEAR(tea cats)",
    "NEAR(tea cats, 2)",
    "tea NEAR/2 cats",
    "AND",
    "OR",
    "NOT",
    "tea AND",
    "OR tea",
    "NOT tea",
    "tea OR NOT",
    "(tea",
    "tea)",
    "{words}: tea",
    "words:tea",
    "text:tea",
    "user_id:tea",
    "tea & cats",
    "tea | cats",
    "!tea",
    "tea <-> cats",
    "tea <2> cats",
    "'tea' & !'cats'",
    "'; DROP TABLE plait_memories; --",
    "' OR 1=1 --",
    '" OR 1=1 --',
    "tea'); DELETE FROM plait_memories; --",
    "%",
    "_",
    "%tea%",
    "\x00tea",
    "tea\x00",
    "\ud800tea",
    "\t\n\r",
    "tea" * 50,
    "a" * (limits.MAX_WORD_LENGTH + 1),
    "TEA" + "!" * 500,
    " ".join(["tea"] * 200),
    " ".join(f"w{n}" for n in range(1_000)),
]


async def hostile_queries_never_fail(service: MemoryService) -> None:
    """Query text holding FTS operators, quotes, SQL, NUL or lone surrogates searches for
    its words like any other text: it never raises and never changes a memory."""
    user = _user()
    memory = await service.add(user, "Tea with the cats, NEAR the window, AND OR NOT.")
    for query in _HOSTILE:
        items = await service.search(user, query)
        assert isinstance(items, list), query
        assert all(item.id == memory for item in items), query
    assert len(await service.search(user, "NEAR(tea cats)")) == 1
    assert len(await service.search(user, "'; DROP TABLE plait_memories; --")) == 0
    assert len(await service.search(user, "tea'); DELETE FROM plait_memories; --")) == 1
    assert len(await service.search(user, "\x00tea")) == 1
    assert await _texts(service, user, "window") == [
        "Tea with the cats, NEAR the window, AND OR NOT."
    ]


async def queries_without_words_find_nothing(service: MemoryService) -> None:
    """An empty query, or one of punctuation and spaces only, finds nothing."""
    user = _user()
    await service.add(user, "Something to remember")
    for query in ("", "   ", "!!! ??? ...", "- * ^ \" ' ( )", "\x00"):
        assert await service.search(user, query) == [], query


async def users_never_see_each_other(service: MemoryService) -> None:
    """A user's search finds only their memories; deleting another user's memory does
    nothing; user ids are compared exactly."""
    alice, bob = f"alice-{uuid.uuid4().hex}", f"bob-{uuid.uuid4().hex}"
    mine = await service.add(alice, "Alice's secret: the vault code is 1234")
    await service.add(f"{alice}%", "the vault is empty")
    assert await service.search(bob, "secret vault code") == []
    assert await service.search(alice.upper(), "vault") == []
    assert await service.search(alice[:-1], "vault") == []
    await service.delete(bob, mine)
    assert [item.id for item in await service.search(alice, "vault")] == [mine]
    await service.add(bob, "Bob's vault code is 9999")
    assert await _texts(service, alice, "vault") == ["Alice's secret: the vault code is 1234"]
    await service.delete(alice, mine)
    assert await service.search(alice, "vault") == []
    assert await _texts(service, bob, "vault") == ["Bob's vault code is 9999"]


async def deleting_is_idempotent(service: MemoryService) -> None:
    """Deleting a memory twice, an unknown id or an id of any other form does nothing."""
    user = _user()
    kept = await service.add(user, "kept memory")
    gone = await service.add(user, "gone memory")
    await service.delete(user, gone)
    await service.delete(user, gone)
    for other in (uuid.uuid4().hex, "", "x" * 10_000, "' OR 1=1 --", "\x00", "\ud800"):
        await service.delete(user, other)
    assert [item.id for item in await service.search(user, "memory")] == [kept]
    await raised(UsageError, service.delete(user, 42))  # type: ignore[arg-type]


async def metadata_round_trips(service: MemoryService) -> None:
    """Metadata comes back as the JSON data it was (tuples as lists); what is not JSON
    data, or is too large, is a `UsageError`."""
    user = _user()
    metadata = {
        "source": "chat",
        "n": 3,
        "ratio": 0.25,
        "ok": True,
        "none": None,
        "tags": ["a", "ünïcode", "\u6771\u4eac"],
        "nested": {"deep": {"list": [1, 2.5, False]}},
        "pair": (1, 2),
        "quote": 'it\'s "quoted"\x00',
    }
    await service.add(user, "first entry", metadata)
    await service.add(user, "second entry", {})
    await service.add(user, "third entry")
    found = {item.text: item.metadata for item in await service.search(user, "entry")}
    expected = {**metadata, "pair": [1, 2]}
    assert found == {"first entry": expected, "second entry": {}, "third entry": None}
    bad: list[Any] = [
        ["not", "a", "dict"],
        "text",
        {1: "int key"},
        {"nan": float("nan")},
        {"set": {1, 2}},
        {"object": object()},
        {"big": "x" * limits.MAX_METADATA_BYTES},
    ]
    for value in bad:
        await raised(UsageError, service.add(user, "refused entry", value))
    assert len(await service.search(user, "entry", k=10)) == 3


async def unicode_round_trips(service: MemoryService) -> None:
    """Text in any script comes back exactly; its words match case-folded."""
    user = _user()
    text = "Ünïcödé: Straße in München, café ☕, 東京タワー, Ελλάδα, עברית 🎉"
    memory = await service.add(user, text)
    for query in ("STRASSE", "straße", "CAFÉ", "münchen", "東京タワー", "ελλάδα", "עברית"):
        [item] = await service.search(user, query)
        assert (item.id, item.text) == (memory, text), query
    assert await service.search(user, "cafe") == []  # accents count


async def size_limits_are_enforced(service: MemoryService) -> None:
    """Texts up to `MAX_TEXT_LENGTH` characters are kept whole; longer ones, empty ones,
    non-str ones and ones holding NUL or a lone surrogate are a `UsageError` naming the
    limit; queries over `MAX_QUERY_LENGTH` are a `UsageError`; a word over
    `MAX_WORD_LENGTH` characters is ignored."""
    user = _user()
    body = "longest " + "x" * (limits.MAX_TEXT_LENGTH - len("longest  end")) + " end"
    assert len(body) == limits.MAX_TEXT_LENGTH
    memory = await service.add(user, body)
    [item] = await service.search(user, "longest")
    assert (item.id, item.text) == (memory, body)
    error = await raised(UsageError, service.add(user, body + "!"))
    assert str(limits.MAX_TEXT_LENGTH) in str(error)
    for bad in ("", "   ", None, 3, b"bytes", "nul \x00 inside", "lone \ud800 surrogate"):
        await raised(UsageError, service.add(user, bad))  # type: ignore[arg-type]
    assert await service.search(user, "q " * (limits.MAX_QUERY_LENGTH // 2)) == []
    error = await raised(UsageError, service.search(user, "q" * (limits.MAX_QUERY_LENGTH + 1)))
    assert str(limits.MAX_QUERY_LENGTH) in str(error)
    await raised(UsageError, service.search(user, None))  # type: ignore[arg-type]
    longest, too_long = "w" * limits.MAX_WORD_LENGTH, "v" * (limits.MAX_WORD_LENGTH + 1)
    await service.add(user, f"{longest} {too_long}")
    assert len(await service.search(user, longest)) == 1
    assert await service.search(user, too_long) == []


async def bad_user_ids_are_refused(service: MemoryService) -> None:
    """A user id that is not a non-empty str without control characters (at most 256
    characters) is a `UsageError` in every method."""
    memory = uuid.uuid4().hex
    longest = "x" * limits.MAX_USER_ID_LENGTH
    assert len(await service.search(longest, "text")) == 0
    await service.add(longest, "text")
    assert len(await service.search(longest, "text")) == 1
    for bad in ("", None, 7, "tab\there", "nul\x00", "x" * (limits.MAX_USER_ID_LENGTH + 1)):
        await raised(UsageError, service.add(bad, "text"))  # type: ignore[arg-type]
        await raised(UsageError, service.search(bad, "text"))  # type: ignore[arg-type]
        await raised(UsageError, service.delete(bad, memory))  # type: ignore[arg-type]


async def concurrent_adds_are_all_kept(service: MemoryService) -> None:
    """Memories added concurrently are all kept, with distinct ids."""
    user = _user()
    ids = await asyncio.gather(*(service.add(user, f"parallel note {n}") for n in range(20)))
    assert len(set(ids)) == 20
    found = await service.search(user, "parallel", k=50)
    assert {item.id for item in found} == set(ids)


async def closing_and_reopening_keeps_memories(service: MemoryService) -> None:
    """After `close` the next call opens the service again, with its memories."""
    user = _user()
    memory = await service.add(user, "survives a close")
    await service.close()
    [item] = await service.search(user, "survives")
    assert item.id == memory
    await service.close()
    await service.close()


CHECKS: list[Check] = [
    added_memories_are_found,
    more_shared_words_rank_higher,
    k_bounds_the_results,
    case_and_punctuation_are_ignored,
    only_whole_words_match,
    hostile_queries_never_fail,
    queries_without_words_find_nothing,
    users_never_see_each_other,
    deleting_is_idempotent,
    metadata_round_trips,
    unicode_round_trips,
    size_limits_are_enforced,
    bad_user_ids_are_refused,
    concurrent_adds_are_all_kept,
    closing_and_reopening_keeps_memories,
]
