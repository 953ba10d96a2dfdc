"""The JSON schemas of a served agent's input and state (the Agent Protocol's `get_schemas`,
read by the dev page to build its input form).

A run takes messages and session values, so the input schema is an object with `messages`
(message objects) and a property per session value the agent reads:
- each `{key}` (required) or `{key?}` placeholder of the instruction of any agent in it;
- each key of the state schema of any graph in it (the graph's initial state takes them from
  the session values), typed as its annotation says, with `x-plait-reducer` naming how a
  node's update is applied (`append`, `merge`, `custom`; none: replaced);
- `user_id` when an agent in it recalls memories (`plait.memory.RecallTool`).
Other session values are allowed too (`additionalProperties`). The state schema is the same
object: a run's state is its messages and session values.
"""

from __future__ import annotations

import typing
from typing import Any

from plait.agents.instruction import placeholders
from plait.memory.recall import USER_ID, RecallTool
from plait.server.topology import agents_in

__all__ = ["MESSAGE_SCHEMA", "agent_schemas"]

#: One message, as the Agent Protocol (and `/v1`) takes it.
MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"enum": ["human", "ai", "tool", "system"]},
        "role": {"enum": ["user", "assistant", "tool", "system"]},
        "content": {"type": "string"},
        "id": {"type": "string"},
        "tool_calls": {"type": "array", "items": {"type": "object"}},
        "tool_call_id": {"type": "string"},
        "name": {"type": "string"},
    },
}
_MESSAGES = {"type": "array", "items": MESSAGE_SCHEMA}


def _reducer(hint: Any) -> str | None:
    """Return how a graph applies updates of a key annotated `hint` (None: replaced)."""
    from plait.graph.state_graph import append, merge

    for meta in getattr(hint, "__metadata__", ()):
        if callable(meta):
            return "append" if meta is append else "merge" if meta is merge else "custom"
    return None


def _typed(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """Return the JSON schema of values of type `hint` (its `$defs` added to `defs`)."""
    from pydantic import TypeAdapter

    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    try:
        schema = TypeAdapter(hint).json_schema()
    except Exception:  # a type pydantic cannot describe: any value
        return {}
    defs.update(schema.pop("$defs", {}))
    return schema


def _graph_keys(graph: Any, properties: dict[str, Any], defs: dict[str, Any]) -> None:
    for key, hint in graph.hints.items():
        reducer = _reducer(hint)
        if key == "messages":  # the run's messages: their own schema, the graph's reducer
            if reducer:
                properties[key] = {**properties[key], "x-plait-reducer": reducer}
            continue
        if key not in properties:
            schema = _typed(hint, defs)
            properties[key] = {**schema, "x-plait-reducer": reducer} if reducer else schema


def _input(agent: Any) -> dict[str, Any]:
    properties: dict[str, Any] = {"messages": _MESSAGES}
    required: dict[str, bool] = {}
    defs: dict[str, Any] = {}
    for found in agents_in(agent):
        for key, needed in placeholders(str(getattr(found, "instruction", "") or "")).items():
            properties.setdefault(key, {"type": "string"})
            required[key] = required.get(key, False) or needed
        graph = getattr(found, "graph", None)
        if graph is not None and hasattr(graph, "hints"):
            _graph_keys(graph, properties, defs)
        if any(isinstance(tool, RecallTool) for tool in getattr(found, "_user_tools", ())):
            properties.setdefault(USER_ID, {"type": "string"})
    schema: dict[str, Any] = {
        "title": str(getattr(agent, "name", "input")),
        "type": "object",
        "properties": properties,
        "required": sorted(key for key, needed in required.items() if needed),
        "additionalProperties": True,
    }
    if defs:
        schema["$defs"] = defs
    return schema


def agent_schemas(agent: Any) -> dict[str, dict[str, Any]]:
    """Return `{"input_schema", "output_schema", "state_schema"}` of a served agent."""
    found = _input(agent)
    output = {"type": "object", "properties": {"messages": _MESSAGES}, "additionalProperties": True}
    return {"input_schema": found, "output_schema": output, "state_schema": found}
