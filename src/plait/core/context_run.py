"""What a run context reads of the whole run: its session values and state, usage and
counters, options and run-wide values (`keep_run_value`), and the team budgets it charges.
`RunValues` is a base of `RunContext`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from plait.core.custom import custom_record, load_custom, save_custom
from plait.core.hooks import HookChain
from plait.core.run_state import IdSource, Interceptor, RunState, SavedOptions
from plait.messages import Usage

__all__ = ["RunValues"]

_RUN_VALUES = "run"  # where `keep_run_value` keeps its values: the address of no agent


class RunValues:
    """Read and count what the whole run holds, from a context's place."""

    __slots__ = ()

    agent_name: str
    address: str
    tool_call_id: str | None
    _run: RunState
    _budgets: tuple[str, ...]

    @property
    def session_values(self) -> dict[str, Any]:
        """Return the run's session values (shared by every agent of the run)."""
        return self._run.session_values

    @property
    def state(self) -> dict[str, Any]:
        """Return the team-shared state of the run."""
        return self._run.state

    @property
    def usage(self) -> Usage:
        """Return the tokens spent by every model call of the run so far."""
        return Usage(input_tokens=self._run.input_tokens, output_tokens=self._run.output_tokens)

    @property
    def model_calls(self) -> int:
        """Return how many model calls the run has made so far."""
        return self._run.model_calls

    @property
    def requests(self) -> int:
        """Return how many model calls agents of the run have sent so far."""
        return self._run.requests

    @property
    def tool_calls(self) -> int:
        """Return how many tool calls of the run have run or are running (one that paused
        counts when it runs again)."""
        return self._run.tool_calls

    @property
    def local_state(self) -> dict[str, Any]:
        """Return this agent's own state: kept across its turns, not shared with others."""
        return self._run.local.setdefault(self.agent_name, {})

    @property
    def all_local_state(self) -> dict[str, dict[str, Any]]:
        """Return every agent's own state, by agent name (what a session keeps)."""
        return self._run.local

    @property
    def enable_streaming(self) -> bool:
        """Whether model output streams in this run."""
        return self._run.enable_streaming

    @property
    def session_id(self) -> str | None:
        """Return the session the run belongs to, if any."""
        return self._run.session_id

    @property
    def idempotency_key(self) -> str | None:
        """Inside a tool call, return a key stable for that call across pauses, resumes,
        crashes and workers (from the run's root id and the call's address, which holds
        its tool-call id); None outside a tool call."""
        return None if self.tool_call_id is None else self._run.key_of(self.address)

    @property
    def ids(self) -> IdSource:
        """Return the run's source of ids and timestamps."""
        return self._run.ids

    @property
    def effects(self) -> Any:
        """Return what the gates of this run's tool calls use (None outside a runner)."""
        return self._run.effects

    @property
    def hooks(self) -> HookChain:
        """Return the runner's hooks of this run."""
        return self._run.hooks

    @property
    def run_options(self) -> SavedOptions | None:
        """Return the run's per-run options (None: there are none)."""
        return self._run.options

    @property
    def metadata(self) -> Mapping[str, Any]:
        """Return the run's metadata, read-only (the runner's, saved with every checkpoint)."""
        return MappingProxyType(self._run.metadata)

    def keep_run_value(self, key: str, value: Any) -> None:
        """Keep a JSON value for the whole run: saved with every checkpoint and seen again
        (`run_value`) by the run that resumes it. No agent sees it (plait's own
        process-wide hooks keep theirs here)."""
        save_custom(custom_record(self._run, _RUN_VALUES), key, value)

    def run_value(self, key: str) -> Any:
        """Return the value kept under `key` with `keep_run_value` (by this run, or by the run
        it resumes), or None."""
        return load_custom(custom_record(self._run, _RUN_VALUES), key)

    @property
    def checkpoint_id(self) -> str | None:
        """Return the id the run was started under or resumes (None: it was given none; a
        first pause then makes one, which `on_pause` tells)."""
        return self._run.checkpoint_id

    @property
    def interceptor(self) -> Interceptor | None:
        """Return what answers this run's model and tool calls instead of the agents' own
        models and tools (a cassette), or None."""
        return self._run.interceptor

    def set_interceptor(self, interceptor: Interceptor | None) -> None:
        """Make `interceptor` answer the model and tool calls of the whole run."""
        self._run.interceptor = interceptor

    @property
    def extras(self) -> dict[str, Any]:
        """Return what plait's process-wide hooks keep for this run while it lives (never
        saved), by hook."""
        run = self._run
        if run.extras is None:
            run.extras = {}
        return run.extras

    # --- budgets ----------------------------------------------------------------------------

    def record_model_call(self, usage: Usage | None) -> None:
        """Count one model call and its usage towards the run's totals and team budgets.

        Raise `TokenBudgetExceeded` when a team's token budget is now exceeded.
        """
        if usage is None and not self._budgets:
            self._run.model_calls += 1  # all there is to count
        else:
            self._run.charge(self._budgets, usage)

    def run_state(self) -> RunState:
        """Return the state of the whole run (plait's own agents read its flags and counters
        directly on their hot paths)."""
        return self._run

    @property
    def under_budgets(self) -> bool:
        """Whether team budgets (steps, tokens) apply here."""
        return bool(self._budgets)

    def count_request(self) -> None:
        """Count one model call an agent sends now."""
        self._run.requests += 1

    def count_tool_call(self, delta: int = 1) -> None:
        """Count one tool call that starts now (`delta=-1`: one that paused, uncounted)."""
        self._run.tool_calls += delta

    def check_steps(self) -> None:
        """Raise `MaxStepsExceeded` if one more model call would break a team's budget."""
        self._run.check_steps(self._budgets)

    def count_transfer(self) -> None:
        """Count one transfer between agents; raise `MaxHandoffsExceeded` past the runner's
        `max_transfers`."""
        self._run.count_transfer()
