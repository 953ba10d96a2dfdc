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

from plait._quote import quote
from plait.agent import (
    Agent,
    AgentInput,
    HidesParent,
    LinkAware,
    RecordsHistory,
    Transferable,
)
from plait.agent_context import AgentContext
from plait.checkpoint import FlowRecord
from plait.context import RunContext, inside
from plait.errors import InvalidToolArguments, PlaitError, ResumeError, UsageError
from plait.events import AgentAction, AgentEvent, MessageVariant, TransferToAgentAction
from plait.history import history_for, rewrite_message
from plait.kernel import enter, input_for
from plait.messages import Message
from plait.tools.base import TRANSFER_TOOL, ToolInfo, ToolResult

__all__ = [
    "TRANSFER_TOOL",
    "TransferTool",
    "can_transfer",
    "history_for",
    "rewrite_message",
    "run_flow",
    "set_sub_agents",
    "sub_agents_of",
    "transfer_targets",
]

_A = TypeVar("_A")


def set_sub_agents(parent: _A, children: Sequence[Any]) -> _A:
    """Let `parent` transfer to each of `children` (and them back to it); return `parent`.

    Each child may have one parent; a parent's sub-agents are set once. Every agent touched
    becomes `Transferable` (it has both `sub_agents` and `parent`); a `LinkAware` one is told.
    """
    if _links(parent)[0]:
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
        current = _links(child)[1]
        if current is not None:
            raise UsageError(f"agent '{_name(child)}' already has a parent ('{current.name}')")
    _link(parent, tuple(children), _links(parent)[1])
    for child in children:
        _link(child, _links(child)[0], parent)
    return parent


def _links(agent: Any) -> tuple[Sequence[Agent], Agent | None]:
    """Return the agent's sub-agents and parent, as `Transferable` declares them (none for
    an agent never linked). Read directly: this runs for every run and every turn."""
    try:
        linked: Transferable = agent
        return linked.sub_agents, linked.parent
    except AttributeError:
        return (), None


def _link(agent: Any, sub_agents: Sequence[Agent], parent: Any) -> None:
    agent.sub_agents = tuple(sub_agents)
    agent.parent = parent
    if isinstance(agent, LinkAware):
        agent.transfer_links_changed()


def _name(agent: Any) -> str:
    return str(agent.name) if isinstance(agent, Agent) else repr(agent)


def sub_agents_of(agent: Any) -> tuple[Agent, ...]:
    """Return the agents `agent` may transfer down to (none for an agent never linked)."""
    return tuple(_links(agent)[0])


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

    async def _call(self, arguments_json: str, ctx: RunContext) -> str | ToolResult:
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


def can_transfer(agent: Any) -> bool:
    """Whether `agent` has transfer targets (and so must run inside the flow loop)."""
    sub_agents, parent = _links(agent)
    return bool(sub_agents) or parent is not None


class Current:
    """The agent whose turn it is in a handoff loop, its context and what it runs on."""

    __slots__ = ("agent", "ctx", "messages")

    def __init__(self, agent: Agent, ctx: RunContext, messages: list[Message] | None) -> None:
        self.agent = agent
        self.ctx = ctx
        self.messages = messages  # None: derived from the lane's history when it runs


class HandoffLoop:
    """The one transfer loop: run the current agent, record what it says, follow its
    transfer to the next agent, until an agent answers, exits, pauses or fails.

    A flow (`sub_agents` transfers) and a swarm (`Team.swarm`) are two policies of it: they
    say where the loop starts (`begin`), what record it keeps (`keep`), how an agent runs
    (`step`), what happens when the loop ends (`finish`) and how a transfer is followed
    (`follow`: check it, count it, and return the next agent and any events to yield).
    """

    def begin(self, ctx: RunContext) -> Current:
        """Return the first agent (on a resume: the one that was running)."""
        raise NotImplementedError

    def keep(self, entry: RunContext, current: Current) -> None:
        """Keep the loop's resume record for the agent about to run."""

    def step(self, current: Current) -> AsyncIterator[AgentEvent]:
        """Run the current agent."""
        ctx, messages = current.ctx, current.messages
        if messages is None:
            agent_input = input_for(ctx, current.agent.name)
        else:
            agent_input = AgentInput(messages=messages, enable_streaming=ctx.enable_streaming)
        return enter(current.agent, agent_input, ctx)

    async def finish(self, entry: RunContext, current: Current, turn: Turn) -> list[AgentEvent]:
        """The loop ended with an answer (or an exit): drop its record; return events to
        yield last."""
        return []

    async def follow(
        self, entry: RunContext, current: Current, turn: Turn
    ) -> tuple[Current, list[AgentEvent]]:
        """Follow `turn.transfer`: return the next agent and events to yield first."""
        raise NotImplementedError

    async def run(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Run the loop in `ctx`, yielding every event."""
        try:
            current = self.begin(ctx)
        except PlaitError as exc:
            yield ctx.event(error=exc)
            return
        while True:
            self.keep(ctx, current)
            turn = Turn()
            record = not (
                isinstance(current.agent, RecordsHistory) and current.agent.records_history
            )
            async with aclosing(self.step(current)) as events:  # type: ignore[type-var]
                async for event in events:
                    turn.note(event, current.ctx, record=record)
                    yield event
                    if event.error is not None:
                        return
            if turn.paused:
                return
            if turn.transfer is None or turn.exited:
                for event in await self.finish(ctx, current, turn):
                    yield event
                return
            try:
                current, extra = await self.follow(ctx, current, turn)
            except PlaitError as exc:
                yield current.ctx.event(error=exc)
                return
            for event in extra:
                yield event


class _Flow(HandoffLoop):
    """`sub_agents` transfers: the target runs on the whole history, in its own address."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.chain: list[str] = []

    def begin(self, ctx: RunContext) -> Current:
        saved = ctx.take_record("flow", FlowRecord)
        self.chain = list(saved.chain) if saved else []
        agent = self.agent
        for name in self.chain:  # follow the transfers saved with the run
            target = transfer_targets(agent).get(name)
            if target is None:
                raise ResumeError(
                    f"the checkpoint names agent '{name}', which '{agent.name}' can no longer "
                    "transfer to"
                )
            agent, ctx = target, ctx.for_agent(name)
        return Current(agent, ctx, None)

    async def finish(self, entry: RunContext, current: Current, turn: Turn) -> list[AgentEvent]:
        entry.drop_record("flow")
        return []

    async def follow(
        self, entry: RunContext, current: Current, turn: Turn
    ) -> tuple[Current, list[AgentEvent]]:
        assert turn.transfer is not None
        name, source = turn.transfer.dest_agent_name, current.agent
        target = transfer_targets(source).get(name)
        if target is None:
            raise UsageError(
                f"transfer failed: agent '{name}' not found when transferring from '{source.name}'"
            )
        current.ctx.count_transfer()
        self.chain.append(target.name)
        entry.keep_record("flow", FlowRecord(chain=list(self.chain)))
        return Current(target, current.ctx.for_agent(target.name), None), []


def run_flow(agent: Agent, ctx: RunContext) -> AsyncIterator[AgentEvent]:
    """Run `agent` on the history of `ctx`, recording its messages, and follow its transfers.

    Only the agent's own events (its exact run path) are recorded and acted on; events of
    agents it runs as tools pass through untouched. An agent with `records_history = True`
    records its own messages (it runs its own flow inside). The flow keeps the chain of
    transfers as its resume record, so a resume continues with the agent that was running.
    Every transfer counts towards the runner's `max_transfers`.
    """
    return _Flow(agent).run(ctx)


class Turn:
    """What one agent's turn in a handoff loop came to: its transfer, its last words, an
    exit or a pause."""

    __slots__ = ("exited", "last", "paused", "said", "transfer")

    def __init__(self) -> None:
        self.transfer: TransferToAgentAction | None = None
        self.said: MessageVariant | None = None  # the agent's last assistant message
        self.last: MessageVariant | None = None  # its last message (an answer or a tool's)
        self.exited = False
        self.paused = False

    def note(self, event: AgentEvent, ctx: RunContext, *, record: bool) -> None:
        """Record the agent's own messages and note what its actions ask for."""
        action = event.action
        if event.run_path == ctx.run_path:
            output = event.output
            if output is not None and output.message is not None:
                if record:
                    ctx.lane_history.append((event.agent_name, output.message))
                self.last = output.message
                if output.message.role == "assistant":
                    self.said = output.message
            if action is not None and action.transfer_to_agent is not None:
                self.transfer = action.transfer_to_agent
        if action is not None and event.depth == ctx.depth:
            # an exit or pause anywhere in this lane (say, after a nested transfer)
            self.exited = self.exited or action.exit
            self.paused = self.paused or action.interrupted is not None
