"""The swarm of a `Team`: its handoff loop and the `transfer_to_agent` tool of its members.

Members hand the conversation to each other with `transfer_to_agent(agent_name, message="",
reason="")`. Each handoff is checked (`max_handoffs`, the repetitive-handoff window), logged
(`HandoffLog`), and the target starts from the history its `inherit` policy keeps, then the
handoff message. A member runs under `node_timeout`, counted across the pauses of the run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import time
from collections import deque
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Protocol

from plait._util.quote import quote
from plait.agents.chat_model import ChatModelAgent
from plait.agents.flow import TRANSFER_TOOL
from plait.core.agent import Agent, AgentInput
from plait.core.agent_context import AgentContext
from plait.core.checkpoint import SwarmRecord
from plait.core.context import Frame, inside
from plait.core.handoff import Current, HandoffLoop, Turn, sub_agents_of, transfer_targets
from plait.core.history import USER
from plait.errors import (
    InvalidToolArguments,
    MaxHandoffsExceeded,
    NodeTimeout,
    PlaitError,
    RepetitiveHandoffError,
    ResumeError,
    UsageError,
)
from plait.events import (
    AgentAction,
    AgentEvent,
    HandoffLog,
    MessageVariant,
    TransferToAgentAction,
)
from plait.messages import Message
from plait.team.inherit import History, InheritFn, InheritPolicy, Summarizer, inherit
from plait.tools.base import ToolInfo, ToolResult


class Team(Protocol):
    """What a swarm reads of its `Team` (`plait.team.Team` has all of it)."""

    name: str
    members: tuple[Agent, ...]
    entry: Agent | None
    max_handoffs: int
    node_timeout: float | None
    repetitive_handoff_window: int
    repetitive_handoff_min_unique: int
    inherit: InheritPolicy | InheritFn
    cross_request: bool
    _wired: dict[str, Agent]


__all__ = ["Swarm", "SwarmTransfer", "reachable", "roster"]

REASON_CHARS = 500  # the most of a model's text kept as a handoff's reason (or END message)
#: The `to_agent` of the handoff log's last entry: the member that answered ends the chain.
END = "END"


class SwarmTransfer:
    """`transfer_to_agent(agent_name, message="", reason="")` for one swarm member: to
    another member (a handoff), or to one of the member's own sub-agents (a transfer)."""

    def __init__(self, team: Team, owner: Agent) -> None:
        self._team = team
        self._owner = owner.name
        self._below = [a.name for a in sub_agents_of(owner)]

    def _others(self) -> list[str]:
        members = [m.name for m in self._team.members if m.name != self._owner]
        return members + [n for n in self._below if n not in members]

    def info(self) -> ToolInfo:
        """Describe the handoff tool, listing the other members (and the sub-agents)."""
        description = "Hand the conversation to another member of your team"
        if self._below:
            description += " or to one of your sub-agents"
        return ToolInfo(
            name=TRANSFER_TOOL,
            description=f"{description}.",
            parameters={
                "type": "object",
                "properties": {
                    "agent_name": {"type": "string", "enum": self._others()},
                    "message": {"type": "string", "description": "What the member should do."},
                    "reason": {"type": "string", "description": "Why you hand over."},
                },
                "required": ["agent_name"],
            },
        )

    async def call(self, arguments_json: str, ctx: AgentContext) -> str | ToolResult:
        """Run one call of this tool with the model's `arguments_json`."""
        return await self._call(arguments_json, inside(ctx))

    async def _call(self, arguments_json: str, ctx: Frame) -> str | ToolResult:
        """Hand off to the named member; an `InvalidToolArguments` says which names are valid."""
        try:
            args = json.loads(arguments_json or "{}")
        except ValueError:
            args = None
        others = self._others()
        problem = None
        if not isinstance(args, dict) or not isinstance(args.get("agent_name"), str):
            problem = f'call {TRANSFER_TOOL} with {{"agent_name": <one of: {", ".join(others)}>}}.'
        elif args["agent_name"] not in others:
            problem = f"agent {quote(args['agent_name'])} not found. Available agents: "
            problem += f"{', '.join(others)}."
        if problem is not None:
            raise InvalidToolArguments(
                problem, tool_name=TRANSFER_TOOL, call_id=ctx.tool_call_id, agent_name=self._owner
            )
        name = args["agent_name"]
        action = TransferToAgentAction(
            dest_agent_name=name,
            message=str(args.get("message") or ""),
            reason=str(args.get("reason") or ""),
        )
        return ToolResult(
            content=f"Transfer initiated to agent '{name}'",
            action=AgentAction(transfer_to_agent=action),
        )


def roster(team: Team, owner: str) -> str:
    """Return the instruction telling member `owner` who else is in the team."""
    others = [f"- {m.name}: {m.description or m.name}" for m in team.members if m.name != owner]
    return "\n".join(
        [
            f"You are part of the team '{team.name}'. The other members:",
            *others,
            f"When another member is better suited, call '{TRANSFER_TOOL}' with its name and "
            "a message saying what it should do.",
        ]
    )


def reachable(team: Team) -> dict[str, Agent]:
    """Return every agent a swarm may run, by name: its members (as the team wired them),
    then their sub-agents, and theirs (a member's transfer to one is followed in the swarm).

    Raises:
        UsageError: Two different agents in the swarm share a name.
    """
    found: dict[str, Agent] = dict(team._wired)
    agents = {m.name: m for m in team.members}  # as handed in
    todo = list(team.members)
    while todo:
        for sub in sub_agents_of(todo.pop()):
            known = agents.setdefault(sub.name, sub)
            if known is sub and sub.name not in found:
                found[sub.name] = sub
                todo.append(sub)
            elif known is not sub:
                raise UsageError(
                    f"team '{team.name}' has two agents named '{sub.name}' (a member and a "
                    "sub-agent, or sub-agents of two members); a swarm tells them apart by name"
                )
    return found


class Swarm(HandoffLoop):
    """A swarm's handoff loop: guards, a handoff log, inherited history, node timeouts."""

    def __init__(self, team: Team) -> None:
        self.team = team
        self.handoffs = 0
        self.window: deque[str] = deque()
        self.clock = _Clock()
        self.steps = self.tokens = 0

    @property
    def session_key(self) -> str:
        """Return the session value naming the member that answered last."""
        return f"swarm_active_agent:{self.team.name}"

    def begin(self, ctx: Frame) -> Current:
        member, path = self._start(ctx)
        mctx = ctx.for_agent(member.name, run_path=path, address=ctx.address)
        return Current(member, mctx, ctx.input_for(member.name))

    def _start(self, ctx: Frame) -> tuple[Agent, tuple[str, ...]]:
        """Return where the swarm starts (agent, run path), with its handoffs, recent
        targets and the member's clock: the paused agent on a resume, else the entry or the
        agent that answered last (a member, or a sub-agent of one)."""
        team = self.team
        by_name = reachable(team)
        window = team.repetitive_handoff_window
        saved = ctx.take_record("swarm", SwarmRecord)
        if saved:
            active = saved.active
            if active not in by_name:
                raise ResumeError(
                    f"the checkpoint names agent '{active}', which team '{team.name}' no "
                    f"longer has; its members are: {', '.join(by_name)}",
                    team=team.name,
                    agent_name=active,
                    members=list(by_name),
                )
            self.handoffs = saved.handoffs
            self.window = deque(saved.window, maxlen=window)
            self.clock = _Clock(saved.elapsed)
            return by_name[active], tuple(saved.path)
        member = by_name[(team.entry or team.members[0]).name]
        last = ctx.session_values.get(self.session_key)
        if team.cross_request and last in by_name:
            member = by_name[last]
        self.window = deque(maxlen=window)
        return member, (*ctx.run_path, member.name)

    def keep(self, entry: Frame, current: Current) -> None:
        record = SwarmRecord.model_construct(
            active=current.agent.name,
            path=list(current.ctx.run_path),
            handoffs=self.handoffs,
            window=list(self.window),
            messages=current.messages,
        )
        entry.keep_record("swarm", functools.partial(self.clock.stamp, record))
        self.steps, self.tokens = entry.run.model_calls, entry.usage.total_tokens

    def step(self, current: Current) -> AsyncGenerator[AgentEvent, None]:
        messages = current.messages or []
        agent_input = AgentInput(
            messages=messages, enable_streaming=current.ctx.run.enable_streaming
        )
        return self._timed(current.agent, agent_input, current.ctx)

    async def finish(self, entry: Frame, current: Current, turn: Turn) -> list[AgentEvent]:
        """Close the handoff chain with an entry to `END` (the member's answer as its
        message); on an answer (not an exit) drop the record and note the active member."""
        answer = "" if turn.last is None else (await turn.last.get_message()).content.strip()
        log = HandoffLog(
            timestamp=entry.run.ids.now(),
            from_agent=current.agent.name,
            to_agent=END,
            message=_clip(answer),
            step_count=entry.run.model_calls - self.steps,
            tokens_used=entry.usage.total_tokens - self.tokens,
        )
        if not turn.exited:
            entry.drop_record("swarm")
            if self.team.cross_request:
                entry.session_values[self.session_key] = current.agent.name
        return [dataclasses.replace(current.ctx.event(), handoff=log)]

    async def follow(
        self, entry: Frame, current: Current, turn: Turn
    ) -> tuple[Current, list[AgentEvent]]:
        transfer, member = turn.transfer, current.agent
        assert transfer is not None
        below = self._below(member)
        if transfer.dest_agent_name in below:
            return self._transfer(entry, current, below[transfer.dest_agent_name]), []
        target = self.team._wired.get(transfer.dest_agent_name)
        error = self._guard(member.name, target, transfer.dest_agent_name)
        if error is not None:
            raise error
        assert target is not None
        self.handoffs += 1
        self.window.append(target.name)
        log = HandoffLog(
            timestamp=entry.run.ids.now(),
            from_agent=member.name,
            to_agent=target.name,
            message=transfer.message,
            reason=await _reason(transfer, turn.said),
            step_count=entry.run.model_calls - self.steps,
            tokens_used=entry.usage.total_tokens - self.tokens,
        )
        handoff = dataclasses.replace(current.ctx.event(), handoff=log)
        messages = await self._handoff_input(member, target, transfer, entry)
        self.clock = _Clock()
        path = (*current.ctx.run_path, target.name)
        tctx = entry.for_agent(target.name, run_path=path, address=entry.address)
        return Current(target, tctx, messages), [handoff]

    def _below(self, agent: Agent) -> dict[str, Agent]:
        """Return whom `agent` transfers to outside the handoffs: a member, its sub-agents;
        an agent below a member, its sub-agents and its parent (the other members are
        reached by handoff, from a member)."""
        members = self.team._wired
        if members.get(agent.name) is agent:
            return {a.name: a for a in sub_agents_of(agent) if a.name not in members}
        return transfer_targets(agent)

    def _transfer(self, entry: Frame, current: Current, target: Agent) -> Current:
        """Follow a transfer (not a handoff): the target runs on the whole history, as in a
        flow; it counts towards the runner's `max_transfers`."""
        current.ctx.run.count_transfer()
        target = self.team._wired.get(target.name, target)  # back to a member: as wired
        path = (*current.ctx.run_path, target.name)
        tctx = entry.for_agent(target.name, run_path=path, address=entry.address)
        return Current(target, tctx, entry.input_for(target.name))

    def _guard(self, source: str, target: Agent | None, name: str) -> PlaitError | None:
        """Return why the handoff from `source` to `name` is refused, if it is."""
        team = self.team
        if target is None:
            return UsageError(f"Transfer failed: target agent '{name}' not found (from '{source}')")
        if self.handoffs + 1 > team.max_handoffs:
            return MaxHandoffsExceeded(
                f"Transfer rejected: max handoffs exceeded: {team.max_handoffs}",
                team=team.name,
                limit=team.max_handoffs,
            )
        size = team.repetitive_handoff_window
        recent = [*self.window, target.name][-size:]
        if size and len(recent) >= size and len(set(recent)) < team.repetitive_handoff_min_unique:
            return RepetitiveHandoffError(
                f"Transfer rejected: repetitive handoff detected: the last {len(recent)} "
                f"handoffs went to only {sorted(set(recent))}",
                team=team.name,
                window=recent,
            )
        return None

    async def _handoff_input(
        self, source: Agent, target: Agent, transfer: TransferToAgentAction, ctx: Frame
    ) -> list[Message]:
        """What the target sees: the inherited history, then the handoff message."""
        records = [(author, await variant.get_message()) for author, variant in ctx.lane_history]
        run_input = [(None if a == USER else a, m) for a, m in ctx.root_records]
        history = History([*run_input, *records])
        model = source.model if isinstance(source, ChatModelAgent) else None
        summarizer = Summarizer(
            model,
            lambda reply: ctx.record_model_call(reply.usage),
            ctx.side_model,
        )
        kept = await inherit(self.team.inherit, history, source.name, target.name, summarizer)
        if transfer.message:
            return [*kept, Message.user(transfer.message)]
        if not kept:  # nothing inherited and no message: the user's request
            users = [m for m in ctx.root_input if m.role == "user"]
            return users[-1:]
        return kept

    async def _timed(
        self, member: Agent, agent_input: AgentInput, ctx: Frame
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run a member, ending it with `NodeTimeout` when it runs past `node_timeout`
        (counting the time it ran before a pause, not the time the run was paused)."""
        events = self.enter(member, agent_input, ctx)
        clock, limit, team = self.clock, self.team.node_timeout, self.team.name
        clock.start()
        if limit is None:
            async with aclosing(events):
                async for event in events:
                    yield event
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit - clock.base
        async with aclosing(events):
            while True:
                try:
                    event = await asyncio.wait_for(anext(events), deadline - loop.time())
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    yield ctx.event(
                        error=NodeTimeout(
                            f"member '{member.name}' of team '{team}' ran longer than "
                            f"node_timeout={limit}s",
                            team=team,
                            agent_name=member.name,
                            limit=limit,
                        )
                    )
                    return
                yield event


class _Clock:
    """How long the active member has run, across the pauses of the run."""

    __slots__ = ("base", "started")

    def __init__(self, base: float = 0.0) -> None:
        self.base = base  # seconds it ran before the run was last saved and resumed
        self.started: float | None = None

    def start(self) -> None:
        self.started = _now()

    def stamp(self, record: SwarmRecord) -> SwarmRecord:
        """Return the swarm's record with the member's running time so far."""
        ran = 0.0 if self.started is None else _now() - self.started
        return record.model_copy(update={"elapsed": self.base + ran})


async def _reason(transfer: TransferToAgentAction, said: MessageVariant | None) -> str:
    """Return why a member handed off: its `reason` argument, else the text it wrote beside
    the transfer call (stripped, at most `REASON_CHARS` characters)."""
    if transfer.reason.strip() or said is None:
        return transfer.reason
    message = await said.get_message()
    if not any(c.name == TRANSFER_TOOL for c in message.tool_calls):
        return ""
    return _clip(message.content.strip())


def _clip(text: str) -> str:
    """Return `text` cut to at most `REASON_CHARS` characters (an ellipsis marks a cut)."""
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def _now() -> float:
    """The running loop's clock (monotonic seconds; a durable engine's loop gives its own
    deterministic time)."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:  # no loop running: the clock a default loop reads
        return time.monotonic()
