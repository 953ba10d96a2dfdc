"""`Team`: several agents working as one — a coordinator with members as tools, or a swarm
of peers handing off to each other."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from typing import Any

from plait.agents.agent_tool import AgentTool
from plait.agents.chat_model import ChatModelAgent
from plait.agents.workflow import close_lane, open_lane
from plait.core.agent import Agent, AgentInput, require_agent, require_unique_names
from plait.core.agent_context import AgentContext
from plait.core.context import Frame, inside
from plait.core.kernel import is_pause, run_agent, run_loop
from plait.errors import MaxDepthExceeded, PlaitError, UsageError
from plait.events import AgentEvent
from plait.team.inherit import Inherit, InheritFn, InheritPolicy
from plait.team.swarm import Swarm, SwarmTransfer, reachable, roster

__all__ = ["Team"]

EventFilter = Callable[[AgentEvent], bool]


def _levels(agent: Any) -> int:
    """How many levels of teams `agent` holds, counting itself."""
    if not isinstance(agent, Team):
        return 0
    inner = [*agent.members, *([agent.lead] if agent.lead is not None else [])]
    return 1 + max((_levels(m) for m in inner), default=0)


class Team:
    """Several agents working as one `Agent`.

    Build one with `Team.coordinator(...)` (members become the coordinator's tools; `lead`
    is the coordinator) or `Team.swarm(...)` (peers hand off with `transfer_to_agent`;
    `entry` is the first member). A team can be a member of
    another team, an `AgentTool`, a graph node or a `Runner` root. Common options:
    `max_depth` (levels of teams that may nest, counting this one), `total_max_steps` (model
    calls across all levels), `total_token_budget` (tokens across all levels) and
    `event_filter` (drops member events before they go up; errors, pauses and the team's
    answer always pass).
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
        require_unique_names(self.members, f"team '{self.name}': members")
        if self.lead is not None and self.lead.name in {m.name for m in self.members}:
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
                transfer = SwarmTransfer(team, member)
                wired = member.with_tools([], roster(team, member.name), transfer=transfer)
                team._wired[member.name] = wired
        reachable(team)  # refuses two agents of one name below the members
        return team

    def __repr__(self) -> str:
        mode = "coordinator" if self.lead is not None else "swarm"
        return f"Team.{mode}({self.name!r}, {[m.name for m in self.members]})"

    def _enter(self, ctx: Frame) -> Frame:
        """Return the team's context: nesting level checked, its budget applied."""
        return ctx.for_team(
            self.name,
            max_depth=self.max_depth,
            max_steps=self.total_max_steps,
            max_tokens=self.total_token_budget,
        )

    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Run on `input` in `ctx` (see the class docstring)."""
        return self._events(input, inside(ctx))

    async def _events(self, input: AgentInput, ctx: Frame) -> AsyncGenerator[AgentEvent, None]:
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
            events: AsyncGenerator[AgentEvent, None] = run_agent(coordinator, lead)
        else:
            events = run_loop(Swarm(self), lane)
        paused = False
        async with aclosing(self._filtered(events, ctx.depth)) as stream:
            async for event in stream:
                paused = paused or is_pause(event, ctx.depth)
                yield event
        if not paused:
            close_lane(inner, lane)

    async def _filtered(
        self, events: AsyncGenerator[AgentEvent, None], depth: int
    ) -> AsyncGenerator[AgentEvent, None]:
        """Pass on the events `event_filter` keeps (errors and pauses always), and the
        team's answer: its last message at its own depth, yielded last if the filter dropped
        it, so a caller's tool result and the run's final output are still the answer."""
        keep = self.event_filter
        answer: AgentEvent | None = None  # the team's last own message, held back
        async with aclosing(events) as stream:
            async for event in stream:
                own = event.depth == depth and event.message is not None
                ends = event.error is not None or is_pause(event, depth)
                if keep is None or ends or keep(event):
                    if own or ends:
                        answer = None
                    yield event
                elif own:
                    answer = event
        if answer is not None:
            yield answer
