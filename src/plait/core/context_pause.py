"""How a run context pauses, stops and saves: `interrupt` and what a resume tells
(`resume_info`), the run's stop between steps (`safe_point`) and that of tool calls in flight
(`guard`, `cancelled`), and the records a pause or a step save snapshots at once (`keep_record`,
`save_state`). `PauseAndSave` is a base of `Frame`.
"""

from __future__ import annotations

from typing import Any, TypeVar

from plait.core.context_events import AgentEvents
from plait.core.custom import custom_record, load_custom, save_custom
from plait.core.resume import ResumeInfo
from plait.core.run_state import CallGuard, RunState
from plait.core.signal import raise_pause
from plait.errors import PlaitError, RunCancelled
from plait.events import AgentEvent, InterruptCtx

__all__ = ["UNREAD", "PauseAndSave"]

_T = TypeVar("_T")
UNREAD = object()  # a context's `resume_info`, not yet looked up


class PauseAndSave(AgentEvents):
    """Pause, stop and save at a context's place of the run."""

    __slots__ = ("_answered", "_call_guard", "_resume_info")

    address: str
    run: RunState
    _answered: list[Any] | None  # the answers this place's interrupts got, in order
    _call_guard: CallGuard | None  # the guard of the tool call running here
    _resume_info: object  # a ResumeInfo, None, or UNREAD (not read yet)

    # --- pausing and resuming ---------------------------------------------------------------

    def interrupt(self, info: Any = None, *, state: Any = None) -> Any:
        """Pause the run here, or return the data this point was resumed with."""
        run = self.run
        answered = self._answered
        if answered is None:
            answered = self._answered = []
        queue = run.resume_answers.get(self.address)
        if queue:
            value = queue.pop(0)
            answered.append(value)
            return value
        run.paused.user_states[self.address] = state
        run.paused.answers[self.address] = list(answered)
        raise_pause((InterruptCtx(id=run.ids.new_id(), address=self.address, info=info),))

    def waiting_answers(self) -> tuple[list[Any], str]:
        """Return the answers waiting for the interrupts at this place (a resumed run's,
        in order) and the run's root id (made now if needed): what a tool call run in
        another process needs to pause and resume as it would here."""
        run = self.run
        run.key_of(self.address)  # makes the root id on first use
        assert run.root_id is not None
        return list(run.resume_answers.get(self.address) or ()), run.root_id

    def interrupt_state(self) -> Any:
        """Return the `state` saved by the interrupt at this point, when resumed."""
        return self.run.resume_user_states.get(self.address)

    @property
    def paused(self) -> bool:
        """Whether an `interrupt()` here or below this place has paused the run (in
        `after_agent`: the agent paused rather than finished)."""
        address = self.address
        below = address + ";"
        return any(a == address or a.startswith(below) for a in self.run.paused.user_states)

    @property
    def resume_info(self) -> ResumeInfo | None:
        """Return how this run's resume concerns this agent or tool call (None: the run is
        not a resume); see `plait.resume`."""
        info = self._resume_info
        if info is UNREAD:
            points = self.run.resumed
            info = self._resume_info = None if points is None else points.info(self.address)
        return info  # type: ignore[return-value]

    def enter_resume(self, agent: object) -> None:
        """Fix the `resume_info` of `agent`, entering in this context (the kernel calls it)."""
        points = self.run.resumed
        if points is not None:
            self._resume_info = points.enter(self.address, agent)

    # --- stopping -------------------------------------------------------------------------

    @property
    def saves_steps(self) -> bool:
        """Whether this run saves a checkpoint at every safe point, or was asked to stop
        at the next one (components keep their records up to date only then)."""
        run = self.run
        return run.durability == "step" or run.cancel_requested

    @property
    def cancelled(self) -> bool:
        """Whether this work should stop: the run was asked to stop, or this tool call ran
        past its timeout or was abandoned (the run closed).

        A sync tool runs in a thread that cannot be killed: check this between steps of long
        work and return early. An async tool is stopped by cancellation instead.
        """
        guard = self._call_guard
        return self.run.cancel_requested or (guard is not None and guard.stopped)

    def guard(self, limit: float | None) -> CallGuard:
        """Return the guard this tool call runs in: it ends the call after `limit` seconds
        (None: no limit) or when the run is asked to stop (see `CallGuard`)."""
        self._call_guard = CallGuard(self.run, limit)
        return self._call_guard

    def stop(self, error: PlaitError | None = None) -> None:
        """Ask the run to stop at its next safe point, saved so that `resume` continues it
        (as a cancel does), ending with `error` (None: `RunCancelled`). In `before_model`
        the call is then not made: the resumed run makes it."""
        self.run.request_cancel(error)

    async def safe_point(self) -> AgentEvent | None:
        """Call between two steps of work, with this component's record up to date.

        With `durability="step"` the run's checkpoint is written here (the run goes on).
        When the run was asked to stop, it is saved and the event ending it is returned:
        yield it and return.
        """
        run = self.run
        if run.cancel_requested and run.saver is not None:
            return await run.saver("cancel", self)
        if run.cancel_requested:
            return self.event(error=run.stop_error or RunCancelled("the run was cancelled"))
        if run.durability == "step" and run.saver is not None:
            await run.saver("step", self)
        return None

    # --- records and saving -----------------------------------------------------------------

    def keep_record(self, kind: str, record: Any) -> None:
        """Keep this component's resume record (or a function returning it) in the run
        state; every pause and step save includes it until `drop_state`."""
        self.run.frames[(self.address, kind)] = record

    def keeps_state(self, *, besides: tuple[str, ...]) -> bool:
        """Whether a component at this place keeps a resume record (other than those of the
        kinds `besides`)."""
        return any(a == self.address and k not in besides for a, k in self.run.frames)

    def drop_record(self, kind: str) -> None:
        """Forget this component's record: it finished its work."""
        self.run.frames.pop((self.address, kind), None)

    def take_record(self, kind: str, tp: type[_T]) -> _T | None:
        """Return (once) the record of type `tp` this component saved when the run was saved,
        if this run resumes it; it stays this component's record until changed or dropped."""
        run = self.run
        if not run.restored:  # nothing (left) to resume: the common case
            return None
        return run.take_record(self.address, kind, tp)

    def save_state(self, key: str, value: Any) -> None:
        """Keep a JSON-able value (or a pydantic model) for this agent at this place of the
        run, across pauses and resumes; it is encoded now (`SerializationError` names the
        key and the place inside the value that cannot be)."""
        save_custom(custom_record(self.run, self.address), key, value)

    def load_state(self, key: str) -> Any:
        """Return the value saved under `key` at this place of the run, or None."""
        return load_custom(custom_record(self.run, self.address), key)
