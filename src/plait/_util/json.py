"""JSON round-trip for plait's data types, one pydantic schema per type (never pickle)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, Self

from plait.errors import SerializationError, UsageError

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

__all__ = [
    "JSONMixin",
    "check_plain_json",
    "first_problem",
    "from_json",
    "json_bytes",
    "json_mapping",
    "to_json",
]


@cache
def _adapter(tp: Any) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(tp)


def to_json(value: Any, tp: Any | None = None, *, root: str = "value") -> str:
    """Encode `value` (of type `tp`, default its own class) as JSON text.

    A value that cannot be encoded is a `SerializationError` whose `path` names it, such as
    `value.events[2].output.custom['price']`.
    """
    return json_bytes(value, tp, root=root).decode()


def json_bytes(value: Any, tp: Any | None = None, *, root: str = "value") -> bytes:
    """`to_json`, encoded as UTF-8."""
    from pydantic_core import PydanticSerializationError

    try:
        key: Any = tp if tp is not None else type(value)
        return _adapter(key).dump_json(value)
    except PydanticSerializationError as exc:
        path, bad = _find_unencodable(value, root)
        raise SerializationError(
            f"cannot encode {path} ({type(bad).__name__}) as JSON: {exc}", path=path
        ) from None


def _find_unencodable(value: Any, path: str) -> tuple[str, Any]:
    """Return the path and value of the deepest part of `value` that cannot be encoded."""
    import dataclasses

    from pydantic_core import to_json as encode

    children: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        children = [(f"{path}[{k!r}]", v) for k, v in value.items()]
    elif isinstance(value, list | tuple):
        children = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        children = [(f"{path}.{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value)]
    elif hasattr(type(value), "model_fields") and not isinstance(value, type):  # pydantic
        children = [(f"{path}.{name}", getattr(value, name)) for name in type(value).model_fields]
    for child_path, child in children:
        try:
            if dataclasses.is_dataclass(child) and not isinstance(child, type):
                to_json(child)
            else:
                encode(child)
        except Exception:
            return _find_unencodable(child, child_path)
    return path, value


def from_json(tp: Any, data: str | bytes) -> Any:
    """Decode JSON text produced by `to_json` back into a value of type `tp`."""
    return _adapter(tp).validate_json(data)


class JSONMixin:
    """Give a dataclass `to_json()` and `from_json()` through its pydantic schema."""

    __slots__ = ()

    def to_json(self) -> str:
        """Encode this value as JSON text (`SerializationError` names a value that can't be)."""
        return to_json(self, root=type(self).__name__)

    @classmethod
    def from_json(cls, data: str | bytes) -> Self:
        """Decode a value of this type from JSON text made by `to_json`."""
        value: Self = from_json(cls, data)
        return value


def dump_plain(value: Any, tp: Any) -> Any:
    """Return `value` (of type `tp`) as plain JSON-able data (dicts, lists, strings…)."""
    return _adapter(tp).dump_python(value, mode="json")


def load_plain(tp: Any, data: Any) -> Any:
    """Rebuild a value of type `tp` from data made by `dump_plain`."""
    return _adapter(tp).validate_python(data)


def check_plain_json(value: Any, path: str) -> str | None:
    """Return the path of the first part of `value` that is not plain JSON data (None, a
    bool, an int, a finite float, a str, a list or tuple of them, a dict with str keys),
    or None when all of it is."""
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else path
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = check_plain_json(item, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path} (key {key!r})"
            found = check_plain_json(item, f"{path}[{key!r}]")
            if found is not None:
                return found
        return None
    return path


def json_mapping(value: object, what: str, why: str = "") -> dict[str, Any]:
    """Return a dict copy of `value`, a mapping of str keys to plain JSON data (see
    `check_plain_json`); `what` names it in the error, `why` says why it must be JSON.

    Raises:
        UsageError: It is not a mapping, or some part of it is not plain JSON data.
    """
    if not isinstance(value, Mapping):
        raise UsageError(f"{what} must be a mapping, got {type(value).__name__}")
    data = dict(value)
    bad = check_plain_json(data, what)
    if bad is not None:
        raise UsageError(
            f"{what}{why} must be JSON data (str keys; None, bool, int, finite float, str, "
            f"list, dict): {bad} is not"
        )
    return data


def first_problem(exc: ValidationError, top: str = "(top)") -> tuple[str, str]:
    """Return where pydantic's first complaint in `exc` is (its dotted path, `top` for the
    whole value) and what it says."""
    first = exc.errors()[0]
    return ".".join(str(part) for part in first["loc"]) or top, first["msg"]
