"""Quote what a model sent in a message about it, cut short when it is long."""

from __future__ import annotations

__all__ = ["QUOTE_CHARS", "quote"]

QUOTE_CHARS = 200  # the most of a model-sent value that an error message repeats


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """Return `value`'s repr for an error message; past `limit` characters, cut it and add
    its size: `'xxx'…(10,485,760 characters)`.

    A string is measured in its own characters (not its repr's); anything else in the
    characters of its repr.
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}…({len(value):,} characters)"
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…({len(text):,} characters)"
