"""Counts in words for what a person reads: `1 step`, `3 steps`."""

from __future__ import annotations

__all__ = ["counted"]


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """Return `count` and the noun in its number: `counted(1, "step")` is `"1 step"`,
    `counted(0, "step")` is `"0 steps"`; `plural` when adding "s" is not the plural."""
    word = noun if count == 1 else (plural or f"{noun}s")
    return f"{count} {word}"
