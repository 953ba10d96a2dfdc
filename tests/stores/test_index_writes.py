"""An index written whole at every change (`plait.stores.session_index`) keeps each entry's
JSON in blocks (`plait._util.joined`): what it writes is what `json.dumps` of its entries
writes, in write order, however many entries change, move or go."""

from __future__ import annotations

import json
import random

from plait._util.joined import BLOCK, JoinedParts
from plait.stores import MemoryStore
from plait.stores.base import GuardedStore
from plait.stores.session_index import SessionIndex, decode_agents, decode_index


def test_joined_parts_join_as_a_dict_of_the_same_changes_would() -> None:
    rng = random.Random(7)
    for _ in range(50):
        parts, model = JoinedParts(), {}
        for _ in range(rng.randint(0, 8 * BLOCK)):
            key, text = str(rng.randint(0, 3 * BLOCK)), str(rng.random())
            roll = rng.random()
            if roll < 0.2:
                assert parts.pop(key) == (key in model)
                model.pop(key, None)
            elif roll < 0.6:  # written again: moves last
                parts.set(key, text, last=True)
                model.pop(key, None)
                model[key] = text
            else:  # changed in place
                parts.set(key, text)
                model[key] = text
            if rng.random() < 0.2:
                assert parts.joined() == ", ".join(model.values()).encode()
        assert parts.joined() == ", ".join(model.values()).encode()
        assert list(parts) == list(model) and len(parts) == len(model)


async def test_a_long_session_index_is_written_as_json_dumps_writes_it() -> None:
    store = GuardedStore(MemoryStore())
    index, rng = SessionIndex(), random.Random(3)
    sessions: dict[str, str] = {}
    agents: dict[str, str] = {}
    for step in range(6 * BLOCK):
        session_id = f"s{rng.randint(0, 4 * BLOCK)}"
        if rng.random() < 0.15:
            await index.update(store, "u/index", session_id, None)
            sessions.pop(session_id, None)
            agents.pop(session_id, None)
            continue
        stamp, agent = f"2026-01-01T00:00:{step:05d}", f"agent-{rng.randint(0, 3)}"
        await index.update(store, "u/index", session_id, (stamp, agent))
        sessions.pop(session_id, None)
        sessions[session_id] = stamp
        agents[session_id] = agent
    found = await store.get_session_record("u/index")
    assert found is not None
    assert decode_index(found) == sessions and list(decode_index(found)) == list(sessions)
    assert decode_agents(found) == agents
    assert found.data == json.dumps({"sessions": sessions, "agents": agents}).encode()
