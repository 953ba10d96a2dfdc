"""`RecallTool`: the tool `recall(query)`, which searches the memories of the run's user."""

from __future__ import annotations

import json
from typing import Any

from plait.core.agent_context import AgentContext
from plait.errors import InvalidToolArguments, ToolError, UsageError
from plait.memory.base import MemoryItem, MemoryService, check_k
from plait.tools.base import ToolInfo

__all__ = ["USER_ID", "RecallTool", "user_id_of"]

#: The session value that names the user whose memories are recalled and saved.
USER_ID = "user_id"

_DESCRIPTION = (
    "Search the user's long-term memories (what they said in earlier conversations) for "
    "what matches the query's words; answers with the best matching memories, best first."
)


def user_id_of(ctx: AgentContext) -> object:
    """Return the session value `user_id` of the run (None when it has none)."""
    return ctx.session_values.get(USER_ID)


def answer(items: list[MemoryItem]) -> str:
    """Return the recall tool's answer: the memories' texts, numbered, best first."""
    if not items:
        return "No memories match."
    blocks = []
    for number, item in enumerate(items, start=1):
        lines = item.text.strip().splitlines() or [""]
        indented = "\n".join(f"   {line}" if line else "" for line in lines[1:])
        blocks.append(f"{number}. {lines[0]}" + (f"\n{indented}" if indented else ""))
    return "\n".join(blocks)


class RecallTool:
    """The tool `recall(query)`: search the memories of the user
    `session_values["user_id"]` and answer with their texts, best first.

    A run without a `user_id` session value (or with one that is not a valid id) gets a
    `ToolError` saying so, which the model is told (or which ends the run, with
    `tool_errors="raise"`). A failure of the service is reported the same way.

    Args:
        service: The `MemoryService` to search.
        k: The most memories one call answers with.
    """

    name = "recall"

    def __init__(self, service: MemoryService, *, k: int = 5) -> None:
        if not isinstance(service, MemoryService):
            raise UsageError(
                f"RecallTool needs a MemoryService (add, search, delete), got {service!r}"
            )
        self.service = service
        self.k = check_k(k)

    def __repr__(self) -> str:
        return f"RecallTool({self.service!r}, k={self.k})"

    def info(self) -> ToolInfo:
        """Describe the tool to the model: one argument, `query`."""
        return ToolInfo(
            name=self.name,
            description=_DESCRIPTION,
            parameters={
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "Words to look for in the memories.",
                    }
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        )

    async def call(self, arguments_json: str, ctx: AgentContext) -> str:
        """Search the memories of the run's user for `query`; answer with their texts."""
        query = self._query(arguments_json)
        user_id = user_id_of(ctx)
        if user_id is None:
            raise ToolError(
                "recall needs to know whose memories to search, and this run has no session "
                f"value '{USER_ID}'",
                tool_name=self.name,
            )
        try:
            items = await self.service.search(user_id, query, self.k)  # type: ignore[arg-type]
        except UsageError as exc:
            raise ToolError(f"recall could not search: {exc}", tool_name=self.name) from exc
        return answer(items)

    def _query(self, arguments_json: str) -> str:
        """Return the `query` argument, or raise `InvalidToolArguments`."""
        try:
            arguments: Any = json.loads(arguments_json or "{}")
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict) or not isinstance(arguments.get("query"), str):
            raise InvalidToolArguments(
                f'recall takes {{"query": "<words to look for>"}}, got {arguments_json[:200]!r}',
                tool_name=self.name,
            )
        if set(arguments) - {"query"}:
            extra = ", ".join(sorted(set(arguments) - {"query"}))
            raise InvalidToolArguments(
                f"recall takes only the argument 'query', got also: {extra}", tool_name=self.name
            )
        query: str = arguments["query"]
        return query
