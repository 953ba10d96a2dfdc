"""The handoff loop: run an agent, record what it says, follow its transfer to the next.

One loop serves both kinds of transfer: a flow (an agent's `sub_agents`, `Flow` here) and a
swarm (`plait.team.swarm`). Each is a policy of `HandoffLoop`: where the loop starts, what
record it keeps, how a transfer is followed and what happens at the end. The loop enters
each agent through the function the kernel gives it (`plait.kernel.run_agent` and
`run_loop` are the doors); this module stands below the kernel and imports none of it.
Also here: who an agent may transfer to (`transfer_targets`), and an agent's input in a
lane (`input_for`, `lane_for`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Any

from plait.core.agent import Agent, AgentInput, HidesParent, RecordsHistory, Transferable
from plait.core.checkpoint import FlowRecord
from plait.core.context import Frame
from plait.core.history import USER
from plait.core.steps import Fail, Final, Pause, Step, Transfer
from plait.errors import PlaitError, ResumeError, UsageError
from plait.events import AgentEvent, InterruptCtx, MessageVariant, TransferToAgentAction
from plait.messages import Message

__all__ = [
    "Current",
    "Enter",
    "Flow",
    "HandoffLoop",
    "Turn",
    "can_transfer",
    "input_for",
    "lane_for",
    "links",
    "sub_agents_of",
    "transfer_targets",
]

#: How the loop enters an agent: the kernel's way in (its pause and error handling).
Enter = Callable[[Agent, AgentInput, Frame], AsyncGenerator[AgentEvent, None]]


def input_for(ctx: Frame, agent_name: str) -> AgentInput:
    """Return the input of `agent_name` in the lane of `ctx`: the lane's conversation as that
    agent sees it, with the conversation itself as `source`."""
    return AgentInput(
        messages=ctx.input_for(agent_name),
        enable_streaming=ctx.run.enable_streaming,
        source=ctx.conversation(),
    )


def lane_for(ctx: Frame, agent_input: AgentInput) -> Frame:
    """Return a lane of `ctx` that starts from `agent_input`: a composite runs its children
    there, so they start from the input it was given."""
    source = agent_input.source
    if source is None:
        source = [(USER, m) for m in agent_input.messages]
    return ctx.lane(source)


def links(agent: Any) -> tuple[Sequence[Agent], Agent | None]:
    """Return the agent's sub-agents and parent, as `Transferable` declares them (none for
    an agent never linked). Read directly: this runs for every run and every turn."""
    try:
        linked: Transferable = agent
        return linked.sub_agents, linked.parent
    except AttributeError:
        return (), None


def sub_agents_of(agent: Any) -> tuple[Agent, ...]:
    """Return the agents `agent` may transfer down to (none for an agent never linked)."""
    return tuple(links(agent)[0])


def transfer_targets(agent: Any, *, include_hidden_parent: bool = True) -> dict[str, Agent]:
    """Return the agents `agent` may transfer to by name: its sub-agents, then its parent."""
    sub_agents, parent = links(agent)
    targets: dict[str, Agent] = {a.name: a for a in sub_agents}
    hidden = isinstance(agent, HidesParent) and agent.disallow_transfer_to_parent
    if parent is not None and (include_hidden_parent or not hidden):
        targets.setdefault(parent.name, parent)
    return targets


def can_transfer(agent: Any) -> bool:
    """Whether `agent` has transfer targets (and so must run inside the flow loop)."""
    sub_agents, parent = links(agent)
    return bool(sub_agents) or parent is not None


class Current:
    """The agent whose turn it is in a handoff loop, its context and what it runs on."""

    __slots__ = ("agent", "ctx", "messages")

    def __init__(self, agent: Agent, ctx: Frame, messages: list[Message] | None) -> None:
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

    def begin(self, ctx: Frame) -> Current:
        """Return the first agent (on a resume: the one that was running)."""
        raise NotImplementedError

    #: How agents are entered: set by `run` (the kernel's way in).
    enter: Enter

    def keep(self, entry: Frame, current: Current) -> None:
        """Keep the loop's resume record for the agent about to run."""

    def step(self, current: Current) -> AsyncGenerator[AgentEvent, None]:
        """Run the current agent."""
        ctx, messages = current.ctx, current.messages
        if messages is None:
            agent_input = input_for(ctx, current.agent.name)
        else:
            agent_input = AgentInput(messages=messages, enable_streaming=ctx.run.enable_streaming)
        return self.enter(current.agent, agent_input, ctx)

    async def finish(self, entry: Frame, current: Current, turn: Turn) -> list[AgentEvent]:
        """The loop ended with an answer (or an exit): drop its record; return events to
        yield last."""
        return []

    async def follow(
        self, entry: Frame, current: Current, turn: Turn
    ) -> tuple[Current, list[AgentEvent]]:
        """Follow `turn.transfer`: return the next agent and events to yield first."""
        raise NotImplementedError

    async def run(self, ctx: Frame, enter: Enter) -> AsyncGenerator[AgentEvent, None]:
        """Run the loop in `ctx`, entering each agent with `enter`; yield every event."""
        self.enter = enter
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
            async with aclosing(self.step(current)) as events:
                async for event in events:
                    turn.note(event, current.ctx, record=record)
                    yield event
                    if event.error is not None:
                        break
            match turn.outcome():
                case Transfer():
                    try:
                        current, extra = await self.follow(ctx, current, turn)
                    except PlaitError as exc:
                        yield current.ctx.event(error=exc)
                        return
                case Final():
                    for event in await self.finish(ctx, current, turn):
                        yield event
                    return
                case _:  # Pause or Fail: its event went up with the turn
                    return
            for event in extra:
                yield event


class Flow(HandoffLoop):
    """`sub_agents` transfers: the target runs on the whole history, in its own address.

    Only the agent's own events (its exact run path) are recorded and acted on; events of
    agents it runs as tools pass through untouched. An agent with `records_history = True`
    records its own messages (it runs its own flow inside). The flow keeps the chain of
    transfers as its resume record, so a resume continues with the agent that was running.
    Every transfer counts towards the runner's `max_transfers`.
    """

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.chain: list[str] = []

    def begin(self, ctx: Frame) -> Current:
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

    async def finish(self, entry: Frame, current: Current, turn: Turn) -> list[AgentEvent]:
        entry.drop_record("flow")
        return []

    async def follow(
        self, entry: Frame, current: Current, turn: Turn
    ) -> tuple[Current, list[AgentEvent]]:
        assert turn.transfer is not None
        name, source = turn.transfer.dest_agent_name, current.agent
        target = transfer_targets(source).get(name)
        if target is None:
            raise UsageError(
                f"transfer failed: agent '{name}' not found when transferring from '{source.name}'"
            )
        current.ctx.run.count_transfer()
        self.chain.append(target.name)
        entry.keep_record("flow", FlowRecord(chain=list(self.chain)))
        return Current(target, current.ctx.for_agent(target.name), None), []


class Turn:
    """What one agent's turn in a handoff loop came to: its transfer, its last words, an
    exit or a pause."""

    __slots__ = ("error", "exited", "interrupts", "last", "paused", "said", "transfer")

    def __init__(self) -> None:
        self.transfer: TransferToAgentAction | None = None
        self.said: MessageVariant | None = None  # the agent's last assistant message
        self.last: MessageVariant | None = None  # its last message (an answer or a tool's)
        self.exited = False
        self.paused = False
        self.interrupts: tuple[InterruptCtx, ...] = ()
        self.error: PlaitError | None = None

    def outcome(self) -> Step:
        """Return what the turn came to: `Fail`, `Pause`, `Transfer` or `Final`."""
        if self.error is not None:
            return Fail(self.error)
        if self.paused:
            return Pause(self.interrupts)
        if self.transfer is not None and not self.exited:
            return Transfer(self.transfer.dest_agent_name, self.transfer)
        return Final()

    def note(self, event: AgentEvent, ctx: Frame, *, record: bool) -> None:
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
        if event.error is not None:
            self.error = event.error
        if action is not None and event.depth == ctx.depth:
            # an exit or pause anywhere in this lane (say, after a nested transfer)
            self.exited = self.exited or action.exit
            if action.interrupted is not None:
                self.paused = True
                self.interrupts += action.interrupted.contexts
