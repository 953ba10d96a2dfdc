"""The payload converter of plait's workflows: plait's data types (a `RunResult` holding
`PlaitError`s, events, messages) cross as plait's own JSON.

They are written as `json/plain` payloads (so any Temporal client can read them as plain
JSON) marked with their plait type, and read back as that type; everything else is
Temporal's default conversion.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import temporalio.api.common.v1
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)

from plait._util.json import JSONMixin, from_json

__all__ = ["PlaitPayloadConverter", "data_converter"]

_MARK = "plait-type"


def _types() -> dict[str, type[JSONMixin]]:
    from plait.events import AgentEvent, RunResult
    from plait.messages import Message

    return {tp.__name__: tp for tp in (RunResult, AgentEvent, Message)}


class _PlaitJSON(JSONPlainPayloadConverter):
    """`json/plain` payloads, plait's types encoded and decoded by plait's JSON."""

    def to_payload(self, value: Any) -> temporalio.api.common.v1.Payload | None:
        if isinstance(value, JSONMixin) and type(value).__name__ in _types():
            return temporalio.api.common.v1.Payload(
                metadata={"encoding": b"json/plain", _MARK: type(value).__name__.encode()},
                data=value.to_json().encode(),
            )
        return super().to_payload(value)

    def from_payload(
        self, payload: temporalio.api.common.v1.Payload, type_hint: type | None = None
    ) -> Any:
        mark = payload.metadata.get(_MARK)
        tp = _types().get(mark.decode()) if mark else None
        if tp is not None:
            return from_json(tp, payload.data)
        return super().from_payload(payload, type_hint)


class PlaitPayloadConverter(CompositePayloadConverter):
    """Temporal's default payload conversion, with plait's types as plait's JSON."""

    def __init__(self) -> None:
        converters = [
            _PlaitJSON() if isinstance(c, JSONPlainPayloadConverter) else c
            for c in DefaultPayloadConverter.default_encoding_payload_converters
        ]
        super().__init__(*converters)


def data_converter(base: DataConverter | None = None) -> DataConverter:
    """Return `base` (default: Temporal's) with plait's payload converter."""
    return dataclasses.replace(
        base or DataConverter.default, payload_converter_class=PlaitPayloadConverter
    )
