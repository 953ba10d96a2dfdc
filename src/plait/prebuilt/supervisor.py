"""`supervisor`: a supervisor agent that delegates to workers and always gets control back."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any, TypeVar

from plait.agents.flow import TRANSFER_TOOL, set_sub_agents
from plait.core.agent import Agent, AgentInput, require_agent
from plait.core.agent_context import AgentContext
from plait.core.context import Frame, inside
from plait.core.handoff import Turn
from plait.core.kernel import run_agent
from plait.events import AgentAction, AgentEvent, TransferToAgentAction
from plait.messages import Message, ToolCall

__all__ = ["supervisor"]

_S = TypeVar("_S")


class _ReportsBack:
    """Runs a worker (with its own transfers), then transfers back to its parent.

    Skipped when the worker exits, fails or pauses: the supervisor sees the worker's result
    and decides the next step.
    """

    records_history = True  # the worker's flow records its own messages

    def __init__(self, worker: Agent) -> None:
        self.worker = worker
        self.name = worker.name
        self.description = worker.description
        self.parent: Agent | None = None
        self.sub_agents: tuple[Agent, ...] = ()

    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Run on `input` in `ctx` (see the class docstring)."""
        return self._events(input, inside(ctx))

    async def _events(self, input: AgentInput, ctx: Frame) -> AsyncGenerator[AgentEvent, None]:
        """Run the worker, then hand control back to the supervisor."""
        turn = Turn()
        async with aclosing(run_agent(self.worker, ctx)) as events:
            async for event in events:
                turn.note(event, ctx, record=False)  # the worker's flow records its messages
                yield event
                if event.error is not None:
                    return
        if turn.exited or turn.paused or self.parent is None:
            return
        back = self.parent.name
        call_id = f"{TRANSFER_TOOL}_{back}"
        args = json.dumps({"agent_name": back})
        calling = ctx.event(
            message=Message.assistant(
                "", (ToolCall(id=call_id, name=TRANSFER_TOOL, arguments=args),)
            )
        )
        done = ctx.event(
            message=Message.tool(
                f"successfully transferred to agent [{back}]", call_id, name=TRANSFER_TOOL
            ),
            action=AgentAction(transfer_to_agent=TransferToAgentAction(dest_agent_name=back)),
        )
        for event in (calling, done):
            assert event.output is not None and event.output.message is not None
            ctx.lane_history.append((self.name, event.output.message))
            yield event


def supervisor(supervisor: _S, workers: Sequence[Any]) -> _S:
    """Make `supervisor` delegate to `workers` by transfer; return the supervisor.

    Each worker, when it finishes (unless it exits), transfers back to the supervisor
    automatically, so the supervisor sees the worker's result and decides what comes next.
    Workers may be any agents, including other supervisors.

    Raises:
        UsageError: `supervisor` or a worker is not an `Agent`.
    """
    boss = require_agent(supervisor, "supervisor: the supervisor")
    for i, worker in enumerate(workers):
        require_agent(worker, f"supervisor '{boss.name}': workers[{i}]")
    return set_sub_agents(supervisor, [_ReportsBack(w) for w in workers])
