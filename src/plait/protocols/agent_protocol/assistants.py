"""Assistants (`/assistants…`): each served agent, and the versioned configurations of
agents a user creates.

Every served agent is an assistant of every user: its `graph_id` is the agent's public name
and its `assistant_id` the UUID5 of that name in the URL namespace (as LangGraph Server
names its graphs' assistants), so a client can name it by either. A user's `create` stores
a configuration of an agent under a new UUID4: `config.configurable` (and `context`) keys
are `RunOption` fields by name (`model` as a spec string, `instruction`,
`max_iterations`, `model_options`), given to each run of that assistant. `update` adds a
version (fields not given stay; `metadata` is merged), `set_latest` picks the version runs
use. A served agent's assistant can be updated like any other, not deleted (`409`).
`get_schemas` gives an agent's input, output and state as `{"messages": [...]}` plus
any session value, and a graph's (`plait.graph`) as its state's keys.
Assistants live in the user's `assistants` document (`plait.protocols.agent_protocol.
documents`).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any, Literal

from fastapi import APIRouter, Response

from plait.agents.options import RunOption
from plait.errors import UsageError
from plait.protocols.agent_protocol.documents import Document, now, read_document
from plait.protocols.agent_protocol.not_served import NOT_YET
from plait.protocols.agent_protocol.shapes import Body, Page, SortedPage, errors, router_of
from plait.server.caller import Caller
from plait.server.limits import ApiError
from plait.server.schemas import agent_schemas
from plait.server.topology import describe

__all__ = [
    "CONFIG_KEYS",
    "Assistant",
    "assistants_router",
    "check_fields",
    "find_assistant",
    "served_id",
]

#: The `configurable` keys an assistant takes: `RunOption` fields by name.
CONFIG_KEYS = ("model", "instruction", "max_iterations", "model_options")
_SERVED_AT = "1970-01-01T00:00:00+00:00"  # a served agent's assistant exists from the start
_DOC = "assistants"


@functools.lru_cache(maxsize=1024)
def served_id(name: str) -> str:
    """Return the assistant id of the served agent `name`: its UUID5 in the URL namespace."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


class AssistantCreate(Body):
    """What `assistants.create` sends."""

    graph_id: str
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    assistant_id: str | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    name: str | None = None
    description: str | None = None


class AssistantPatch(Body):
    """What `assistants.update` sends."""

    graph_id: str | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    name: str | None = None
    description: str | None = None


class AssistantSearch(SortedPage):
    """What `assistants.search` and `count` send."""

    graph_id: str | None = None
    name: str | None = None


class VersionSearch(Page):
    """What `assistants.get_versions` sends."""


class LatestVersion(Body):
    """What `assistants.set_latest` sends."""

    version: int


class Assistant:
    """An assistant as stored: its graph, times, the version runs use and every version."""

    def __init__(self, assistant_id: str, data: dict[str, Any]) -> None:
        self.assistant_id = assistant_id
        self.data = data

    @property
    def graph_id(self) -> str:
        """Return the public name of the agent it configures."""
        return str(self.data["graph_id"])

    def version(self, number: int | None = None) -> dict[str, Any]:
        """Return version `number` (None: the one runs use)."""
        wanted = self.data["version"] if number is None else number
        for found in self.data["versions"]:
            if found["version"] == wanted:
                return dict(found)
        raise ApiError(404, f"assistant '{self.assistant_id}' has no version {wanted}")

    def to_json(self, number: int | None = None) -> dict[str, Any]:
        """Return the assistant as the SDK reads it (at version `number`)."""
        version = self.version(number)
        version.pop("updated_at", None)
        return {
            "assistant_id": self.assistant_id,
            "graph_id": self.graph_id,
            **version,
            "created_at": self.data["created_at"],
            "updated_at": self.data["updated_at"],
        }

    def options(self) -> list[RunOption]:
        """Return the run options of the version runs use."""
        version = self.version()
        fields = {**version["config"].get("configurable", {}), **version["context"]}
        return [RunOption(**fields)] if fields else []


def _served(who: Caller) -> dict[str, dict[str, Any]]:
    """Return the assistants of the served agents, as stored before any change."""
    return {served_id(name): _served_one(who, name) for name in who.server.agents}


def _served_one(who: Caller, name: str) -> dict[str, Any]:
    """Return the assistant of the served agent `name`, as stored before any change."""
    version = {
        "version": 1,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "name": name,
        "description": who.server.agents[name].description,
        "created_at": _SERVED_AT,
    }
    return {
        "graph_id": name,
        "created_at": _SERVED_AT,
        "updated_at": _SERVED_AT,
        "version": 1,
        "versions": [version],
    }


def _all(who: Caller, stored: dict[str, Any]) -> dict[str, Assistant]:
    every = {**_served(who), **stored}
    return {key: Assistant(key, data) for key, data in every.items()}


def _one(who: Caller, stored: dict[str, Any], key: str) -> Assistant:
    """Return the caller's assistant `key` (served or stored).

    Raises:
        ApiError: 404, there is none.
    """
    found = _all(who, stored).get(key)
    if found is None:
        raise ApiError(404, f"no assistant '{key[:128]}'")
    return found


def _version(
    number: int,
    config: dict[str, Any],
    context: dict[str, Any],
    metadata: dict[str, Any],
    name: str,
    description: str | None,
) -> dict[str, Any]:
    configurable = config.get("configurable")
    for fields in (configurable or {}, context):
        check_fields(fields)
    return {
        "version": number,
        "config": config,
        "context": context,
        "metadata": metadata,
        "name": name,
        "description": description,
        "created_at": now(),
    }


def check_fields(fields: object) -> None:
    """Refuse `configurable` or `context` keys that are not `RunOption` fields (`422`)."""
    if not isinstance(fields, dict):
        raise ApiError(422, "config.configurable and context must be objects")
    unknown = sorted(set(fields) - set(CONFIG_KEYS))
    if unknown:
        raise ApiError(422, f"unknown configurable key(s) {unknown}; known: {list(CONFIG_KEYS)}")
    try:
        RunOption(**fields)
    except UsageError as exc:
        raise ApiError(422, exc.message) from None


async def find_assistant(who: Caller, key: str) -> Assistant:
    """Return the caller's assistant `key` (an assistant id, or a served agent's name).

    Raises:
        ApiError: `404`, no such assistant of this user.
    """
    stored = await read_document(who, _DOC)
    served = {served_id(name): name for name in who.server.agents}
    if key not in stored and key not in served and key in who.server.agents:
        key = served_id(key)
    if key in stored:
        return Assistant(key, stored[key])
    if key in served:
        return Assistant(key, _served_one(who, served[key]))
    raise ApiError(404, f"no assistant '{key[:128]}'")


def _matches(assistant: Assistant, body: AssistantSearch) -> bool:
    version = assistant.version()
    metadata = body.metadata or {}
    return (
        (body.graph_id is None or assistant.graph_id == body.graph_id)
        and (body.name is None or body.name.lower() in str(version["name"]).lower())
        and all(version["metadata"].get(k) == v for k, v in metadata.items())
    )


async def _search(who: Caller, body: AssistantSearch) -> list[Assistant]:
    found = [a for a in _all(who, await Document(who, _DOC).read()).values() if _matches(a, body)]
    key = body.sort_by if body.sort_by in ("assistant_id", "graph_id", "name") else "created_at"
    found.sort(key=lambda a: str(a.to_json()[key]), reverse=body.sort_order != "asc")
    return found


def _create(who: Caller, body: AssistantCreate) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Return the change that stores the assistant `body` describes."""
    if body.graph_id not in who.server.agents:
        raise ApiError(404, f"no graph '{body.graph_id[:128]}'; GET /v1/agents lists them")
    assistant_id = body.assistant_id or str(uuid.uuid4())
    version = _version(
        1,
        body.config or {},
        body.context or {},
        body.metadata or {},
        body.name or body.graph_id,
        body.description,
    )

    def edit(stored: dict[str, Any]) -> dict[str, Any]:
        every = _all(who, stored)
        if assistant_id in every:
            if body.if_exists == "do_nothing":
                return every[assistant_id].to_json()
            raise ApiError(409, f"assistant '{assistant_id}' exists")
        stamp = version["created_at"]
        data = {"graph_id": body.graph_id, "created_at": stamp, "updated_at": stamp}
        stored[assistant_id] = {**data, "version": 1, "versions": [version]}
        return Assistant(assistant_id, stored[assistant_id]).to_json()

    return edit


def _update(who: Caller, key: str, body: AssistantPatch) -> Callable[[dict[str, Any]], Any]:
    """Return the change that adds a version to assistant `key`."""

    def edit(stored: dict[str, Any]) -> dict[str, Any]:
        data = _one(who, stored, key).data
        graph = body.graph_id or data["graph_id"]
        if graph not in who.server.agents:
            raise ApiError(404, f"no graph '{graph[:128]}'")
        last = max(v["version"] for v in data["versions"])
        was = Assistant(key, data).version(last)
        version = _version(
            last + 1,
            was["config"] if body.config is None else body.config,
            was["context"] if body.context is None else body.context,
            {**was["metadata"], **(body.metadata or {})},
            was["name"] if body.name is None else body.name,
            was["description"] if body.description is None else body.description,
        )
        stored[key] = {
            **data,
            "graph_id": graph,
            "updated_at": version["created_at"],
            "version": last + 1,
            "versions": [*data["versions"], version],
        }
        return Assistant(key, stored[key]).to_json()

    return edit


def _set_latest(who: Caller, key: str, number: int) -> Callable[[dict[str, Any]], Any]:
    def edit(stored: dict[str, Any]) -> dict[str, Any]:
        assistant = _one(who, stored, key)
        assistant.version(number)  # 404 when there is no such version
        stored[key] = {**assistant.data, "version": number, "updated_at": now()}
        return Assistant(key, stored[key]).to_json()

    return edit


def _delete(who: Caller, key: str) -> Callable[[dict[str, Any]], None]:
    def edit(stored: dict[str, Any]) -> None:
        if key in _served(who):
            raise ApiError(409, f"assistant '{key}' is a served agent's; it cannot be deleted")
        if key not in stored:
            raise ApiError(404, f"no assistant '{key[:128]}'")
        del stored[key]

    return edit


def _graph(who: Caller, assistant: Assistant) -> dict[str, Any]:
    """Return the assistant's agent as LangGraph draws a graph: nodes and edges."""
    agent = who.server.agents.get(assistant.graph_id)
    if agent is None:
        raise ApiError(404, f"no graph '{assistant.graph_id[:128]}'")
    topology = describe(agent)
    nodes = [
        {"id": node.id, "type": "runnable", "data": node.model_dump(exclude={"id"})}
        for node in topology.nodes
    ]
    edges = [
        {"source": e.source, "target": e.target, "conditional": e.label == "?", "data": e.kind}
        for e in topology.edges
    ]
    return {"nodes": nodes, "edges": edges}


_OPTIONS = {
    "type": "object",
    "properties": {
        "model": {"type": "string"},
        "instruction": {"type": "string"},
        "max_iterations": {"type": "integer", "minimum": 1},
        "model_options": {"type": "object"},
    },
    "additionalProperties": False,
}


def assistants_router(caller: Callable[..., Any]) -> APIRouter:
    """Return the `/assistants…` routes; `caller` is the app's dependency that checks the
    API key."""
    return router_of("assistants", caller, _writing_routes, _reading_routes, _describing_routes)


def _writing_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes that create, change and delete assistants."""

    @router.post("/assistants", summary="Create an assistant", responses=errors(401, 404, 409, 422))
    async def create(body: AssistantCreate, who: Caller = who_dep) -> dict[str, Any]:
        """Store a configuration of a served agent (`graph_id`) as a new assistant."""
        return await Document(who, _DOC).change(_create(who, body))

    @router.patch(
        "/assistants/{assistant_id}",
        summary="Update an assistant",
        responses=errors(401, 404, 409, 422),
    )
    async def update(
        assistant_id: str, body: AssistantPatch, who: Caller = who_dep
    ) -> dict[str, Any]:
        """Add a version to the assistant (it becomes the one runs use)."""
        key = (await find_assistant(who, assistant_id)).assistant_id
        return await Document(who, _DOC).change(_update(who, key, body))

    @router.delete(
        "/assistants/{assistant_id}",
        status_code=204,
        summary="Delete an assistant",
        responses=errors(401, 404, 409, 501),
    )
    async def delete(
        assistant_id: str, who: Caller = who_dep, delete_threads: bool = False
    ) -> Response:
        """Delete an assistant the caller created (a served agent's answers `409`)."""
        if delete_threads:
            raise ApiError(501, f"assistants.delete with delete_threads {NOT_YET}")
        key = (await find_assistant(who, assistant_id)).assistant_id
        await Document(who, _DOC).change(_delete(who, key))
        return Response(status_code=204)

    @router.post(
        "/assistants/{assistant_id}/latest",
        summary="Pick the version runs use",
        responses=errors(401, 404),
    )
    async def set_latest(
        assistant_id: str, body: LatestVersion, who: Caller = who_dep
    ) -> dict[str, Any]:
        """Make version `version` the one runs use."""
        key = (await find_assistant(who, assistant_id)).assistant_id
        return await Document(who, _DOC).change(_set_latest(who, key, body.version))


def _reading_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes that search and read assistants."""

    @router.post("/assistants/search", summary="Search assistants", responses=errors(401, 422))
    async def search(
        body: AssistantSearch, response: Response, who: Caller = who_dep
    ) -> list[dict[str, Any]]:
        """Return the caller's assistants that match, newest first (one page)."""
        found = await _search(who, body)
        page = found[body.offset : body.offset + body.limit]
        if body.offset + body.limit < len(found):
            response.headers["x-pagination-next"] = str(body.offset + body.limit)
        return [assistant.to_json() for assistant in page]

    @router.post("/assistants/count", summary="Count assistants", responses=errors(401, 422))
    async def count(body: AssistantSearch, who: Caller = who_dep) -> int:
        """Return how many of the caller's assistants match."""
        return len(await _search(who, body))

    @router.get(
        "/assistants/{assistant_id}", summary="Read an assistant", responses=errors(401, 404)
    )
    async def get(assistant_id: str, who: Caller = who_dep) -> dict[str, Any]:
        """Return the assistant at the version runs use."""
        return (await find_assistant(who, assistant_id)).to_json()


def _describing_routes(router: APIRouter, who_dep: Any) -> None:
    """Add the routes that list an assistant's versions and describe its agent."""

    @router.post(
        "/assistants/{assistant_id}/versions",
        summary="List an assistant's versions",
        responses=errors(401, 404),
    )
    async def versions(
        assistant_id: str, body: VersionSearch, who: Caller = who_dep
    ) -> list[dict[str, Any]]:
        """Return the assistant's versions, newest first."""
        assistant = await find_assistant(who, assistant_id)
        every = sorted(assistant.data["versions"], key=lambda v: -v["version"])
        wanted = body.metadata or {}
        every = [v for v in every if all(v["metadata"].get(k) == x for k, x in wanted.items())]
        page = every[body.offset : body.offset + body.limit]
        return [assistant.to_json(v["version"]) for v in page]

    @router.get(
        "/assistants/{assistant_id}/graph",
        summary="Draw an assistant's graph",
        responses=errors(401, 404),
    )
    async def graph(assistant_id: str, who: Caller = who_dep, xray: bool = False) -> Any:
        """Return the agent's topology (its agents, teams, graph nodes and the edges)."""
        return _graph(who, await find_assistant(who, assistant_id))

    @router.get(
        "/assistants/{assistant_id}/schemas",
        summary="Read an assistant's schemas",
        responses=errors(401, 404),
    )
    async def schemas(assistant_id: str, who: Caller = who_dep) -> dict[str, Any]:
        """Return the JSON schemas of the assistant's input (messages and the session values
        its agents read: `plait.server.schemas`), output, state and options."""
        assistant = await find_assistant(who, assistant_id)
        agent = who.server.agents.get(assistant.graph_id)
        if agent is None:
            raise ApiError(404, f"no graph '{assistant.graph_id[:128]}'")
        return {
            "graph_id": assistant.graph_id,
            **agent_schemas(agent),
            "config_schema": {"type": "object", "properties": {"configurable": _OPTIONS}},
            "context_schema": _OPTIONS,
        }
