"""Values in and out of A2A parts, for both sides of `plait.protocols.a2a`."""

from __future__ import annotations

import importlib
import json
import math
from typing import Any

from a2a.helpers import new_data_part
from a2a.types import Part, TaskState
from pydantic_core import to_jsonable_python

__all__ = ["data_part", "jsonable", "part_of", "plain", "state_name", "struct_dict", "text_of"]


def jsonable(value: Any) -> Any:
    """Return `value` as plain JSON data (what cannot be encoded becomes its str)."""
    return to_jsonable_python(value, fallback=str)


def text_of(value: Any) -> str:
    """Return `value` as a text: itself when a str, else its JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(jsonable(value), ensure_ascii=False)


def data_part(value: Any) -> Part:
    """Return a data part holding `value` (made JSON-able first)."""
    return new_data_part(jsonable(value))


def part_of(value: Any) -> Part:
    """Return a text part for a str, else a data part."""
    return Part(text=value) if isinstance(value, str) else data_part(value)


def plain(value: Any) -> Any:
    """Return a data part's value with whole floats as ints, recursively (protobuf keeps
    every JSON number as a float)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def state_name(state: TaskState) -> str:
    """Return a task state as A2A writes it on the wire ("input-required", "completed")."""
    name: str = TaskState.Name(state)
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


def struct_dict(struct: Any) -> dict[str, Any]:
    """Return a protobuf `Struct` (a task's metadata) as a dict."""
    json_format: Any = importlib.import_module("google.protobuf.json_format")
    return dict(json_format.MessageToDict(struct))
