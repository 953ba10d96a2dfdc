"""A thread's message ids: the name-based UUIDs (version 5) the SDK's clients can recompute."""

from __future__ import annotations

import uuid

from plait.protocols.agent_protocol.messages import message_id, new_id


def test_a_message_id_is_the_uuid5_of_its_thread_and_position() -> None:
    for thread_id in ("t", "f1b2c3d4-0000-4000-8000-000000000000", "thread/with spaces", "é"):
        for position in (0, 1, 7, 12_345):
            expected = uuid.uuid5(uuid.NAMESPACE_URL, f"plait:{thread_id}/{position}")
            found = message_id(thread_id, position)
            assert found == str(expected)
            assert uuid.UUID(found).version == 5


def test_a_new_id_is_a_random_uuid4_written_as_str_writes_one() -> None:
    found = {new_id() for _ in range(200)}
    assert len(found) == 200
    for text in found:
        assert str(uuid.UUID(text)) == text
        assert uuid.UUID(text).version == 4 and uuid.UUID(text).variant == uuid.RFC_4122
