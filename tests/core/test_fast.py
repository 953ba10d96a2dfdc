"""The cheap id and model constructors every run uses make what the slow ones make."""

from __future__ import annotations

import uuid

import pytest

from plait._util.fast import built, random_hex
from plait.core.checkpoint import DoneCall, Lease, ReactRecord
from plait.messages import Message


def test_random_hex_is_a_version_4_uuid_in_hex() -> None:
    for _ in range(200):
        text = random_hex()
        parsed = uuid.UUID(hex=text)
        assert parsed.hex == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_random_hex_differs_each_time() -> None:
    assert len({random_hex() for _ in range(1000)}) == 1000


@pytest.mark.parametrize(
    ("cls", "values"),
    [
        (Lease, {"owner": "host:1:abc", "until": 12.5}),
        (DoneCall, {"index": 1, "content": "3", "action": None}),
        (
            ReactRecord,
            {
                "kind": "react",
                "messages": [Message.user("hi"), Message.assistant("hello")],
                "calls_made": 2,
                "phase": "tools",
                "done": [],
            },
        ),
    ],
)
def test_built_models_equal_and_encode_as_constructed_ones(cls: type, values: dict) -> None:
    fast = built(cls, dict(values))
    slow = cls.model_construct(**values)
    assert fast == slow
    assert fast.model_dump_json() == slow.model_dump_json()
    assert fast.model_dump() == cls.model_validate(values).model_dump()
