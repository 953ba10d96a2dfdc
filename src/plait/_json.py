"""JSON round-trip for plait's data types, one pydantic schema per type (never pickle)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = ["JSONMixin", "from_json", "to_json"]


@cache
def _adapter(tp: Any) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(tp)


def to_json(value: Any, tp: Any | None = None) -> str:
    """Encode `value` (of type `tp`, default its own class) as JSON text."""
    return _adapter(tp if tp is not None else type(value)).dump_json(value).decode()


def from_json(tp: Any, data: str | bytes) -> Any:
    """Decode JSON text produced by `to_json` back into a value of type `tp`."""
    return _adapter(tp).validate_json(data)


class JSONMixin:
    """Give a dataclass `to_json()` and `from_json()` through its pydantic schema."""

    __slots__ = ()

    def to_json(self) -> str:
        """Encode this value as JSON text."""
        return to_json(self)

    @classmethod
    def from_json(cls, data: str | bytes) -> Self:
        """Decode a value of this type from JSON text made by `to_json`."""
        value: Self = from_json(cls, data)
        return value
