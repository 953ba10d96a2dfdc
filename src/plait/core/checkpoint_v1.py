"""Version 1 checkpoints, read by migrating them to version 2 (component states became
typed records)."""

from __future__ import annotations

from typing import Any

from plait.errors import CheckpointCorrupt

__all__ = ["migrate_v1"]


def migrate_v1(data: dict[str, Any], checkpoint_id: str) -> dict[str, Any]:
    """Turn a version 1 checkpoint into version 2 (component states became typed records)."""
    try:
        states = data.pop("states")
        records = [_v1_record(key, state) for key, state in states.items()]
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise CheckpointCorrupt(
            f"checkpoint '{checkpoint_id}' (version 1) is damaged: {type(exc).__name__}: {exc}"
        ) from None
    return {**data, "version": 2, "records": records}


def _v1_record(key: str, state: dict[str, Any]) -> dict[str, Any]:
    address, _, part = key.partition("#")
    record: dict[str, Any]
    if part == "flow":
        record = {"kind": "flow", "chain": state["chain"]}
    elif part == "swarm":
        record = {"kind": "swarm", **state}
    elif "calls_made" in state:
        calls = {c["id"]: i for i, c in enumerate(state["messages"][-1].get("tool_calls", []))}
        done = [
            {"index": calls[cid], "content": d["content"], "action": d.get("action")}
            for cid, d in state["done"].items()
        ]
        record = {"kind": "react", **state, "done": done}
        record.setdefault("phase", "tools")
    elif "index" in state:
        record = {"kind": "sequence", **state}
    elif "lanes" in state:
        record = {"kind": "parallel", "pending": state["paused"], "lanes": state["lanes"]}
    elif "input" in state:
        record = {"kind": "nested", **state}
    else:
        record = {"kind": "graph", **state}
    return {"address": address, "record": record}
