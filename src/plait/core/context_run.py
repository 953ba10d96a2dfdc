"""What a run context reads of the whole run: its session values and state, usage, run-wide
values (`keep_run_value`), and the team budgets it charges. `RunValues` is a base of `Frame`;
the run's counters, options and ids are read on `frame.run` (the `RunState`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from plait.core.custom import custom_record, load_custom, save_custom
from plait.core.run_state import RunState
from plait.messages import Usage

__all__ = ["RunValues"]

_RUN_VALUES = "run"  # where `keep_run_value` keeps its values: the address of no agent


class RunValues:
    """Read and count what the whole run holds, from a context's place."""

    __slots__ = ()

    agent_name: str
    address: str
    tool_call_id: str | None
    run: RunState
    _budgets: tuple[str, ...]

    @property
    def session_values(self) -> dict[str, Any]:
        """Return the run's session values (shared by every agent of the run)."""
        return self.run.session_values

    @property
    def state(self) -> dict[str, Any]:
        """Return the team-shared state of the run."""
        return self.run.state

    @property
    def usage(self) -> Usage:
        """Return the tokens spent by every model call of the run so far."""
        return Usage(input_tokens=self.run.input_tokens, output_tokens=self.run.output_tokens)

    @property
    def local_state(self) -> dict[str, Any]:
        """Return this agent's own state: kept across its turns, not shared with others."""
        return self.run.local.setdefault(self.agent_name, {})

    @property
    def session_id(self) -> str | None:
        """Return the session the run belongs to, if any."""
        return self.run.session_id

    @property
    def checkpoint_id(self) -> str | None:
        """Return the id this run is saved under when it pauses, or the id it resumes (None
        for a run without a store)."""
        return self.run.checkpoint_id

    @property
    def requests(self) -> int:
        """Return how many model calls the run's agents have sent so far (in `before_model`,
        the call about to be sent is not counted yet); counted across pauses."""
        return self.run.requests

    @property
    def tool_calls(self) -> int:
        """Return how many tool calls of the run are running or done (one that paused is
        counted when it runs again; in `before_tool`, the call about to run is not counted
        yet); counted across pauses."""
        return self.run.tool_calls

    @property
    def idempotency_key(self) -> str | None:
        """Inside a tool call, return a key stable for that call across pauses, resumes,
        crashes and workers (from the run's root id and the call's address, which holds
        its tool-call id); None outside a tool call."""
        return None if self.tool_call_id is None else self.run.key_of(self.address)

    @property
    def metadata(self) -> Mapping[str, Any]:
        """Return the run's metadata, read-only (the runner's, saved with every checkpoint)."""
        return MappingProxyType(self.run.metadata)

    def keep_run_value(self, key: str, value: Any) -> None:
        """Keep a JSON-able value for the whole run under `key`: saved with every checkpoint
        and seen again (`run_value`) by the run that resumes it. No agent sees it (a
        process-wide hook keeps its own here, such as tracing's root span)."""
        save_custom(custom_record(self.run, _RUN_VALUES), key, value)

    def run_value(self, key: str) -> Any:
        """Return the value kept under `key` with `keep_run_value` (by this run, or by the run
        it resumes), or None."""
        return load_custom(custom_record(self.run, _RUN_VALUES), key)

    @property
    def extras(self) -> dict[str, Any]:
        """Return what hooks keep for this run while it lives (never saved), each under a key
        of its own."""
        run = self.run
        if run.extras is None:
            run.extras = {}
        return run.extras

    # --- budgets ----------------------------------------------------------------------------

    def record_model_call(self, usage: Usage | None) -> None:
        """Count one model call and its usage towards the run's totals and team budgets.

        Raise `TokenBudgetExceeded` when a team's token budget is now exceeded.
        """
        if usage is None and not self._budgets:
            self.run.model_calls += 1  # all there is to count
        else:
            self.run.charge(self._budgets, usage)

    @property
    def under_budgets(self) -> bool:
        """Whether team budgets (steps, tokens) apply here."""
        return bool(self._budgets)

    def check_steps(self) -> None:
        """Raise `MaxStepsExceeded` if one more model call would break a team's budget."""
        self.run.check_steps(self._budgets)
