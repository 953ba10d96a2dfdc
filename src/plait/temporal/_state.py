"""A graph state as JSON for a sync node run as an activity: plait's messages and other
data types keep their type across (tagged with it); anything else must be plain JSON."""

from __future__ import annotations

from typing import Any

from plait._util.json import JSONMixin, check_plain_json, dump_plain, load_plain
from plait.errors import SerializationError

__all__ = ["decode", "encode"]

_TAG = "__plait_type__"


def _types() -> dict[str, type[JSONMixin]]:
    from plait.events import AgentEvent
    from plait.messages import Message, ToolCall, Usage

    return {tp.__name__: tp for tp in (Message, ToolCall, Usage, AgentEvent)}


def encode(value: Any, path: str = "state") -> Any:
    """Return `value` as JSON-able data, plait's types tagged."""
    if isinstance(value, JSONMixin) and type(value).__name__ in _types():
        return {_TAG: type(value).__name__, "value": dump_plain(value, type(value))}
    if isinstance(value, dict):
        return {k: encode(v, f"{path}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v, f"{path}[{i}]") for i, v in enumerate(value)]
    bad = check_plain_json(value, path)
    if bad is not None:
        raise SerializationError(
            f"a sync graph node runs as a Temporal activity, and its state must be JSON: "
            f"{bad} is a {type(value).__name__}",
            path=bad,
        )
    return value


def decode(data: Any) -> Any:
    """Rebuild a value made by `encode`."""
    if isinstance(data, dict):
        tag = data.get(_TAG)
        if isinstance(tag, str) and tag in _types():
            return load_plain(_types()[tag], data["value"])
        return {k: decode(v) for k, v in data.items()}
    if isinstance(data, list):
        return [decode(v) for v in data]
    return data
