"""The checks every store makes of what it is given: ids, ttls, expected versions and
batches of checkpoint writes (`plait.stores.base` states the rules and exports them)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence, Sized

from plait.errors import UsageError

#: The longest id a store holds, in characters (code points).
MAX_ID_LENGTH = 512
#: The longest id the `Runner` takes for a new run or session: room is left for the ids it
#: derives from it (`"<id>.step-<n>"` snapshots).
MAX_RUN_ID_LENGTH = 256
#: The most checkpoints one `put_checkpoints` writes.
MAX_BATCH = 100
#: The longest ttl, in seconds (100 years); None means no expiry.
MAX_TTL = 100 * 365 * 24 * 3600

_SHOWN = 200
_ID_RULE = (
    "ids are str of 1 to {limit} characters with no control characters (such as NUL, tab or"
    " newline), line or paragraph separators (U+2028, U+2029) or lone surrogates"
)
_BAD_ID_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_GOOD_CHARACTER = r"[^\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]"


def _shown(value: object) -> str:
    """Return `value`'s repr, cut to 200 characters and followed by its size when longer."""
    try:
        text = repr(value)
    except ValueError:  # an int too large to turn into digits
        return f"<a {type(value).__name__} too large to show>"
    if len(text) <= _SHOWN:
        return text
    if isinstance(value, str):
        size = f"{len(value)} characters"
    elif isinstance(value, Sized):
        size = f"length {len(value)}"
    else:
        size = f"a repr of {len(text)} characters"
    return f"{text[:_SHOWN]}... ({size})"


def check_id(value: object, what: str = "id", *, max_length: int = MAX_ID_LENGTH) -> str:
    """Return `value` if it is an id every store can hold (see the module's docstring).

    `what` names the value in the error, e.g. "checkpoint_id".

    Raises:
        UsageError: It is not a str, is empty or longer than `max_length`, or holds a
            control character, a line or paragraph separator or a lone surrogate.
    """
    if (  # an ASCII id is good when printable: no control character is (nor DEL)
        type(value) is str
        and value.isascii()
        and value.isprintable()
        and 0 < len(value) <= max_length
    ):
        return value
    try:  # a good id in one match (of a length with a pattern): not a str raises TypeError
        good = _GOOD_IDS[max_length](value)  # type: ignore[arg-type]
        if good is not None:
            return good.string
    except (KeyError, TypeError):
        pass
    return _check_id(value, what, max_length)


def _good_ids(max_length: int) -> Callable[[str], re.Match[str] | None]:
    """Return the match of a whole good id of 1 to `max_length` characters."""
    return re.compile(f"{_GOOD_CHARACTER}{{1,{max_length}}}+").fullmatch


#: The match of a good id, by `max_length` (the lengths `check_id` was asked for).
_GOOD_IDS = {n: _good_ids(n) for n in (MAX_ID_LENGTH, MAX_RUN_ID_LENGTH)}
#: The match of the ids of a batch (`check_writes`), joined with NUL.
_GOOD_BATCH = re.compile(
    f"(?:{_GOOD_CHARACTER}{{1,{MAX_ID_LENGTH}}}+\\x00)*+{_GOOD_CHARACTER}{{1,{MAX_ID_LENGTH}}}+"
).fullmatch


def _check_id(value: object, what: str, max_length: int) -> str:
    """Return `value` if it is an id of at most `max_length` characters; else raise the
    `UsageError` of `check_id`, naming it `what`."""
    if isinstance(value, str) and value and len(value) <= max_length:
        bad = _BAD_ID_CHARACTER.search(value)
        if bad is None:
            if type(max_length) is int and 0 < max_length <= 65536 and len(_GOOD_IDS) < 64:
                _GOOD_IDS[max_length] = _good_ids(max_length)
            return value
    rule = _ID_RULE.format(limit=max_length)
    if not isinstance(value, str):
        raise UsageError(
            f"{what} must be a str, got {type(value).__name__} {_shown(value)}; {rule}"
        )
    if not value:
        raise UsageError(f"{what} is empty; {rule}")
    if len(value) > max_length:
        raise UsageError(f"{what} {_shown(value)} is longer than {max_length} characters; {rule}")
    assert bad is not None
    raise UsageError(
        f"{what} {_shown(value)} has U+{ord(bad.group()):04X} at index {bad.start()}; {rule}"
    )


def check_ttl(ttl: object, what: str = "ttl") -> None:
    """Refuse a `ttl` that is not None or a number of seconds with 0 < ttl <= `MAX_TTL`.

    Raises:
        UsageError: It is zero, negative, NaN, infinite, above `MAX_TTL`, a bool or not a
            number.
    """
    if ttl is None or ((type(ttl) is int or type(ttl) is float) and 0 < ttl <= MAX_TTL):
        return
    rule = f"a number of seconds with 0 < {what} <= {MAX_TTL} (100 years), or None for no expiry"
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        raise UsageError(f"{what} must be {rule}; got {type(ttl).__name__} {_shown(ttl)}")
    if not 0 < ttl <= MAX_TTL:  # NaN fails every comparison
        raise UsageError(f"{what} must be {rule}; got {_shown(ttl)}")


def check_expected_version(expected_version: int | None) -> None:
    """Refuse an `expected_version` that is not None or a version >= 0.

    Raises:
        UsageError: It is negative or not an integer.
    """
    if expected_version is None:
        return
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        raise UsageError(f"expected_version must be an int or None, got {expected_version!r}")
    if expected_version < 0:
        raise UsageError(
            f"expected_version must be >= 0 (0: no session yet), got {expected_version}"
        )


def check_writes(writes: Sequence[tuple[str, object, object]]) -> None:
    """Refuse a batch of checkpoint writes with a bad id, an id twice, or more than
    `MAX_BATCH` writes."""
    ids = [checkpoint_id for checkpoint_id, _, _ in writes]
    count = len(ids)
    try:  # all of them at once (ASCII: printable; else one match, NUL between them: one in
        # an id makes one NUL too many); one by one only to name a bad one, as `check_id` does
        joined = "".join(ids)
        if joined.isascii() and count and min(map(len, ids)) > 0:
            good = joined.isprintable() and max(map(len, ids)) <= MAX_ID_LENGTH
        else:
            joined = "\x00".join(ids)
            good = joined.count("\x00") < count and _GOOD_BATCH(joined) is not None
    except TypeError:  # not all of them are str
        good = False
    if not good:
        ids = [check_id(checkpoint_id, "checkpoint_id") for checkpoint_id in ids]
    if count > MAX_BATCH or len(set(ids)) != count:
        raise UsageError(f"put_checkpoints writes at most {MAX_BATCH} distinct checkpoint ids")
