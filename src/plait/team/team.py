"""`Team`: several agents working as one — a coordinator with members as tools, or a swarm
of peers handing off to each other."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from typing import Any

from plait._quote import quote
from plait.agent import Agent, AgentInput, require_agent
from plait.agents.agent_tool import AgentTool
from plait.agents.chat_model import ChatModelAgent
from plait.agents.flow import TRANSFER_TOOL, Current, HandoffLoop, Turn, run_flow
from plait.agents.workflow import close_lane, open_lane
from plait.checkpoint import SwarmRecord
from plait.context import RunContext
from plait.errors import (
    InvalidToolArguments,
    MaxDepthExceeded,
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
from plait.history import USER
from plait.kernel import enter, is_pause
from plait.messages import Message
from plait.team.inherit import History, Inherit, InheritFn, InheritPolicy, inherit
from plait.tools.base import ToolInfo, ToolResult

__all__ = ["Team"]

EventFilter = Callable[[AgentEvent], bool]
REASON_CHARS = 500  # the most of a model's text kept as a handoff's reason (or END message)
#: The `to_agent` of the handoff log's last entry: the member that answered ends the chain.
END = "END"


def _levels(agent: Any) -> int:
    """How many levels of teams `agent` holds, counting itself."""
    if not isinstance(agent, Team):
        return 0
    inner = [*agent.members, *([agent.lead] if agent.lead is not None else [])]
    return 1 + max((_levels(m) for m in inner), default=0)


class _SwarmTransfer:
    """`transfer_to_agent(agent_name, message="", reason="")` for one swarm member."""

    def __init__(self, team: Team, owner: str) -> None:
        self._team = team
        self._owner = owner

    def _others(self) -> list[str]:
        return [m.name for m in self._team.members if m.name != self._owner]

    def info(self) -> ToolInfo:
        """Describe the handoff tool, listing the other members."""
        return ToolInfo(
            name=TRANSFER_TOOL,
            description="Hand the conversation to another member of your team.",
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

    async def call(self, arguments_json: str, ctx: RunContext) -> str | ToolResult:
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


def _roster(team: Team, owner: str) -> str:
    lines = [f"You are part of the team '{team.name}'. The other members:"]
    for m in team.members:
        if m.name != owner:
            lines.append(f"- {m.name}: {m.description or m.name}")
    lines.append(
        f"When another member is better suited, call '{TRANSFER_TOOL}' with its name and a "
        "message saying what it should do."
    )
    return "\n".join(lines)


class Team:
    """Several agents working as one `Agent`.

    Build one with `Team.coordinator(...)` (members become the coordinator's tools; `lead`
    is the coordinator) or `Team.swarm(...)` (peers hand off with `transfer_to_agent`;
    `entry` is the first member). A team can be a member of
    another team, an `AgentTool`, a graph node or a `Runner` root. Common options:
    `max_depth` (levels of teams that may nest, counting this one), `total_max_steps` (model
    calls across all levels), `total_token_budget` (tokens across all levels) and
    `event_filter` (drops member events before they go up; errors and pauses always pass).
    """

    records_history = True  # its members' messages are recorded in its own lane

    def __init__(
        self,
        *,
        name: str,
        description: str,
        members: Sequence[Agent],
        coordinator: Agent | None = None,
        entry: Agent | None = None,
        max_depth: int | None = None,
        total_max_steps: int | None = None,
        total_token_budget: int | None = None,
        event_filter: EventFilter | None = None,
        **swarm: Any,
    ) -> None:
        self.name = name
        self.description = description
        self.members = tuple(members)
        self.lead = coordinator
        self.entry = entry
        self.max_depth = max_depth
        self.total_max_steps = total_max_steps
        self.total_token_budget = total_token_budget
        self.event_filter = event_filter
        self.max_handoffs: int = swarm.get("max_handoffs", 20)
        self.node_timeout: float | None = swarm.get("node_timeout")
        self.repetitive_handoff_window: int = swarm.get("repetitive_handoff_window", 8)
        self.repetitive_handoff_min_unique: int = swarm.get("repetitive_handoff_min_unique", 3)
        self.inherit: InheritPolicy | InheritFn = swarm.get("inherit", Inherit.ALL)
        self.cross_request: bool = swarm.get("cross_request", True)
        self._check()
        # what runs, by name: the members (and coordinator) as wired for this team; the
        # agents handed in are never changed, so they can serve elsewhere too
        self._wired: dict[str, Agent] = {m.name: m for m in self.members}
        self._wired_lead: Agent | None = coordinator

    def _check(self) -> None:
        if not self.name:
            raise UsageError("a team needs a name")
        if not self.members:
            raise UsageError(f"team '{self.name}' needs at least one member")
        for i, member in enumerate(self.members):
            require_agent(member, f"team '{self.name}': members[{i}]")
        if self.lead is not None:
            require_agent(self.lead, f"team '{self.name}': coordinator")
        names = [m.name for m in self.members]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise UsageError(f"team '{self.name}' has several members named {duplicates}")
        if self.lead is not None and self.lead.name in names:
            raise UsageError(
                f"team '{self.name}': a member is named like the coordinator '{self.lead.name}'"
            )
        levels = _levels(self)
        if self.max_depth is not None and levels > self.max_depth:
            raise MaxDepthExceeded(
                f"team '{self.name}' nests {levels} levels of teams, over its "
                f"max_depth={self.max_depth}",
                team=self.name,
                limit=self.max_depth,
            )

    @classmethod
    def coordinator(
        cls,
        coordinator: Agent,
        members: Sequence[Agent],
        *,
        name: str | None = None,
        description: str | None = None,
        max_depth: int | None = None,
        total_max_steps: int | None = None,
        total_token_budget: int | None = None,
        event_filter: EventFilter | None = None,
    ) -> Team:
        """Make each member a tool of `coordinator` (name, description, `{request}`)."""
        if not isinstance(coordinator, ChatModelAgent):
            shown = repr(coordinator)[:100]
            raise UsageError(
                f"Team.coordinator needs a ChatModelAgent coordinator (it gets the members as "
                f"tools), got {shown}"
            )
        team = cls(
            name=name or coordinator.name,
            description=description if description is not None else coordinator.description,
            members=members,
            coordinator=coordinator,
            max_depth=max_depth,
            total_max_steps=total_max_steps,
            total_token_budget=total_token_budget,
            event_filter=event_filter,
        )
        team._wired_lead = coordinator.with_tools([AgentTool(m) for m in team.members])
        return team

    @classmethod
    def swarm(
        cls,
        entry: Agent | str,
        members: Sequence[Agent],
        *,
        name: str | None = None,
        description: str | None = None,
        max_handoffs: int = 20,
        node_timeout: float | None = None,
        repetitive_handoff_window: int = 8,
        repetitive_handoff_min_unique: int = 3,
        inherit: InheritPolicy | InheritFn = Inherit.ALL,
        cross_request: bool = True,
        max_depth: int | None = None,
        total_max_steps: int | None = None,
        total_token_budget: int | None = None,
        event_filter: EventFilter | None = None,
    ) -> Team:
        """Let `members` hand off to each other, starting at `entry` (a member or its name)."""
        by_name = {getattr(m, "name", None): m for m in members}
        first = by_name.get(entry) if isinstance(entry, str) else entry
        if first is None or first not in members:
            raise UsageError(f"the swarm's entry {getattr(entry, 'name', entry)!r} is not a member")
        team = cls(
            name=name or first.name,
            description=description if description is not None else first.description,
            members=members,
            entry=first,
            max_depth=max_depth,
            total_max_steps=total_max_steps,
            total_token_budget=total_token_budget,
            event_filter=event_filter,
            max_handoffs=max_handoffs,
            node_timeout=node_timeout,
            repetitive_handoff_window=repetitive_handoff_window,
            repetitive_handoff_min_unique=repetitive_handoff_min_unique,
            inherit=inherit,
            cross_request=cross_request,
        )
        for member in team.members:
            if isinstance(member, ChatModelAgent) and len(team.members) > 1:
                transfer = _SwarmTransfer(team, member.name)
                team._wired[member.name] = member.with_tools([transfer], _roster(team, member.name))
        return team

    def __repr__(self) -> str:
        mode = "coordinator" if self.lead is not None else "swarm"
        return f"Team.{mode}({self.name!r}, {[m.name for m in self.members]})"

    def _enter(self, ctx: RunContext) -> RunContext:
        """Return the team's context: nesting level checked, its budget applied."""
        return ctx.for_team(
            self.name,
            max_depth=self.max_depth,
            max_steps=self.total_max_steps,
            max_tokens=self.total_token_budget,
        )

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Run the team: its coordinator, or its swarm from the active member."""
        try:
            inner = self._enter(ctx)
        except PlaitError as exc:
            yield ctx.event(error=exc)
            return
        lane = open_lane(inner, input)
        if self._wired_lead is not None:
            coordinator = self._wired_lead
            lead = lane if coordinator.name == self.name else lane.for_agent(coordinator.name)
            events: AsyncIterator[AgentEvent] = run_flow(coordinator, lead)
        else:
            events = _Swarm(self).run(lane)
        keep, paused = self.event_filter, False
        async with aclosing(events) as stream:  # type: ignore[type-var]
            async for event in stream:
                important = event.error is not None or is_pause(event, ctx.depth)
                paused = paused or is_pause(event, ctx.depth)
                if keep is None or important or keep(event):
                    yield event
        if not paused:
            close_lane(inner, lane)

    @property
    def _session_key(self) -> str:
        return f"swarm_active_agent:{self.name}"

    def _begin(self, ctx: RunContext) -> tuple[Agent, tuple[str, ...], int, deque[str], _Clock]:
        """Return where the swarm starts (member, run path, handoffs, recent targets, the
        member's clock): the paused member on a resume, else the entry or the member that
        answered last."""
        by_name = self._wired
        saved = ctx.take_state("swarm", SwarmRecord)
        if saved:
            active = saved.active
            if active not in by_name:
                raise ResumeError(
                    f"the checkpoint names agent '{active}', which team '{self.name}' no "
                    f"longer has; its members are: {', '.join(by_name)}",
                    team=self.name,
                    agent_name=active,
                    members=list(by_name),
                )
            window = deque(saved.window, maxlen=self.repetitive_handoff_window)
            return by_name[active], tuple(saved.path), saved.handoffs, window, _Clock(saved.elapsed)
        member = by_name[(self.entry or self.members[0]).name]
        last = ctx.session_values.get(self._session_key)
        if self.cross_request and last in by_name:
            member = by_name[last]
        path = (*ctx.run_path, member.name)
        return member, path, 0, deque(maxlen=self.repetitive_handoff_window), _Clock()

    def _guard(
        self,
        source: str,
        target: Agent | None,
        name: str,
        handoffs: int,
        window: deque[str],
    ) -> PlaitError | None:
        if target is None:
            return UsageError(f"Transfer failed: target agent '{name}' not found (from '{source}')")
        if handoffs + 1 > self.max_handoffs:
            return MaxHandoffsExceeded(
                f"Transfer rejected: max handoffs exceeded: {self.max_handoffs}",
                team=self.name,
                limit=self.max_handoffs,
            )
        recent = [*window, target.name][-self.repetitive_handoff_window :]
        full = self.repetitive_handoff_window and len(recent) >= self.repetitive_handoff_window
        if full and len(set(recent)) < self.repetitive_handoff_min_unique:
            return RepetitiveHandoffError(
                f"Transfer rejected: repetitive handoff detected: the last {len(recent)} "
                f"handoffs went to only {sorted(set(recent))}",
                team=self.name,
                window=recent,
            )
        return None

    async def _handoff_input(
        self, source: Agent, target: Agent, transfer: TransferToAgentAction, ctx: RunContext
    ) -> list[Message]:
        """What the target sees: the inherited history, then the handoff message."""
        records = [(author, await variant.get_message()) for author, variant in ctx.history]
        run_input = [(None if a == USER else a, m) for a, m in ctx.root_records]
        history = History([*run_input, *records])
        model = source.model if isinstance(source, ChatModelAgent) else None
        kept = await inherit(
            self.inherit,
            history,
            source.name,
            target.name,
            model,
            lambda reply: ctx.record_model_call(reply.usage),
        )
        if transfer.message:
            return [*kept, Message.user(transfer.message)]
        if not kept:  # nothing inherited and no message: the user's request
            users = [m for m in ctx.root_input if m.role == "user"]
            return users[-1:]
        return kept

    async def _timed(
        self, member: Agent, agent_input: AgentInput, ctx: RunContext, clock: _Clock
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run a member, ending it with `NodeTimeout` when it runs past `node_timeout`
        (counting the time it ran before a pause, not the time the run was paused)."""
        events = enter(member, agent_input, ctx)
        clock.start()
        if self.node_timeout is None:
            async with aclosing(events):
                async for event in events:
                    yield event
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.node_timeout - clock.base
        async with aclosing(events):
            while True:
                try:
                    event = await asyncio.wait_for(anext(events), deadline - loop.time())
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    yield ctx.event(
                        error=NodeTimeout(
                            f"member '{member.name}' of team '{self.name}' ran longer than "
                            f"node_timeout={self.node_timeout}s",
                            team=self.name,
                            agent_name=member.name,
                            limit=self.node_timeout,
                        )
                    )
                    return
                yield event


class _Swarm(HandoffLoop):
    """A swarm's handoff loop: guards, a handoff log, inherited history, node timeouts."""

    def __init__(self, team: Team) -> None:
        self.team = team
        self.handoffs = 0
        self.window: deque[str] = deque()
        self.clock = _Clock()
        self.steps = self.tokens = 0

    def begin(self, ctx: RunContext) -> Current:
        member, path, self.handoffs, self.window, self.clock = self.team._begin(ctx)
        mctx = ctx.for_agent(member.name, run_path=path, address=ctx.address)
        return Current(member, mctx, ctx.input_for(member.name))

    def keep(self, entry: RunContext, current: Current) -> None:
        record = SwarmRecord.model_construct(
            active=current.agent.name,
            path=list(current.ctx.run_path),
            handoffs=self.handoffs,
            window=list(self.window),
            messages=current.messages,
        )
        entry.save_state("swarm", functools.partial(self.clock.stamp, record))
        self.steps, self.tokens = entry.model_calls, entry.usage.total_tokens

    def step(self, current: Current) -> AsyncIterator[AgentEvent]:
        messages = current.messages or []
        agent_input = AgentInput(messages=messages, enable_streaming=current.ctx.enable_streaming)
        return self.team._timed(current.agent, agent_input, current.ctx, self.clock)

    async def finish(self, entry: RunContext, current: Current, turn: Turn) -> list[AgentEvent]:
        """Close the handoff chain with an entry to `END` (the member's answer as its
        message); on an answer (not an exit) drop the record and note the active member."""
        answer = "" if turn.last is None else (await turn.last.get_message()).content.strip()
        log = HandoffLog(
            timestamp=entry.ids.now(),
            from_agent=current.agent.name,
            to_agent=END,
            message=_clip(answer),
            step_count=entry.model_calls - self.steps,
            tokens_used=entry.usage.total_tokens - self.tokens,
        )
        if not turn.exited:
            entry.drop_state("swarm")
            if self.team.cross_request:
                entry.session_values[self.team._session_key] = current.agent.name
        return [dataclasses.replace(current.ctx.event(), handoff=log)]

    async def follow(
        self, entry: RunContext, current: Current, turn: Turn
    ) -> tuple[Current, list[AgentEvent]]:
        transfer, member, team = turn.transfer, current.agent, self.team
        assert transfer is not None
        target = team._wired.get(transfer.dest_agent_name)
        error = team._guard(
            member.name, target, transfer.dest_agent_name, self.handoffs, self.window
        )
        if error is not None:
            raise error
        assert target is not None
        self.handoffs += 1
        self.window.append(target.name)
        log = HandoffLog(
            timestamp=entry.ids.now(),
            from_agent=member.name,
            to_agent=target.name,
            message=transfer.message,
            reason=await _reason(transfer, turn.said),
            step_count=entry.model_calls - self.steps,
            tokens_used=entry.usage.total_tokens - self.tokens,
        )
        handoff = dataclasses.replace(current.ctx.event(), handoff=log)
        messages = await team._handoff_input(member, target, transfer, entry)
        self.clock = _Clock()
        path = (*current.ctx.run_path, target.name)
        tctx = entry.for_agent(target.name, run_path=path, address=entry.address)
        return Current(target, tctx, messages), [handoff]


class _Clock:
    """How long the active member has run, across the pauses of the run."""

    __slots__ = ("base", "started")

    def __init__(self, base: float = 0.0) -> None:
        self.base = base  # seconds it ran before the run was last saved and resumed
        self.started: float | None = None

    def start(self) -> None:
        self.started = time.monotonic()

    def stamp(self, record: SwarmRecord) -> SwarmRecord:
        """Return the swarm's record with the member's running time so far."""
        ran = 0.0 if self.started is None else time.monotonic() - self.started
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
