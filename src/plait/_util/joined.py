"""Texts kept by key, in order, whose join is kept too: an index written whole at every
change encodes only what changed.

The indexes of sessions, runs and a day's ledger runs are each one record holding every
entry, written again at every change. Each entry's JSON text is kept (`JoinedParts`), in
blocks of `BLOCK` entries whose joined text is kept as well: a change joins again only its
entry's block, and the whole is the join of the blocks' texts, so writing an index of `n`
entries after one change costs `n / BLOCK` pieces and one copy of the text, not `n` pieces.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["BLOCK", "JoinedParts"]

#: Entries per block.
BLOCK = 64


class _Block:
    """Some consecutive entries (key -> text) and their joined text, encoded (None: to
    join again)."""

    __slots__ = ("parts", "text")

    def __init__(self) -> None:
        self.parts: dict[str, str] = {}
        self.text: bytes | None = None


class JoinedParts:
    """Texts by key in the order they were added (a key set again keeps its place, unless
    moved last), joined with `sep` (see the module's docstring)."""

    __slots__ = ("_blocks", "_sep", "_where")

    def __init__(self, sep: str = ", ") -> None:
        self._blocks: list[_Block] = []
        self._where: dict[str, _Block] = {}
        self._sep = sep

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: object) -> bool:
        return key in self._where

    def __iter__(self) -> Iterator[str]:
        """Yield the keys in order."""
        for block in self._blocks:
            yield from block.parts

    def set(self, key: str, text: str, *, last: bool = False) -> None:
        """Set the text of `key`: a new key goes last, a known one keeps its place (`last`:
        it moves last)."""
        where = self._where
        block = where.get(key)
        if block is not None:
            if not last:
                block.parts[key] = text
                block.text = None
                return
            del block.parts[key]
            block.text = None
        blocks = self._blocks
        if not blocks or len(blocks[-1].parts) >= BLOCK:
            blocks.append(_Block())
        block = where[key] = blocks[-1]
        block.parts[key] = text
        block.text = None

    def pop(self, key: str) -> bool:
        """Remove `key`; return whether it was there."""
        block = self._where.pop(key, None)
        if block is None:
            return False
        del block.parts[key]
        block.text = None
        return True

    def joined(self) -> bytes:
        """Return every text, in order, joined with `sep`, encoded (the texts are ASCII,
        as JSON encoded with `ensure_ascii` is)."""
        if any(not block.parts for block in self._blocks):
            self._blocks = [block for block in self._blocks if block.parts]
        sep = self._sep
        texts = []
        for block in self._blocks:
            if block.text is None:
                block.text = sep.join(block.parts.values()).encode()
            texts.append(block.text)
        return sep.encode().join(texts)
