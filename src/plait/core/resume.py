"""How a resume concerns each agent: `ResumeInfo`, seen as `ctx.resume_info`.

In a resumed run every context (an agent's, or a tool call's) gets a `ResumeInfo`; in a run
that is not a resume, `ctx.resume_info` is None. With the interrupts of the resumed checkpoint
and the answers given:

- `was_interrupted`: an interrupt was raised here or below: this context's address is an
  interrupt's address, or a prefix of one (`agent:Seq` is above `agent:Seq;agent:Asker` and
  above `agent:Seq;agent:Asker;tool:approve:call_7`).
- `is_resume_target`: an interrupt raised exactly here (by the agent's own `run`, through
  `ctx.interrupt`, or, in a tool call's context, by that tool call) is answered by this
  resume. An agent whose tool paused is interrupted below, not the target: the tool call's
  context is.
- `interrupt_state`: the `state=` saved by the interrupt raised exactly here (else None).
- `data`: the answer, when this context is the target (else None).

An agent takes its `ResumeInfo` when it enters; if the same agent enters the same place again
later in the run (the next round of a loop), it was not interrupted there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from plait.events import InterruptCtx

__all__ = ["NOT_INTERRUPTED", "ResumeInfo", "ResumePoints"]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ResumeInfo:
    """How the resume of a run concerns one agent or tool call (see `plait.resume`)."""

    was_interrupted: bool
    is_resume_target: bool
    interrupt_state: Any = None
    data: Any = None


NOT_INTERRUPTED = ResumeInfo(was_interrupted=False, is_resume_target=False)
_BELOW = ResumeInfo(was_interrupted=True, is_resume_target=False)


class ResumePoints:
    """The interrupts a run resumes from: where each was raised, its state and its answer."""

    __slots__ = ("_addresses", "_answers", "_entered", "_states")

    def __init__(
        self,
        interrupts: Sequence[InterruptCtx],
        states: Mapping[str, Any],
        targets: Mapping[str, Any],
    ) -> None:
        self._addresses = frozenset(i.address for i in interrupts)
        self._states = dict(states)
        self._answers = {i.address: targets[i.id] for i in interrupts if i.id in targets}
        self._entered: set[tuple[str, int]] = set()

    def info(self, address: str) -> ResumeInfo:
        """Return how the resumed interrupts concern the context at `address`."""
        if address in self._addresses:
            return ResumeInfo(
                was_interrupted=True,
                is_resume_target=address in self._answers,
                interrupt_state=self._states.get(address),
                data=self._answers.get(address),
            )
        below = address + ";"
        if any(a.startswith(below) for a in self._addresses):
            return _BELOW
        return NOT_INTERRUPTED

    def enter(self, address: str, agent: object) -> ResumeInfo:
        """Return the info of `agent` entering at `address`: `info(address)` the first time
        it enters there in this run, `NOT_INTERRUPTED` after that."""
        key = (address, id(agent))
        if key in self._entered:
            return NOT_INTERRUPTED
        self._entered.add(key)
        return self.info(address)
