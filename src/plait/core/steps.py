"""What a run does next: one vocabulary of steps, each carrying its data.

Every loop of plait decides its next step with these: the ReAct loop of a `ChatModelAgent`
(`CallModel`, `RunTools`, then `Final`, `Transfer`, `Pause` or `Fail`), the handoff loop of
a flow or a swarm (what an agent's turn came to: `Transfer`, `Final`, `Pause` or `Fail`),
the workflows (what a child came to) and the state graph (the next nodes, `RunNodes`, until
`Final`). So one `match` shows how a run goes on:

    match step:
        case CallModel():          ask the model (the messages are the loop's)
        case RunTools(calls):      run the model's tool calls
        case RunNodes(nodes):      run a graph's next super-step
        case Transfer(target):     hand the turn to another agent
        case Final(message):       the agent answered (or a tool's result ended its turn)
        case Pause(interrupts):    something paused: the run saves a checkpoint
        case Fail(error):          an error (or a stop at a safe point) ends the run
"""

from __future__ import annotations

from dataclasses import dataclass

from plait.errors import PlaitError
from plait.events import InterruptCtx, TransferToAgentAction
from plait.messages import Message, ToolCall

__all__ = [
    "CALL_MODEL",
    "CallModel",
    "Fail",
    "Final",
    "Pause",
    "RunNodes",
    "RunTools",
    "Step",
    "Transfer",
]


@dataclass(frozen=True, slots=True)
class CallModel:
    """Ask the model for its next reply."""


@dataclass(frozen=True, slots=True)
class RunTools:
    """Run the tool calls of the model's last reply."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class RunNodes:
    """Run a state graph's next super-step: these nodes, concurrently."""

    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Transfer:
    """Hand the turn to another agent (`target`), as the transfer asked."""

    target: str
    transfer: TransferToAgentAction | None = None


@dataclass(frozen=True, slots=True)
class Final:
    """The agent's turn is over with an answer (None: it ended without one)."""

    message: Message | None = None


@dataclass(frozen=True, slots=True)
class Pause:
    """Something paused on these interrupts; the run saves a checkpoint."""

    interrupts: tuple[InterruptCtx, ...]


@dataclass(frozen=True, slots=True)
class Fail:
    """The run ends with `error` (None: its last event, a stop, says why already)."""

    error: PlaitError | None = None


#: One step of a run.
Step = CallModel | RunTools | RunNodes | Transfer | Final | Pause | Fail

#: The one `CallModel` (it carries nothing).
CALL_MODEL = CallModel()
