"""A session's stored document: its bytes, and a value that is not JSON named by its path."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from plait import HandoffLog, Message, ToolCall, Usage
from plait._util.json import dump_plain, to_json
from plait.errors import SerializationError
from plait.run.sessions import SessionTurn, decode_session
from plait.stores import MemoryStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)


class Cart(BaseModel):
    items: list[str]
    total: float


@dataclasses.dataclass
class Seat:
    row: int
    letter: str


def _expected(
    messages: list[tuple[str, Message]],
    values: dict[str, Any],
    types: dict[str, str],
    state: dict[str, Any],
    local: dict[str, Any],
    handoffs: list[HandoffLog],
    stamp: datetime,
) -> bytes:
    """Encode a session part by part, each with its own schema, then the whole as `Any`."""
    document = {
        "format": "plait.session",
        "version": 1,
        "messages": [[a, dump_plain(m, Message)] for a, m in messages],
        "values": values,
        "value_types": types,
        "state": state,
        "local": local,
        "handoffs": [dump_plain(h, HandoffLog) for h in handoffs],
        "updated_at": stamp.isoformat(),
    }
    return to_json(document, Any).encode()


async def test_a_session_is_stored_as_its_parts_encode_each() -> None:
    store = MemoryStore()
    asked = [Message.user('café \u2603 \x01 "quoted"\n'), Message.user("")]
    first = await SessionTurn.load(store, "s", asked)
    call = ToolCall(id="c1", name="add", arguments='{"a": 1}')
    said = [
        ("desk", Message.assistant("", [call], usage=Usage(input_tokens=3, output_tokens=4))),
        ("desk", Message.tool("2", "c1", name="add")),
        ("billing", Message.assistant("paid ✓")),
    ]
    first.turn.extend(said)
    handoff = HandoffLog(timestamp=T0, from_agent="desk", to_agent="billing", message="pay")
    values = {"cart": Cart(items=["pen"], total=2.5), "seat": Seat(row=3, letter="C"), "n": 1}
    state = {"team": {"step": 2, "tags": ("a", None, 1.5)}}
    local = {"desk": {"seen": [True, False]}}
    await first.save(store, values, [handoff], None, state, local, stamp=T0)
    stored = await store.get_session("s")
    types = {"cart": f"{__name__}:Cart", "seat": f"{__name__}:Seat"}
    whole = [*(("user", m) for m in asked), *said]
    assert stored == _expected(whole, values, types, state, local, [handoff], T0)

    later = T0 + timedelta(minutes=1)
    second = await SessionTurn.load(store, "s", [Message.user("again")])
    second.turn.append(("billing", Message.assistant("done")))
    await second.save(store, {"n": 2}, [], None, stamp=later)
    kept = decode_session("s", await store.get_session("s"))
    assert kept.values == {"cart": values["cart"], "seat": values["seat"], "n": 2}
    assert await store.get_session("s") == _expected(
        [*whole, ("user", Message.user("again")), ("billing", Message.assistant("done"))],
        kept.values,
        types,
        {"team": {"step": 2, "tags": ["a", None, 1.5]}},
        local,
        [handoff],
        later,
    )


async def test_a_new_session_reads_as_empty() -> None:
    empty = decode_session("s", None)
    assert (empty.messages, empty.values, empty.state, empty.local) == ([], {}, {}, {})
    assert (empty.handoffs, empty.updated_at) == ([], None)


class Opaque:
    pass


@pytest.mark.parametrize(
    ("values", "state", "path"),
    [
        ({"cart": [1, {"price": Opaque()}]}, None, "session_values['cart'][1]['price']"),
        ({"fine": 1}, {"thing": {"f": Opaque()}}, "session['state']['thing']['f']"),
    ],
)
async def test_a_value_that_is_not_json_is_named_and_nothing_is_written(
    values: dict[str, Any], state: dict[str, Any] | None, path: str
) -> None:
    store = MemoryStore()
    turn = await SessionTurn.load(store, "s", [Message.user("hi")])
    with pytest.raises(SerializationError) as raised:
        await turn.save(store, values, [], None, state, stamp=T0)
    assert raised.value.path == path
    assert f"cannot encode {path} (Opaque) as JSON" in str(raised.value)
    assert await store.get_session("s") is None
