"""The memory service protocol, the memories it returns, and the rules every backend shares.

A memory is a text a user's agent should remember across sessions, with optional JSON
metadata. `search` finds the memories that share a word with the query, best first.
Words are what both backends index and search, cut the same way: maximal runs of letters
and digits (punctuation and underscores separate them), after NFKC normalization and case
folding; a word longer than `MAX_WORD_LENGTH` characters is ignored. So "Tea!" finds "I
like tea." and nothing is stemmed ("teas" does not find "tea").
"""

from __future__ import annotations

import dataclasses
import json
import re
import unicodedata
import uuid
from typing import Any, Protocol, runtime_checkable

from plait._util.closing import Closing
from plait._util.json import json_mapping
from plait.errors import UsageError
from plait.memory.limits import (
    MAX_K,
    MAX_METADATA_BYTES,
    MAX_QUERY_LENGTH,
    MAX_TEXT_LENGTH,
    MAX_USER_ID_LENGTH,
    MAX_WORD_LENGTH,
)
from plait.stores.base import check_id

__all__ = [
    "ClosingMemoryService",
    "MemoryItem",
    "MemoryService",
    "check_k",
    "is_memory_id",
    "score",
    "check_query",
    "check_text",
    "check_user_id",
    "decode_metadata",
    "encode_metadata",
    "words",
]


_WORD = re.compile(r"[^\W_]+")
_MEMORY_ID = re.compile(r"[0-9a-f]{32}")


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryItem:
    """One memory found by `search`."""

    id: str
    """The memory's id, as `add` returned it."""
    text: str
    """The memory's text, as it was added."""
    metadata: dict[str, Any] | None
    """The metadata given to `add` (JSON: tuples come back as lists), or None."""
    score: float
    """How well it matches the query, higher is better: the number of distinct words it
    shares with the query, plus a fraction (below 1) from the backend's relevance ranking
    (bm25 for SQLite, `ts_rank` for PostgreSQL), which orders memories sharing as many."""


@runtime_checkable
class MemoryService(Protocol):
    """Long-term memories of users: added, searched by words, deleted; one user never sees
    another's."""

    async def add(self, user_id: str, text: str, metadata: dict[str, Any] | None = None) -> str:
        """Remember `text` (with JSON `metadata`) for `user_id`; return the new memory's id."""
        ...

    async def search(self, user_id: str, query: str, k: int = 5) -> list[MemoryItem]:
        """Return at most `k` memories of `user_id` that share a word with `query`, best
        first (more shared words rank higher); none for a query without words."""
        ...

    async def delete(self, user_id: str, memory_id: str) -> None:
        """Forget the memory `memory_id` of `user_id`; nothing happens when `user_id` has no
        such memory (another user's included)."""
        ...

    async def close(self) -> None:
        """Release the connections; the next call opens new ones."""
        ...


class ClosingMemoryService(Closing):
    """The common part of plait's memory services: every argument checked, the new memory's
    id and the words made, before the backend's own `_add`, `_search` and `_delete` see
    them; `async with` closes the service."""

    async def add(self, user_id: str, text: str, metadata: dict[str, Any] | None = None) -> str:
        """Remember `text` (with JSON `metadata`) for `user_id`; return the new memory's id."""
        check_user_id(user_id)
        check_text(text)
        encoded = encode_metadata(metadata)
        memory_id = uuid.uuid4().hex
        await self._add(memory_id, user_id, text, encoded, " ".join(words(text)))
        return memory_id

    async def search(self, user_id: str, query: str, k: int = 5) -> list[MemoryItem]:
        """Return at most `k` memories of `user_id` that share a word with `query`, best
        first; none for a query without words."""
        check_user_id(user_id)
        check_query(query)
        check_k(k)
        found = list(dict.fromkeys(words(query)))
        if not found:
            return []
        return await self._search(user_id, found, k)

    async def delete(self, user_id: str, memory_id: str) -> None:
        """Forget the memory `memory_id` of `user_id` (nothing when it has none such)."""
        check_user_id(user_id)
        if is_memory_id(memory_id):
            await self._delete(user_id, memory_id)

    async def _add(
        self, memory_id: str, user_id: str, text: str, metadata: str | None, indexed: str
    ) -> None:
        """Store a memory and its words, space-separated (each backend defines this)."""
        raise NotImplementedError

    async def _search(self, user_id: str, query_words: list[str], k: int) -> list[MemoryItem]:
        """Return the best `k` memories sharing one of `query_words` (each backend defines
        this)."""
        raise NotImplementedError

    async def _delete(self, user_id: str, memory_id: str) -> None:
        """Delete a memory of `user_id` (each backend defines this)."""
        raise NotImplementedError


def words(text: str) -> list[str]:
    """Return the words of `text` as they are indexed and searched, in order."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return [w for w in _WORD.findall(folded) if len(w) <= MAX_WORD_LENGTH]


def score(shared: int, relevance: float) -> float:
    """Return a memory's score: `shared` words plus `relevance` (0 or more) squeezed below 1."""
    r = max(float(relevance), 0.0)
    return int(shared) + r / (1.0 + r)


def check_user_id(user_id: object) -> str:
    """Return `user_id` if it is a valid id (a non-empty str of at most 256 characters
    without control characters).

    Raises:
        UsageError: It is not.
    """
    return check_id(user_id, "user_id", max_length=MAX_USER_ID_LENGTH)


def _check_length(what: str, length: int, limit: int, unit: str, advice: str = "") -> None:
    """Raise a `UsageError` carrying `limit` and `length` when `length` is over `limit`."""
    if length > limit:
        raise UsageError(
            f"{what} is {length} {unit}, over the limit of {limit}{advice}",
            limit=limit,
            length=length,
        )


def check_text(text: object) -> str:
    """Return `text` if a memory can hold it.

    Raises:
        UsageError: It is not a str, is empty, longer than `MAX_TEXT_LENGTH`, or holds a
            NUL character or a lone surrogate.
    """
    if not isinstance(text, str):
        raise UsageError(f"a memory's text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise UsageError("a memory's text is empty")
    split = "; split it into several memories"
    _check_length("a memory's text", len(text), MAX_TEXT_LENGTH, "characters", split)
    if "\x00" in text:
        raise UsageError(f"a memory's text holds a NUL character at index {text.index(chr(0))}")
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"a memory's text holds a lone surrogate at index {exc.start}; it is not UTF-8"
        ) from None
    return text


def check_query(query: object) -> str:
    """Return `query` if it can be searched.

    Raises:
        UsageError: It is not a str or is longer than `MAX_QUERY_LENGTH`.
    """
    if not isinstance(query, str):
        raise UsageError(f"a search query must be a str, got {type(query).__name__}")
    _check_length("a search query", len(query), MAX_QUERY_LENGTH, "characters")
    return query


def check_k(k: object) -> int:
    """Return `k` if it is a number of memories to return (1 to `MAX_K`).

    Raises:
        UsageError: It is not.
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise UsageError(f"k must be an int from 1 to {MAX_K}, got {k!r}")
    return k


def is_memory_id(memory_id: object) -> bool:
    """Return whether `memory_id` has the form of the ids `add` returns (32 hex digits); a
    str of another form is no memory's id.

    Raises:
        UsageError: It is not a str.
    """
    if not isinstance(memory_id, str):
        raise UsageError(f"memory_id must be a str, got {type(memory_id).__name__}")
    return _MEMORY_ID.fullmatch(memory_id) is not None


def encode_metadata(metadata: object) -> str | None:
    """Return `metadata` as JSON text (None stays None).

    Raises:
        UsageError: It is not a mapping of str keys to JSON data, or its JSON is over
            `MAX_METADATA_BYTES`.
    """
    if metadata is None:
        return None
    data = json_mapping(metadata, "metadata")
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    _check_length("metadata", len(text), MAX_METADATA_BYTES, "bytes as JSON")
    return text


def decode_metadata(text: str | None) -> dict[str, Any] | None:
    """Return the metadata `encode_metadata` encoded."""
    if text is None:
        return None
    value: dict[str, Any] = json.loads(text)
    return value
