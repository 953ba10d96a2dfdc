"""Time travel: the step snapshots a run keeps with `durability="step"`, listed and forked.

Every step a run saves under its checkpoint id `<id>` is also kept as a snapshot, the
checkpoint of that step under `<id>.step-<n>` (status "done": it is read, never resumed),
and listed in one more record, the run's history `<id>.history`: for each kept step its
number, the agent that took it, the last event before it and the session values at it. The
history holds the last `keep_history` steps (the runner's option, 100 by default); older
snapshots are deleted as new ones are kept. Every record is written with the checkpoint's
ttl, so the history expires with the run. Only the store's checkpoint operations are used
(`get`, `put`, `delete`), so every store, and every wrapper of one, keeps histories.

The snapshot is written before the history that lists it, and a snapshot leaves the store
only after the history stopped listing it, so a history never names a missing snapshot
(short of its ttl).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import to_json

from plait._util.json import JSONMixin, dump_plain, first_problem, json_bytes, load_plain
from plait._util.record import record
from plait.core.checkpoint import Checkpoint
from plait.errors import CheckpointCorrupt, CheckpointNotFound, UsageError
from plait.events import AgentEvent, AgentOutput, event_json_bytes
from plait.stores.base import CheckpointWrite, GuardedStore

__all__ = [
    "HISTORY_FORMAT",
    "StepLog",
    "StepSnapshot",
    "check_keep_history",
    "find_step",
    "forget_history",
    "history_id",
    "read_history",
    "step_id",
]

HISTORY_FORMAT = "plait.history"
HISTORY_VERSION = 1


@record
class StepSnapshot(JSONMixin):
    """One kept step of a run (see `Runner.history`).

    `step` numbers the steps saved under the run's checkpoint id, from 1 (each one more than
    the one before); `agent` is the name of the agent that took the step; `event` is the
    last event the run emitted before it (None when there was none); `session_values` are
    the run's session values at that step, and `state` its team-shared state (`ctx.state`),
    as JSON.
    """

    step: int
    agent: str
    event: AgentEvent | None = None
    session_values: dict[str, Any] = dataclasses.field(default_factory=dict)
    state: dict[str, Any] = dataclasses.field(default_factory=dict)


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: int
    agent: str
    event: dict[str, Any] | None = None
    session_values: dict[str, Any] = {}
    state: dict[str, Any] = {}


class _History(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["plait.history"]
    version: Literal[1]
    steps: list[_Entry]


def history_id(checkpoint_id: str) -> str:
    """Return the id of the record listing the kept steps of the run `checkpoint_id`."""
    return f"{checkpoint_id}.history"


def step_id(checkpoint_id: str, step: int) -> str:
    """Return the id of the snapshot of step `step` of the run `checkpoint_id`."""
    return f"{checkpoint_id}.step-{step}"


def check_keep_history(keep_history: object) -> int:
    """Return `keep_history` if it is an int >= 0 (0: no history is kept).

    Raises:
        UsageError: It is not an int, or is negative.
    """
    if isinstance(keep_history, bool) or not isinstance(keep_history, int) or keep_history < 0:
        raise UsageError(
            f"keep_history must be an int >= 0 (0 keeps no history), got {keep_history!r}"
        )
    return keep_history


async def _read_entries(store: GuardedStore, checkpoint_id: str) -> list[_Entry]:
    """Return the history entries kept for `checkpoint_id`, oldest first ([]: none)."""
    found = await store.get_checkpoint(history_id(checkpoint_id))
    if found is None:
        return []
    try:
        return _History.model_validate_json(found.data).steps
    except ValidationError as exc:
        where, problem = first_problem(exc)
        raise CheckpointCorrupt(
            f"the history of checkpoint '{checkpoint_id}' is damaged at {where}: {problem}"
        ) from None


async def read_history(store: GuardedStore, checkpoint_id: str) -> list[StepSnapshot]:
    """Return the kept steps of the run `checkpoint_id`, oldest first ([]: none kept)."""
    entries = await _read_entries(store, checkpoint_id)
    return [_snapshot(entry, checkpoint_id) for entry in entries]


def _snapshot(entry: _Entry, checkpoint_id: str) -> StepSnapshot:
    event = None
    if entry.event is not None:
        try:
            event = load_plain(AgentEvent, entry.event)
        except ValidationError as exc:
            raise CheckpointCorrupt(
                f"the history of checkpoint '{checkpoint_id}' has a damaged event at step "
                f"{entry.step}: {exc.errors()[0]['msg']}"
            ) from None
    return StepSnapshot(
        step=entry.step,
        agent=entry.agent,
        event=event,
        session_values=dict(entry.session_values),
        state=dict(entry.state),
    )


async def find_step(
    store: GuardedStore, checkpoint_id: str, step: int
) -> tuple[StepSnapshot, Checkpoint]:
    """Return the kept step `step` of the run `checkpoint_id` and its checkpoint.

    Raises:
        CheckpointNotFound: The run keeps no such step (or it expired).
    """
    entries = await _read_entries(store, checkpoint_id)
    entry = next((e for e in entries if e.step == step), None)
    found = None if entry is None else await store.get_checkpoint(step_id(checkpoint_id, step))
    if entry is None or found is None:
        kept = f"steps {entries[0].step} to {entries[-1].step}" if entries else "no steps"
        raise CheckpointNotFound(
            f"checkpoint '{checkpoint_id}' has no step {step} to fork from (it keeps {kept})"
        )
    snapshot = _snapshot(entry, checkpoint_id)
    return snapshot, Checkpoint.decode(found.data, step_id(checkpoint_id, step))


def encode_event(event: AgentEvent | None) -> dict[str, Any] | None:
    """Return `event` as JSON data; a custom value that is not JSON is kept as its repr."""
    if event is None:
        return None
    try:
        data: dict[str, Any] = dump_plain(event, AgentEvent)
    except Exception:
        output, action = event.output, event.action
        if output is not None and output.custom is not None:
            output = AgentOutput(message=output.message, custom=repr(output.custom))
        if action is not None and action.custom is not None:
            action = dataclasses.replace(action, custom=repr(action.custom))
        plain = dataclasses.replace(event, output=output, action=action)
        try:
            data = dump_plain(plain, AgentEvent)
        except Exception:
            data = dump_plain(dataclasses.replace(plain, output=None, action=None), AgentEvent)
    return data


def encode_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Return session values as JSON data (a value that is not JSON: its repr)."""
    try:
        plain: dict[str, Any] = dump_plain(dict(values), dict[str, Any])
    except Exception:
        plain = {}
        for key, value in values.items():
            try:
                plain[key] = dump_plain(value, Any)
            except Exception:
                plain[key] = repr(value)
    return plain


@dataclasses.dataclass(eq=False)
class StepLog:
    """The history one run keeps in `store` as it saves its steps (see the module's
    docstring): the last `keep` of them, each expiring after `ttl` seconds.

    `carry_on`: the steps continue the history already kept under the run's id (a resumed
    or forked run); otherwise they start a new one (from step 1).
    `keep_all`: no snapshot is ever deleted (`Runner(keep_steps=True)`).
    """

    store: GuardedStore
    keep: int
    ttl: float | None
    _: dataclasses.KW_ONLY
    carry_on: bool
    keep_all: bool = False
    _kept: list[tuple[int, bytes]] | None = dataclasses.field(default=None, init=False)
    _last: int = dataclasses.field(default=0, init=False)

    @property
    def active(self) -> bool:
        """Whether steps are kept at all (as history, or as snapshots)."""
        return self.keep > 0 or self.keep_all

    async def _load(self, checkpoint_id: str) -> list[tuple[int, bytes]]:
        """Return the kept steps (number, the history entry's JSON), read on the first."""
        if self._kept is not None:
            return self._kept
        entries = []
        if self.carry_on:
            entries = await _read_entries(self.store, checkpoint_id)
        self._last = entries[-1].step if entries else 0
        self._kept = [(entry.step, _entry_json(entry.model_dump())) for entry in entries]
        return self._kept

    async def step(
        self,
        checkpoint_id: str,
        data: bytes,
        agent: str,
        event: AgentEvent | None,
        values: Mapping[str, Any],
        state: Mapping[str, Any] | None = None,
    ) -> tuple[list[CheckpointWrite], list[str]]:
        """Take the step checkpoint `data` as the run's next step (with the session values
        and team state at it); return the records to write for it (its snapshot, then the
        history listing it) and the snapshots to delete once they are written."""
        kept = await self._load(checkpoint_id)
        step = self._last = self._last + 1
        writes: list[CheckpointWrite] = [(step_id(checkpoint_id, step), data, "done")]
        if not self.keep:
            return writes, []
        kept.append((step, _step_json(step, agent, event, values, state or {})))
        dropped = kept[: max(0, len(kept) - self.keep)]
        del kept[: len(dropped)]
        writes.append((history_id(checkpoint_id), _join([text for _, text in kept]), "done"))
        if self.keep_all:
            return writes, []
        return writes, [step_id(checkpoint_id, old) for old, _ in dropped]


def _entry_json(entry: dict[str, Any]) -> bytes:
    """Return one history entry (`_Entry`'s fields, as JSON data) as the history document
    holds it."""
    return to_json(entry)


def _step_json(
    step: int,
    agent: str,
    event: AgentEvent | None,
    values: Mapping[str, Any],
    state: Mapping[str, Any],
) -> bytes:
    """Return the history entry of a step as `_entry_json` would, each part encoded to JSON
    at once (the slower `encode_event`/`encode_values` only for a part that is not JSON)."""
    if event is None:
        event_json = b"null"
    else:
        try:
            event_json = event_json_bytes(event)  # (often encoded already, for its stream)
        except Exception:
            event_json = to_json(encode_event(event))
    parts = [b'{"step":%d,"agent":' % step, to_json(agent), b',"event":', event_json]
    for key, mapping in ((b',"session_values":', values), (b',"state":', state)):
        try:
            parts += (key, json_bytes(dict(mapping), dict[str, Any]))
        except Exception:
            parts += (key, to_json(encode_values(mapping)))
    return b"".join(parts) + b"}"


def _join(texts: list[bytes]) -> bytes:
    """Return the history document listing the entries `texts` (each as `_entry_json`)."""
    head = f'{{"format":"{HISTORY_FORMAT}","version":{HISTORY_VERSION},"steps":['.encode()
    return head + b",".join(texts) + b"]}"


async def forget_history(store: GuardedStore, checkpoint_id: str) -> None:
    """Delete the history kept under `checkpoint_id` (an id a new run reuses)."""
    entries = await _read_entries(store, checkpoint_id)
    for entry in entries:
        await store.delete_checkpoint(step_id(checkpoint_id, entry.step))
    if entries:
        await store.delete_checkpoint(history_id(checkpoint_id))


async def seed_fork(
    store: GuardedStore,
    checkpoint_id: str,
    snapshot: StepSnapshot,
    data: bytes,
    ttl: float | None,
) -> None:
    """Start the history of a forked run `checkpoint_id`: the step it was forked from
    (with its edited session values), kept under the fork's id with its number."""
    step = snapshot.step
    await forget_history(store, checkpoint_id)
    await store.put_checkpoint(step_id(checkpoint_id, step), data, status="done", ttl=ttl)
    entry = _Entry(
        step=step,
        agent=snapshot.agent,
        event=encode_event(snapshot.event),
        session_values=encode_values(snapshot.session_values),
        state=encode_values(snapshot.state),
    )
    await store.put_checkpoint(
        history_id(checkpoint_id), _join([_entry_json(entry.model_dump())]), status="done", ttl=ttl
    )
