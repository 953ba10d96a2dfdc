"""`deep_agent`: a ReAct agent with a todo list, sub-agents it delegates to with `task`, and
file tools over a backend confined to its root."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from plait.agents.agent_tool import AgentTool
from plait.agents.chat_model import ChatModelAgent
from plait.core.agent import Agent, require_agent, require_unique_names
from plait.core.agent_context import AgentContext
from plait.core.context import Frame, inside
from plait.errors import UsageError
from plait.models.base import ChatModel
from plait.models.spec import resolve_model
from plait.prebuilt.filesystem import FileBackend, FileLimits, MemoryBackend, filesystem_tools
from plait.tools.base import Tool, ToolInfo
from plait.tools.function import tool

__all__ = ["GENERAL_PURPOSE", "TODOS_KEY", "Todo", "deep_agent"]

TODOS_KEY = "todos"
GENERAL_PURPOSE = "general-purpose"

DEEP_INSTRUCTION = """You are an agent that completes complex, multi-step tasks.

- Plan with `write_todos`: keep the list current, one item in_progress at a time.
- Delegate self-contained pieces of work with `task`, naming the sub-agent type; each sub-agent
  starts fresh and returns one final report.
- Keep notes and results in files with the file tools (`ls`, `read_file`, `write_file`,
  `edit_file`, `glob`, `grep`); paths are relative to your workspace root."""


class Todo(BaseModel):
    """One item of the agent's todo list."""

    content: str = Field(description="What to do.")
    activeForm: str = Field(default="", description="The item phrased as work in progress.")
    status: Literal["pending", "in_progress", "completed"] = "pending"


@tool
def write_todos(todos: list[Todo], ctx: Frame) -> str:
    """Replace the todo list with `todos`.

    Args:
        todos: The whole list, each with content, activeForm and status.
    """
    items = [t.model_dump() for t in todos]
    ctx.session_values[TODOS_KEY] = items
    return f"Updated todo list to {json.dumps(items)}"


class _TaskTool:
    """`task(subagent_type, description)`: run a sub-agent on a self-contained task."""

    emits_events = True

    def __init__(self, agents: dict[str, Agent]) -> None:
        self._tools = {name: AgentTool(agent) for name, agent in agents.items()}

    def info(self) -> ToolInfo:
        """Describe the tool, listing the sub-agent types and what each is for."""
        listing = "\n".join(
            f"- {name}: {t.agent.description or name}" for name, t in self._tools.items()
        )
        return ToolInfo(
            name="task",
            description=f"Run a sub-agent on a self-contained task; it returns one final "
            f"report. Sub-agent types:\n{listing}",
            parameters={
                "type": "object",
                "properties": {
                    "subagent_type": {"type": "string", "enum": list(self._tools)},
                    "description": {
                        "type": "string",
                        "description": "The complete task, with all the context it needs.",
                    },
                },
                "required": ["subagent_type", "description"],
            },
        )

    async def call(self, arguments_json: str, ctx: AgentContext) -> str:
        """Run one call of this tool with the model's `arguments_json`."""
        return await self._call(arguments_json, inside(ctx))

    async def _call(self, arguments_json: str, ctx: Frame) -> str:
        """Dispatch to the named sub-agent, or say which names exist."""
        args = json.loads(arguments_json or "{}")
        kind = args.get("subagent_type") if isinstance(args, dict) else None
        target = self._tools.get(kind) if isinstance(kind, str) else None
        if target is None:
            names = ", ".join(self._tools)
            raise LookupError(f"subagent type {kind!r} not found; the types are: {names}")
        return await target.call(json.dumps({"request": args.get("description", "")}), ctx)


def _check_sub_agents(name: str, sub_agents: Sequence[Agent], general_purpose: bool) -> None:
    """Refuse sub-agents that are not agents, or that share a name (with the built-in one
    too, when it is there)."""
    for i, agent in enumerate(sub_agents):
        require_agent(agent, f"deep agent '{name}': sub_agents[{i}]")
    require_unique_names(sub_agents, f"deep agent '{name}': sub_agents")
    if general_purpose and any(agent.name == GENERAL_PURPOSE for agent in sub_agents):
        raise UsageError(
            f"deep agent '{name}': a sub-agent is named '{GENERAL_PURPOSE}' like the built-in "
            "one; rename it, or pass general_purpose=False to use it instead"
        )


def deep_agent(
    name: str,
    model: ChatModel | str,
    *,
    description: str = "",
    instruction: str = DEEP_INSTRUCTION,
    sub_agents: Sequence[Agent] = (),
    tools: Sequence[Tool | Callable[..., Any]] = (),
    backend: FileBackend | None = None,
    file_limits: FileLimits | None = None,
    todos: bool = True,
    general_purpose: bool = True,
    max_iterations: int = 50,
    output_key: str | None = None,
) -> ChatModelAgent:
    """Build a deep agent.

    Its tools: `write_todos` (unless `todos=False`), `task` dispatching to `sub_agents` plus a
    "general-purpose" sub-agent with the same model, instruction and tools (unless
    `general_purpose=False`), the file tools over `backend` (an in-memory workspace by
    default; a `DirectoryBackend(root)` never touches anything outside `root`), each call
    bounded by `file_limits` (`FileLimits()` if not given), and `tools`.
    `model` is a `ChatModel` or a spec string such as "openai:gpt-4o-mini"; the agent and its
    general-purpose sub-agent share it.

    Raises:
        UsageError: `model` is not a model, one of `sub_agents` is not an `Agent`, or two
            of them (or one and the general-purpose agent) share a name.
    """
    _check_sub_agents(name, sub_agents, general_purpose)
    model = resolve_model(model, owner=f"agent '{name}'")
    files = filesystem_tools(backend if backend is not None else MemoryBackend(), file_limits)
    base_tools: list[Any] = [*tools, *files]
    if todos:
        base_tools.append(write_todos)
    agents: dict[str, Agent] = {}
    if general_purpose:
        agents[GENERAL_PURPOSE] = ChatModelAgent(
            GENERAL_PURPOSE,
            model,
            description="A general agent for any self-contained task; it has your tools.",
            instruction=instruction,
            tools=base_tools,
            max_iterations=max_iterations,
        )
    for agent in sub_agents:
        agents[agent.name] = agent
    all_tools = [*base_tools, _TaskTool(agents)] if agents else base_tools
    return ChatModelAgent(
        name,
        model,
        description=description,
        instruction=instruction,
        tools=all_tools,
        max_iterations=max_iterations,
        output_key=output_key,
    )
