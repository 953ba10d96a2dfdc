"""Transfer between agents: wiring (`set_sub_agents`) and the transfer tool.

The loop that follows transfers is `plait.handoff.Flow`, entered by the kernel's
`run_agent` for any agent that can transfer.

A transfer is a tail call: the source agent's turn ends, the target runs with the whole
history, and the source does not get control back. Messages written by other agents reach an
agent as user messages "For context: [Agent] said: …"; its own messages stay verbatim.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

from plait._util.quote import quote
from plait.core.agent import Agent, LinkAware
from plait.core.agent_context import AgentContext
from plait.core.context import Frame, inside
from plait.core.handoff import links, sub_agents_of, transfer_targets
from plait.core.history import history_for, rewrite_message
from plait.errors import InvalidToolArguments, UsageError
from plait.events import AgentAction, TransferToAgentAction
from plait.tools.base import TRANSFER_TOOL, ToolInfo, ToolResult

__all__ = [
    "TRANSFER_TOOL",
    "TransferTool",
    "history_for",
    "rewrite_message",
    "set_sub_agents",
    "sub_agents_of",
    "transfer_targets",
    "transfer_instruction",
]

_A = TypeVar("_A")


def set_sub_agents(parent: _A, children: Sequence[Any]) -> _A:
    """Let `parent` transfer to each of `children` (and them back to it); return `parent`.

    Each child may have one parent; a parent's sub-agents are set once. Every agent touched
    becomes `Transferable` (it has both `sub_agents` and `parent`); a `LinkAware` one is told.
    """
    if links(parent)[0]:
        raise UsageError(f"agent '{_name(parent)}' already has sub-agents")
    names = [_name(c) for c in children]
    shared = sorted({n for n in names if names.count(n) > 1})
    if shared:
        raise UsageError(
            f"agent '{_name(parent)}' has two sub-agents with the same name: "
            f"{', '.join(repr(n) for n in shared)}"
        )
    if _name(parent) in names:
        raise UsageError(f"agent '{_name(parent)}' cannot be its own sub-agent")
    for child in children:
        current = links(child)[1]
        if current is not None:
            raise UsageError(f"agent '{_name(child)}' already has a parent ('{current.name}')")
    _link(parent, tuple(children), links(parent)[1])
    for child in children:
        _link(child, links(child)[0], parent)
    return parent


def _link(agent: Any, sub_agents: Sequence[Agent], parent: Any) -> None:
    agent.sub_agents = tuple(sub_agents)
    agent.parent = parent
    if isinstance(agent, LinkAware):
        agent.transfer_links_changed()


def _name(agent: Any) -> str:
    return str(agent.name) if isinstance(agent, Agent) else repr(agent)


def transfer_instruction(targets: Sequence[Agent]) -> str:
    """Return the instruction telling an agent whom it may transfer to and how."""
    lines = ["Available other agents:"]
    for agent in targets:
        lines.append(f"- Agent name: {agent.name}")
        lines.append(f"  Agent description: {agent.description or agent.name}")
    lines += [
        "",
        "Decision rule:",
        "- If you are best suited to answer according to your description: ANSWER.",
        "- If another agent is better suited according to its description: CALL the "
        f"'{TRANSFER_TOOL}' function with that agent's name.",
        "",
        "When transferring: OUTPUT ONLY THE FUNCTION CALL.",
    ]
    return "\n".join(lines)


class TransferTool:
    """The `transfer_to_agent(agent_name)` tool of an agent with transfer targets."""

    def __init__(self, owner: Any) -> None:
        self._owner = owner

    def info(self) -> ToolInfo:
        """Describe the tool, listing the agents it can reach."""
        targets = transfer_targets(self._owner, include_hidden_parent=False)
        names = list(targets)
        agents = {name: agent.description or name for name, agent in targets.items()}
        return ToolInfo(
            name=TRANSFER_TOOL,
            description="Transfer the conversation to another agent better suited to it.",
            parameters={
                "type": "object",
                "properties": {
                    "agent_name": {
                        "type": "string",
                        "description": "The name of the agent to transfer to.",
                        "enum": names,
                    }
                },
                "required": ["agent_name"],
            },
            hints={"agents": agents},
        )

    async def call(self, arguments_json: str, ctx: AgentContext) -> str | ToolResult:
        """Run one call of this tool with the model's `arguments_json`."""
        return await self._call(arguments_json, inside(ctx))

    async def _call(self, arguments_json: str, ctx: Frame) -> str | ToolResult:
        """Transfer to the named agent.

        Raises:
            InvalidToolArguments: The arguments are not `{"agent_name": <a target's name>}`;
                the message says which names are valid. Like any failing tool call, the
                model is told, or the run ends with it under `tool_errors="raise"`.
        """
        try:
            args = json.loads(arguments_json or "{}")
            name = args["agent_name"] if isinstance(args, dict) else None
        except (ValueError, KeyError):
            name = None
        targets = transfer_targets(self._owner)
        valid = ", ".join(targets) or "(none)"
        if not isinstance(name, str):
            problem = f'call {TRANSFER_TOOL} with {{"agent_name": <one of: {valid}>}}.'
        elif name not in targets:
            problem = f"there is no agent named {quote(name)}; you can transfer to: {valid}."
        else:
            action = AgentAction(transfer_to_agent=TransferToAgentAction(dest_agent_name=name))
            return ToolResult(content=f"successfully transferred to agent [{name}]", action=action)
        raise InvalidToolArguments(
            problem, tool_name=TRANSFER_TOOL, call_id=ctx.tool_call_id, agent_name=ctx.agent_name
        )
