"""Transfer between agents: wiring, the transfer tool, history rewriting and the flow loop.

A transfer is a tail call: the source agent's turn ends, the target runs with the whole
history, and the source does not get control back. Messages written by other agents reach an
agent as user messages "For context: [Agent] said: …"; its own messages stay verbatim.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any, TypeVar

from plait.agent import Agent, AgentInput, HidesParent, LinkAware, RecordsHistory, Transferable
from plait.checkpoint import FlowRecord
from plait.context import RunContext, enter
from plait.errors import PlaitError, ResumeError, UsageError
from plait.events import AgentAction, AgentEvent, TransferToAgentAction
from plait.history import history_for, rewrite_message
from plait.tools.base import ToolInfo, ToolResult

__all__ = [
    "TRANSFER_TOOL",
    "TransferTool",
    "can_transfer",
    "history_for",
    "rewrite_message",
    "run_flow",
    "set_sub_agents",
    "transfer_targets",
]

TRANSFER_TOOL = "transfer_to_agent"
_A = TypeVar("_A")


def set_sub_agents(parent: _A, children: Sequence[Any]) -> _A:
    """Let `parent` transfer to each of `children` (and them back to it); return `parent`.

    Each child may have one parent; a parent's sub-agents are set once. Every agent touched
    becomes `Transferable` (it has both `sub_agents` and `parent`); a `LinkAware` one is told.
    """
    if _links(parent)[0]:
        raise UsageError(f"agent '{_name(parent)}' already has sub-agents")
    names = [_name(c) for c in children]
    if len(set(names)) != len(names):
        raise UsageError(f"agent '{_name(parent)}' has two sub-agents with the same name")
    if _name(parent) in names:
        raise UsageError(f"agent '{_name(parent)}' cannot be its own sub-agent")
    for child in children:
        current = _links(child)[1]
        if current is not None:
            raise UsageError(f"agent '{_name(child)}' already has a parent ('{current.name}')")
    _link(parent, tuple(children), _links(parent)[1])
    for child in children:
        _link(child, _links(child)[0], parent)
    return parent


def _links(agent: Any) -> tuple[Sequence[Agent], Agent | None]:
    """Return the agent's sub-agents and parent (none for an agent never linked)."""
    if isinstance(agent, Transferable):
        return agent.sub_agents, agent.parent
    return (), None


def _link(agent: Any, sub_agents: Sequence[Agent], parent: Any) -> None:
    agent.sub_agents = tuple(sub_agents)
    agent.parent = parent
    if isinstance(agent, LinkAware):
        agent.transfer_links_changed()


def _name(agent: Any) -> str:
    return str(agent.name) if isinstance(agent, Agent) else repr(agent)


def transfer_targets(agent: Any, *, include_hidden_parent: bool = True) -> dict[str, Agent]:
    """Return the agents `agent` may transfer to by name: its sub-agents, then its parent."""
    sub_agents, parent = _links(agent)
    targets: dict[str, Agent] = {a.name: a for a in sub_agents}
    hidden = isinstance(agent, HidesParent) and agent.disallow_transfer_to_parent
    if parent is not None and (include_hidden_parent or not hidden):
        targets.setdefault(parent.name, parent)
    return targets


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
        names = list(transfer_targets(self._owner, include_hidden_parent=False))
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
        )

    async def call(self, arguments_json: str, ctx: RunContext) -> str | ToolResult:
        """Transfer to the named agent, or tell the model which names are valid."""
        try:
            args = json.loads(arguments_json or "{}")
            name = args["agent_name"] if isinstance(args, dict) else None
        except (ValueError, KeyError):
            name = None
        targets = transfer_targets(self._owner)
        valid = ", ".join(targets) or "(none)"
        if not isinstance(name, str):
            return f'Error: call {TRANSFER_TOOL} with {{"agent_name": <one of: {valid}>}}.'
        if name not in targets:
            return f"Error: there is no agent named '{name}'; you can transfer to: {valid}."
        action = AgentAction(transfer_to_agent=TransferToAgentAction(dest_agent_name=name))
        return ToolResult(content=f"successfully transferred to agent [{name}]", action=action)


def can_transfer(agent: Any) -> bool:
    """Whether `agent` has transfer targets (and so must run inside the flow loop)."""
    sub_agents, parent = _links(agent)
    return bool(sub_agents) or parent is not None


async def _resume_chain(
    agent: Agent, ctx: RunContext, chain: list[str]
) -> tuple[Agent, RunContext]:
    """Follow the transfers saved with the run to the agent that was running."""
    for name in chain:
        target = transfer_targets(agent).get(name)
        if target is None:
            raise ResumeError(
                f"the checkpoint names agent '{name}', which '{agent.name}' can no longer "
                "transfer to"
            )
        agent, ctx = target, ctx.for_agent(name)
    return agent, ctx


async def run_flow(agent: Agent, ctx: RunContext) -> AsyncIterator[AgentEvent]:
    """Run `agent` on the history of `ctx`, recording its messages, and follow its transfers.

    Only the agent's own events (its exact run path) are recorded and acted on; events of
    agents it runs as tools pass through untouched. An agent with `records_history = True`
    records its own messages (it runs its own flow inside). The flow keeps the chain of
    transfers as its resume record, so a resume continues with the agent that was running.
    Every transfer counts towards the runner's `max_transfers`.
    """
    entry = ctx
    saved = ctx.take_state("flow", FlowRecord)
    chain: list[str] = list(saved.chain) if saved else []
    try:
        agent, ctx = await _resume_chain(agent, ctx, chain)
    except PlaitError as exc:
        yield ctx.event(error=exc)
        return
    while True:
        turn = _Turn()
        record = not (isinstance(agent, RecordsHistory) and agent.records_history)
        messages = ctx.input_for(agent.name)
        agent_input = AgentInput(messages=messages, enable_streaming=ctx.enable_streaming)
        async with aclosing(enter(agent, agent_input, ctx)) as events:
            async for event in events:
                turn.note(event, ctx, record=record)
                yield event
                if event.error is not None:
                    return
        if turn.paused:
            return
        transfer = turn.transfer
        if transfer is None or turn.exited:
            entry.drop_state("flow")
            return
        target = transfer_targets(agent).get(transfer.dest_agent_name)
        try:
            if target is None:
                raise UsageError(
                    f"transfer failed: agent '{transfer.dest_agent_name}' not found when "
                    f"transferring from '{agent.name}'"
                )
            ctx.count_transfer()
        except PlaitError as exc:
            yield ctx.event(error=exc)
            return
        chain.append(target.name)
        entry.save_state("flow", FlowRecord(chain=list(chain)))
        agent, ctx = target, ctx.for_agent(target.name)


class _Turn:
    """What one agent's turn in a flow came to: its transfer, an exit or a pause."""

    __slots__ = ("exited", "paused", "transfer")

    def __init__(self) -> None:
        self.transfer: TransferToAgentAction | None = None
        self.exited = False
        self.paused = False

    def note(self, event: AgentEvent, ctx: RunContext, *, record: bool) -> None:
        """Record the agent's own messages and note what its actions ask for."""
        action = event.action
        if event.run_path == ctx.run_path:
            if record and event.output is not None and event.output.message is not None:
                ctx.history.append((event.agent_name, event.output.message))
            if action is not None and action.transfer_to_agent is not None:
                self.transfer = action.transfer_to_agent
        if action is not None and event.depth == ctx.depth:
            # an exit or pause anywhere in this lane (say, after a nested transfer)
            self.exited = self.exited or action.exit
            self.paused = self.paused or action.interrupted is not None
