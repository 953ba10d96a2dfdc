"""plait's JSON is the same bytes whichever encoder writes it: orjson where it can, pydantic
where it cannot (an int past 64 bits, a dict with int keys, a time with a zone…)."""

from __future__ import annotations

import dataclasses
import enum
import math
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, field_serializer

import plait._util.json
from plait import AgentEvent, Message, ToolCall, Usage
from plait.core.checkpoint import Checkpoint, Lease, ReactRecord, SwarmRecord
from plait.core.run_state import RunSnapshot
from plait.errors import ModelError, SerializationError
from plait.events import (
    AgentAction,
    AgentOutput,
    HandoffLog,
    InterruptCtx,
    InterruptInfo,
    MessageStream,
    MessageVariant,
)


class Colour(enum.Enum):
    RED = "red"


class Priced(BaseModel):
    """A user's model whose serializer changes what it writes."""

    cents: int

    @field_serializer("cents")
    def _euros(self, cents: int) -> str:
        return f"{cents / 100:.2f} EUR"


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


def _customs() -> list[Any]:
    """Values a user may put in an event's custom slot, an interrupt's info or state."""
    return [
        None,
        True,
        0,
        -(2**63),
        2**64 - 1,
        2**70,  # past orjson's 64 bits
        0.1,
        -0.0,
        1e16,
        5e-324,
        float("nan"),
        float("inf"),
        "é 😀 \u2028 \x00",
        [1, (2, 3)],
        {"a": {"b": [None]}},
        {1: "int key"},
        {"s": {3, 1}},
        frozenset(),
        b"bytes",
        Colour.RED,
        uuid.UUID(int=7),
        datetime(2026, 12, 6, 20, 3, 18, 123000, tzinfo=UTC),
        datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(2026, 1, 1, 5, 6, 7),
        date(2026, 1, 2),
        time(1, 2, 3),
        time(1, 2, 3, tzinfo=UTC),
        timedelta(seconds=90),
        Point(1, 2),
        Priced(cents=1250),
    ]


@pytest.mark.parametrize("value", _customs(), ids=repr)
def test_an_event_encodes_any_custom_value_as_pydantic_does(value: Any) -> None:
    event = AgentEvent(
        agent_name="a",
        run_path=("a",),
        output=AgentOutput(custom=value),
        action=AgentAction(custom=value),
    )
    expected = TypeAdapter(AgentEvent).dump_json(event)
    assert event.to_json().encode() == expected
    if not (isinstance(value, float) and math.isnan(value)):
        assert AgentEvent.from_json(event.to_json()) == AgentEvent.from_json(expected)


def test_every_kind_of_event_encodes_as_pydantic_does() -> None:
    stream = MessageStream(chunks=[Message.assistant("he"), Message.assistant("llo")])
    call = ToolCall(id="c1", name="add", arguments='{"a": 1}')
    events = [
        AgentEvent(
            agent_name="a",
            run_path=("root", "a"),
            depth=2,
            output=AgentOutput(
                message=MessageVariant(
                    is_streaming=False,
                    role="assistant",
                    message=Message.assistant("", [call], usage=Usage(input_tokens=3)),
                )
            ),
        ),
        AgentEvent(
            agent_name="a",
            run_path=("a",),
            output=AgentOutput(
                message=MessageVariant(is_streaming=True, role="assistant", stream=stream)
            ),
        ),
        AgentEvent(
            agent_name="a",
            run_path=("a",),
            error=ModelError("down", agent_name="a", status_code=503),
        ),
        AgentEvent(
            agent_name="a",
            run_path=("a",),
            action=AgentAction(
                interrupted=InterruptInfo(
                    contexts=(InterruptCtx(id="i", address="a", info={"ask": [1]}),),
                    checkpoint_id="cp",
                )
            ),
            handoff=HandoffLog(
                timestamp=datetime(2026, 12, 6, tzinfo=UTC), from_agent="a", to_agent="b"
            ),
        ),
    ]
    for event in events:
        assert event.to_json().encode() == TypeAdapter(AgentEvent).dump_json(event)


def test_a_checkpoint_is_the_bytes_its_schema_writes() -> None:
    """A record's float field given an int, a lease, a handoff and user data in an
    interrupt: the document is what pydantic writes for it."""
    react = ReactRecord.model_construct(
        messages=[Message.user("q"), Message.assistant("a", usage=Usage(output_tokens=2))],
        calls_made=1,
        phase="model",
        done=[],
    )
    swarm = SwarmRecord.model_construct(active="b", path=["a", "b"], handoffs=1, window=["b"])
    swarm.elapsed = 3  # an int where the schema says float: pydantic writes 3.0
    snapshot = RunSnapshot(
        records={("agent:A", "react"): react, ("team:T", "swarm"): swarm},
        root_input=(Message.user("q"),),
        history=[
            (
                "A",
                MessageVariant(
                    is_streaming=False, role="assistant", message=Message.assistant("a")
                ),
            )
        ],
    )
    interrupts = (InterruptCtx(id="i1", address="A", info={"when": date(2026, 1, 1)}),)
    lease = Lease.model_construct(owner="host:1", until=1_800_000_000)
    handoff = HandoffLog(timestamp=datetime(2026, 1, 1, tzinfo=UTC), from_agent="a", to_agent="b")
    data = Checkpoint.encode(
        snapshot,
        interrupts,
        agent_name="A",
        session_id="s",
        running=True,
        lease=lease,
        handoffs=[handoff],
    )
    assert b'"elapsed":3.0' in data
    assert b'"until":1800000000.0' in data
    assert b'"when":"2026-01-01"' in data
    decoded = Checkpoint.decode(data, "c")
    assert decoded._doc.model_dump_json().encode() == data


def test_what_neither_encoder_can_write_is_named() -> None:
    class Opaque:
        pass

    event = AgentEvent(agent_name="a", run_path=("a",), output=AgentOutput(custom=[Opaque()]))
    with pytest.raises(SerializationError) as info:
        event.to_json()
    assert info.value.path == "AgentEvent.output.custom[0]"
    with pytest.raises(SerializationError):
        Message.user("\ud800").to_json()


def test_the_tests_compare_each_encoding_with_pydantics(monkeypatch: pytest.MonkeyPatch) -> None:
    """A difference between the two encoders fails the test that meets it."""
    assert plait._util.json.CHECK_FAST
    monkeypatch.setitem(plait._util.json._PLAIN, set, lambda value: "blue")
    event = AgentEvent(agent_name="a", run_path=("a",), output=AgentOutput(custom={1}))
    with pytest.raises(AssertionError, match="blue"):
        event.to_json()
