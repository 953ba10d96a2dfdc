"""The limits every memory service holds to: texts, queries, metadata, user ids, words and
the number of memories one search returns."""

from __future__ import annotations

__all__ = [
    "MAX_K",
    "MAX_METADATA_BYTES",
    "MAX_QUERY_LENGTH",
    "MAX_TEXT_LENGTH",
    "MAX_USER_ID_LENGTH",
    "MAX_WORD_LENGTH",
]

#: The longest user id, in characters.
MAX_USER_ID_LENGTH = 256
#: The longest memory text, in characters.
MAX_TEXT_LENGTH = 100_000
#: The longest search query, in characters.
MAX_QUERY_LENGTH = 10_000
#: The most memories one search returns.
MAX_K = 1_000
#: The largest metadata, in bytes of its JSON encoding.
MAX_METADATA_BYTES = 65_536
#: The longest word that is indexed and searched; longer runs of letters are ignored.
MAX_WORD_LENGTH = 100
