"""Session values that keep their type through JSON: a pydantic model or a dataclass kept
in `session_values` (a structured-output agent's `output_key`) is saved as JSON with its
class (`module:qualname`), and read back as that class.

The class is looked up among the modules already imported (plait never imports a module
named by a checkpoint or a session); a class that is not loaded, or a value that no longer
validates, is read back as the plain JSON it was saved as.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["restore_types", "value_types"]


def value_types(values: Mapping[str, Any]) -> dict[str, str]:
    """Return `module:qualname` for each value that is a pydantic model or a dataclass."""
    from pydantic import BaseModel

    types: dict[str, str] = {}
    for key, value in values.items():
        if isinstance(value, BaseModel) or (
            dataclasses.is_dataclass(value) and not isinstance(value, type)
        ):
            cls = type(value)
            types[key] = f"{cls.__module__}:{cls.__qualname__}"
    return types


def restore_types(values: dict[str, Any], types: Mapping[str, Any]) -> dict[str, Any]:
    """Turn the values `types` names back into their classes, in place; return `values`."""
    if not types:
        return values
    from pydantic import TypeAdapter, ValidationError

    for key, where in types.items():
        if key not in values or not isinstance(where, str):
            continue
        cls = _loaded_class(where)
        if cls is None:
            continue
        try:
            values[key] = TypeAdapter(cls).validate_python(values[key])
        except ValidationError:
            continue
    return values


def _loaded_class(where: str) -> type[Any] | None:
    from pydantic import BaseModel

    module_name, _, qualname = where.partition(":")
    found: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if isinstance(found, type) and (
        issubclass(found, BaseModel) or dataclasses.is_dataclass(found)
    ):
        return found
    return None
