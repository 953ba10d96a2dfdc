"""JSON round-trip for plait's data types, one pydantic schema per type (never pickle).

Encoding goes through orjson first: it writes plait's dataclasses, plain data and dates
itself, and asks pydantic (`_plain`) only for what it does not know (a plait error, a
pydantic model, a set…). The bytes are pydantic's: whatever orjson refuses (an int past 64
bits, a dict with int keys, a time with a zone…) is encoded by pydantic instead, which also
names what cannot be encoded at all. `CHECK_FAST` (on in plait's tests) compares each
encoding with pydantic's own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Self

import orjson

from plait.errors import SerializationError, UsageError

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

__all__ = [
    "JSONMixin",
    "check_plain_json",
    "first_problem",
    "from_json",
    "encoded",
    "fast_json",
    "json_bytes",
    "json_mapping",
    "plain_json",
    "to_json",
]


@cache
def _adapter(tp: Any) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(tp)


#: Compare every encoding orjson makes with pydantic's, and fail on a difference (plait's
#: tests turn it on; production trusts the comparison they made).
CHECK_FAST = False
_OPTIONS = orjson.OPT_UTC_Z  # a UTC time ends in "Z", as pydantic writes it


def fast_json(value: Any) -> bytes | None:
    """Return `value` as JSON bytes, the same as pydantic's for its own class, or None where
    orjson cannot write it (the caller then asks pydantic)."""
    try:
        return orjson.dumps(value, default=_plain, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError, raised for anything it or `_plain` refused
        return None


def encoded(value: Any, pydantic_json: Callable[[], bytes]) -> bytes:
    """Return `value` as JSON bytes: orjson's, or `pydantic_json()` where orjson cannot
    write it (with `CHECK_FAST`, both, which must agree)."""
    data = fast_json(value)
    if data is not None and not CHECK_FAST:
        return data
    expected = pydantic_json()
    if data is not None and data != expected:
        raise AssertionError(f"orjson wrote {data!r}, pydantic {expected!r}")
    return expected


def plain_json(value: Any) -> bytes:
    """Return plain data (dicts, lists, strings, numbers…) as JSON bytes, the same as
    `pydantic_core.to_json` writes them.

    Raises:
        pydantic_core.PydanticSerializationError: Some part of it is not JSON.
    """
    data = fast_json(value)
    if data is not None and not CHECK_FAST:
        return data
    from pydantic_core import to_json as encode

    return encoded(value, partial(encode, value))


def _plain(value: Any) -> Any:
    """Return what orjson should write for `value`, a value of a class it does not know."""
    cls = type(value)
    plain = _PLAIN.get(cls)
    if plain is None:
        plain = _PLAIN[cls] = _plain_of(cls)
    return plain(value)


_PLAIN: dict[type, Callable[[Any], Any]] = {}


def _plain_of(cls: type) -> Callable[[Any], Any]:
    """Return how a value of `cls` becomes data orjson writes as pydantic would write it."""
    from pydantic import BaseModel
    from pydantic_core import to_jsonable_python

    if issubclass(cls, BaseModel) and _fields_only(cls):
        floats = [
            name
            for name, field in cls.model_fields.items()
            if field.annotation is float or field.annotation == float | None
        ]
        if not floats:
            return _fields
        return partial(_fields_with_floats, floats)
    try:
        dump = _adapter(cls).dump_python
    except Exception:  # no schema for it: pydantic's guess, which may refuse it
        return to_jsonable_python
    return partial(dump, mode="json")


def _fields_only(cls: type[Any]) -> bool:
    """Whether pydantic writes a model of `cls` as its fields, in order, with nothing added,
    left out or converted (a model of plait's own: users' models go through pydantic)."""
    config = cls.model_config
    decorators = cls.__pydantic_decorators__
    return (
        cls.__module__.startswith("plait.")
        and config.get("extra") != "allow"
        and not any(key.startswith("ser_json") for key in config)
        and not cls.model_computed_fields
        and not decorators.field_serializers
        and not decorators.model_serializers
        and not any(field.exclude or field.metadata for field in cls.model_fields.values())
    )


def _fields(value: Any) -> dict[str, Any]:
    fields: dict[str, Any] = value.__dict__
    return fields


def _fields_with_floats(floats: list[str], value: Any) -> dict[str, Any]:
    """A model's fields, an int given to a float field written as a float (as pydantic does)."""
    fields: dict[str, Any] = value.__dict__
    if any(type(fields[name]) is int for name in floats):
        fields = dict(fields)
        for name in floats:
            if type(fields[name]) is int:
                fields[name] = float(fields[name])
    return fields


def to_json(value: Any, tp: Any | None = None, *, root: str = "value") -> str:
    """Encode `value` (of type `tp`, default its own class) as JSON text.

    A value that cannot be encoded is a `SerializationError` whose `path` names it, such as
    `value.events[2].output.custom['price']`.
    """
    return json_bytes(value, tp, root=root).decode()


def json_bytes(value: Any, tp: Any | None = None, *, root: str = "value") -> bytes:
    """`to_json`, encoded as UTF-8."""
    data = fast_json(value)
    if data is not None and not CHECK_FAST:
        return data
    return encoded(value, partial(_pydantic_json, value, tp, root))


def _pydantic_json(value: Any, tp: Any | None, root: str) -> bytes:
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
    data = fast_json(value)
    if data is not None and not CHECK_FAST:
        return orjson.loads(data)
    expected = _adapter(tp).dump_python(value, mode="json")
    if data is not None and orjson.loads(data) != expected:
        raise AssertionError(f"orjson wrote {data!r}, pydantic {expected!r}")
    return expected


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
