"""Transfer between agents: wiring, the transfer tool, history rewriting and the flow loop.

A transfer is a tail call: the source agent's turn ends, the target runs with the whole
history, and the source does not get control back. Messages written by other agents reach an
agent as user messages "For context: [Agent] said: …"; its own messages stay verbatim.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any, Literal, TypeVar

from plait._json import dump_plain, load_plain
from plait.agent import Agent, AgentInput
from plait.context import HistoryRecord, InterruptSignal, RunContext
from plait.errors import UsageError
from plait.events import AgentAction, AgentEvent, MessageVariant, TransferToAgentAction
from plait.messages import Message
from plait.tools.base import ToolInfo, ToolResult

__all__ = [
    "TRANSFER_TOOL",
    "dump_history",
    "is_pause",
    "iterate",
    "load_history",
    "TransferTool",
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

    Each child may have one parent; a parent's sub-agents are set once.
    """
    if getattr(parent, "sub_agents", ()):
        raise UsageError(f"agent '{_name(parent)}' already has sub-agents")
    names = [_name(c) for c in children]
    if len(set(names)) != len(names):
        raise UsageError(f"agent '{_name(parent)}' has two sub-agents with the same name")
    if _name(parent) in names:
        raise UsageError(f"agent '{_name(parent)}' cannot be its own sub-agent")
    for child in children:
        if getattr(child, "parent", None) is not None:
            raise UsageError(
                f"agent '{_name(child)}' already has a parent ('{_name(child.parent)}')"
            )
    _set(parent, "sub_agents", tuple(children))
    for child in children:
        _set(child, "parent", parent)
    return parent


def _set(agent: Any, attribute: str, value: Any) -> None:
    setter = getattr(agent, f"_set_{attribute}", None)
    if setter is not None:
        setter(value)
    else:
        setattr(agent, attribute, value)


def _name(agent: Any) -> str:
    return str(getattr(agent, "name", agent))


def transfer_targets(agent: Any, *, include_hidden_parent: bool = True) -> dict[str, Agent]:
    """Return the agents `agent` may transfer to by name: its sub-agents, then its parent."""
    targets: dict[str, Agent] = {a.name: a for a in getattr(agent, "sub_agents", ())}
    parent = getattr(agent, "parent", None)
    hidden = getattr(agent, "disallow_transfer_to_parent", False)
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


def rewrite_message(author: str, message: Message) -> Message:
    """Render another agent's message as a user message "For context: [author] …"."""
    parts = ["For context:"]
    if message.role == "tool":
        parts.append(f"[{author}] `{message.name}` tool returned result: {message.content}.")
    else:
        if message.content:
            parts.append(f"[{author}] said: {message.content}.")
        for tc in message.tool_calls:
            parts.append(f"[{author}] called tool: `{tc.name}` with arguments: {tc.arguments}.")
    return Message.user(" ".join(parts))


def _whole(record: HistoryRecord) -> Message:
    variant = record[1]
    if variant.message is not None:
        return variant.message
    assert variant.stream is not None
    return variant.stream.merged()


def history_for(agent_name: str, ctx: RunContext) -> list[Message]:
    """Return the input for `agent_name`: the root input, then the recorded history with
    other agents' messages rewritten "For context"."""
    messages = list(ctx.root_input)
    for record in ctx.history:
        message = _whole(record)
        messages.append(message if record[0] == agent_name else rewrite_message(record[0], message))
    return messages


def can_transfer(agent: Any) -> bool:
    """Whether `agent` has transfer targets (and so must run inside the flow loop)."""
    return bool(getattr(agent, "sub_agents", ())) or getattr(agent, "parent", None) is not None


async def iterate(
    agent: Agent, agent_input: AgentInput, ctx: RunContext
) -> AsyncGenerator[AgentEvent, None]:
    """Run `agent`, turning an `interrupt()` raised out of it into its pause event."""
    try:
        async with aclosing(agent.run(agent_input, ctx)) as events:  # type: ignore[type-var]
            async for event in events:
                yield event
    except InterruptSignal as signal:
        yield ctx.pause_event(signal.contexts)


def is_pause(event: AgentEvent, depth: int) -> bool:
    """Whether `event` announces a pause of this lane (not of an agent run as a tool)."""
    return (
        event.depth == depth and event.action is not None and event.action.interrupted is not None
    )


def dump_history(records: list[HistoryRecord]) -> Any:
    """Encode history records for a checkpoint (streams as their whole messages)."""
    return [[author, dump_plain(_whole((author, v)), Message)] for author, v in records]


def load_history(data: Any) -> list[HistoryRecord]:
    """Decode history records saved by `dump_history`."""
    records: list[HistoryRecord] = []
    for author, raw in data:
        message: Message = load_plain(Message, raw)
        role: Literal["assistant", "tool"] = "tool" if message.role == "tool" else "assistant"
        records.append((author, MessageVariant(is_streaming=False, role=role, message=message)))
    return records


def _resume_chain(agent: Agent, ctx: RunContext) -> tuple[Agent, RunContext, list[str]]:
    """Follow the transfers saved when the run paused to the agent that was running."""
    state = ctx.take_state("flow")
    chain: list[str] = list(state["chain"]) if state else []
    for name in chain:
        agent = transfer_targets(agent)[name]
        ctx = ctx.for_agent(name)
    return agent, ctx, chain


async def run_flow(agent: Agent, ctx: RunContext) -> AsyncIterator[AgentEvent]:
    """Run `agent` on the history of `ctx`, recording its messages, and follow its transfers.

    Only the agent's own events (its exact run path) are recorded and acted on; events of
    agents it runs as tools pass through untouched. An agent with `records_history = True`
    records its own messages (it runs its own flow inside). When the lane pauses, the flow
    saves which agent was running, so a resume continues there.
    """
    entry = ctx
    agent, ctx, chain = _resume_chain(agent, ctx)
    while True:
        agent_input = AgentInput(
            messages=history_for(agent.name, ctx), enable_streaming=ctx.enable_streaming
        )
        action: AgentAction | None = None
        stopped = False
        record = not getattr(agent, "records_history", False)
        async with aclosing(iterate(agent, agent_input, ctx)) as events:
            async for event in events:
                if event.run_path == ctx.run_path:
                    if record and event.output is not None and event.output.message is not None:
                        ctx.history.append((event.agent_name, event.output.message))
                    if event.action is not None:
                        action = event.action
                if event.action is not None and event.depth == ctx.depth:
                    # an exit or pause anywhere in this lane (say, after a nested transfer)
                    stopped = stopped or event.action.exit or event.action.interrupted is not None
                if is_pause(event, ctx.depth):
                    entry.save_state({"chain": chain}, "flow")
                yield event
                if event.error is not None:
                    return
        transfer = action.transfer_to_agent if action is not None else None
        if transfer is None or stopped:
            return
        target = transfer_targets(agent).get(transfer.dest_agent_name)
        if target is None:
            err = UsageError(
                f"transfer failed: agent '{transfer.dest_agent_name}' not found when "
                f"transferring from '{agent.name}'"
            )
            yield ctx.event(error=err)
            return
        chain.append(target.name)
        agent, ctx = target, ctx.for_agent(target.name)
