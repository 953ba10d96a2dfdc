"""`Runner`: run an agent, stream its events, collect them, pause and resume.

The runner owns the edges of a run: it builds the root context, enters the root agent,
saves a checkpoint when the run pauses (always under a new id) or at each step
(`durability="step"`, under the run's own id, held by a lease while the run lives), retires
a resumed checkpoint for good, and writes the session turn when the run finishes.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from plait._util.json import json_mapping
from plait._util.sync import run_in_new_loop
from plait.agents.options import RunOption, RunOptions, check_options
from plait.capabilities.cassette import Cassette
from plait.capabilities.limits import UsageLimits
from plait.core.agent import Agent, is_agent
from plait.core.checkpoint import UNSET, Checkpoint
from plait.core.context import Frame
from plait.core.hooks import HookChain, Hooks, with_global
from plait.core.resume import ResumePoints
from plait.core.run_state import IdSource
from plait.errors import (
    CheckpointAlreadyResumed,
    CheckpointNotFound,
    ResumeError,
    UsageError,
)
from plait.events import AgentEvent, RunResult
from plait.messages import Message
from plait.run.after_run import AfterRun, AfterRunHooks, check_after_run
from plait.run.saves import RunSetup, check_lease
from plait.run.sessions import INDEX_ID, Sessions, SessionTurn, catalog_for
from plait.run.stream import Prepared, RunStream
from plait.run.time_travel import (
    StepSnapshot,
    check_keep_history,
    find_step,
    forget_history,
    read_history,
    seed_fork,
)
from plait.stores.base import MAX_RUN_ID_LENGTH, GuardedStore, Store, check_id, check_ttl
from plait.stores.memory import MemoryStore
from plait.tools.approvals import Approvals, check_answers, check_user
from plait.tools.effects import EffectRun

__all__ = ["EventFilter", "RunStream", "Runner"]

EventFilter = Callable[[AgentEvent], bool]


_P = ParamSpec("_P")


def _to_the_end(
    method: Callable[Concatenate[Runner, _P], RunStream], doc: str
) -> Callable[Concatenate[Runner, _P], RunResult]:
    """Return the `_sync` twin of a `Runner` method that starts a stream: it takes the same
    arguments, drains that stream in a new event loop and returns its `RunResult`."""
    name = method.__name__

    def twin(self: Runner, /, *args: _P.args, **kwargs: _P.kwargs) -> RunResult:
        stream: RunStream = getattr(self, name)(*args, **kwargs)
        return run_in_new_loop(stream.collect)

    twin.__name__ = f"{name}_sync"
    twin.__qualname__ = f"Runner.{name}_sync"
    twin.__doc__ = doc
    twin.__signature__ = inspect.signature(method).replace(  # type: ignore[attr-defined]
        return_annotation="RunResult"
    )
    return twin


class Runner:
    """Runs an agent: `run`/`query` stream events; `*_sync` collect them; `resume` continues
    a paused run.

    `store` keeps checkpoints of paused runs (default: an in-memory store owned by this runner,
    so a pause can be resumed in this process; use `SqliteStore`, `PostgresStore` or
    `RedisStore` to resume elsewhere or later). `event_filter(event)` returns True to keep an
    event for the caller. `max_transfers` bounds the transfers between agents of one run
    (`MaxHandoffsExceeded` past it). `lease` is how long (seconds) a running run's step
    checkpoint stays held after its last step. `ids` replaces the source of ids and timestamps;
    `hooks` (`plait.Hooks`) act at the run's seams, around every agent's own. With
    `keep_steps=True` every step checkpoint is also kept as a snapshot, `"<checkpoint
    id>.step-<n>"` (done: readable with `read_checkpoint`, not resumable), and none is ever
    deleted. With `durability="step"` the last `keep_history` (100) steps of each run are
    kept as its history: `history` lists them and `fork` starts a new run from one (0 keeps
    none; see `plait.time_travel`). `limits`
    (`plait.UsageLimits`) bound the model calls, tokens and tool calls of each run, counted
    across every agent and across pauses (a resume is bounded by the resuming runner's
    limits); past one the run ends with `UsageLimitExceeded`. `metadata` (str keys,
    JSON values) is saved with every checkpoint and seen read-only as `ctx.metadata` and in
    `RunResult.metadata`; a resume adds it over the metadata the checkpoint holds.
    `after_run` callables, `(ctx, result)` (coroutine functions or plain ones), run after
    each run that completes, not one that fails, is cancelled or pauses (see
    `plait.after_run`); `plait.memory.save_turns(service)` is one.
    `cassette` (`plait.cassette.Cassette`) records the model and tool calls of the runner's
    runs into a file, or answers them from one.
    `user` is whose runs these are, for standing approval rules (`approvals`, see
    docs/approvals.md; the server passes its authenticated user).
    `checkpoint_ttl` and `session_ttl` are the seconds checkpoints and sessions are kept (None:
    no expiry; else 0 < ttl <= `MAX_TTL`). `sessions` reads, lists and deletes the sessions the
    runner keeps (`plait.sessions.Sessions`). Ids are checked before any store is touched (rules
    in `plait.stores.base`): the ids of new runs and sessions are at most `MAX_RUN_ID_LENGTH`
    (256) characters. A bad ttl or id raises `UsageError` at once. Errors inside a run never
    raise out of the runner: they are the last event (and `RunResult.error`). Nothing bound to
    an event loop is kept between runs.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        store: Store | None = None,
        enable_streaming: bool = False,
        event_filter: EventFilter | None = None,
        durability: Literal["exit", "step"] = "exit",
        checkpoint_ttl: float | None = None,
        session_ttl: float | None = None,
        max_transfers: int | None = 20,
        lease: float = 60.0,
        ids: IdSource | None = None,
        hooks: Sequence[Hooks] = (),
        keep_steps: bool = False,
        metadata: Mapping[str, Any] | None = None,
        limits: UsageLimits | None = None,
        after_run: Sequence[AfterRun] = (),
        cassette: Cassette | None = None,
        keep_history: int = 100,
        user: str = "local",
    ) -> None:
        if not is_agent(agent):
            raise UsageError(f"Runner needs an Agent (name, description, run), got {agent!r}")
        if durability not in ("exit", "step"):
            raise UsageError("durability must be 'exit' or 'step'")
        if max_transfers is not None and max_transfers < 0:
            raise UsageError("max_transfers must be 0 or more, or None")
        if not lease > 0:
            raise UsageError("lease must be a positive number of seconds")
        check_ttl(checkpoint_ttl, "checkpoint_ttl")
        check_ttl(session_ttl, "session_ttl")
        self.agent = agent
        self.store: Store = store if store is not None else MemoryStore()
        self._store = GuardedStore(self.store)  # failures become StoreError
        self.enable_streaming = enable_streaming
        self.event_filter = event_filter
        self.durability = durability
        self.checkpoint_ttl = checkpoint_ttl
        self.session_ttl = session_ttl
        self.max_transfers = max_transfers
        self.lease = lease
        self.ids = ids if ids is not None else IdSource()
        self.limits = _of_type(limits, UsageLimits, "limits must be a plait.UsageLimits")
        self.cassette = _of_type(cassette, Cassette, "cassette must be a plait.cassette.Cassette")
        self.hooks = tuple(hooks)
        self.after_run = check_after_run(after_run)
        self._hooks = _hook_chain(self)
        self.keep_steps = keep_steps
        self.keep_history = check_keep_history(keep_history)
        self.metadata = _check_metadata(metadata)
        self._catalog = catalog_for(self.store)
        self.sessions = Sessions(self._store, self._catalog)
        self.user = check_user(user, "user")
        self.approvals = Approvals(self._store)
        self._active: weakref.WeakValueDictionary[str, RunStream] = weakref.WeakValueDictionary()

    async def read_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        """Return a checkpoint (or a kept step snapshot), decoded and validated."""
        check_id(checkpoint_id, "checkpoint_id")
        record = await self._store.get_checkpoint(checkpoint_id)
        if record is None:
            raise CheckpointNotFound(f"no checkpoint '{checkpoint_id}' in {self.store!r}")
        return Checkpoint.decode(record.data, checkpoint_id)

    async def history(self, checkpoint_id: str) -> list[StepSnapshot]:
        """Return the kept steps of the run saved under `checkpoint_id`, oldest first.

        With `durability="step"` each step the run saves under its checkpoint id is kept
        (the last `keep_history` of them, expiring with the checkpoint's ttl), also once the
        run has finished; a resumed run adds its steps to the history of the checkpoint it
        resumed. An unknown or expired checkpoint has `[]`.
        """
        check_id(checkpoint_id, "checkpoint_id")
        return await read_history(self._store, checkpoint_id)

    def fork(
        self,
        checkpoint_id: str,
        step: int,
        new_checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
    ) -> RunStream:
        """Start a new run from step `step` of the run saved under `checkpoint_id`.

        The new run continues as the original did after that step, with `session_values`
        merged over the step's values, and is saved under `new_checkpoint_id` (a fresh id
        when None; `stream.checkpoint_id` tells it). Its history starts with the step it was
        forked from (same number, its session values edited). The original's checkpoint and
        history are left as they are, and the fork adds no turn to the original's session.
        A refused fork raises when iterated: `CheckpointNotFound` for a step not kept (or
        expired), `ResumeError` for a run of another agent, `UsageError` for a
        `new_checkpoint_id` that holds a run not done. A bad id or step raises
        `UsageError` here.
        """
        check_id(checkpoint_id, "checkpoint_id")
        if isinstance(step, bool) or not isinstance(step, int):
            raise UsageError(f"step must be an int (a step's number), got {step!r}")
        if new_checkpoint_id is None:
            new_checkpoint_id = self.ids.new_id()
        check_id(new_checkpoint_id, "new_checkpoint_id", max_length=MAX_RUN_ID_LENGTH)
        if new_checkpoint_id == checkpoint_id:
            raise UsageError("a fork is saved under a new checkpoint id, not the original's")
        if session_values is not None and not isinstance(session_values, Mapping):
            raise UsageError(
                f"session_values must be a mapping, got {type(session_values).__name__}"
            )
        values = dict(session_values or {})
        prepare = functools.partial(
            self._prepare_fork, checkpoint_id, step, new_checkpoint_id, values
        )
        return RunStream(self._setup(), new_checkpoint_id, prepare, resumed_from=None, forked=True)

    async def _prepare_fork(
        self, checkpoint_id: str, step: int, new_id: str, values: dict[str, Any]
    ) -> Prepared:
        kept, checkpoint = await find_step(self._store, checkpoint_id, step)
        if checkpoint.agent != self.agent.name:
            raise ResumeError(
                f"checkpoint '{checkpoint_id}' belongs to agent '{checkpoint.agent}', "
                f"not '{self.agent.name}'"
            )
        record = await self._store.get_checkpoint(new_id)
        if record is not None and record.status != "done":
            raise UsageError(
                f"checkpoint id '{new_id}' holds a run that is {record.status}; "
                "fork under another id"
            )
        snapshot = checkpoint.snapshot()
        snapshot.session_values = {**snapshot.session_values, **values}
        snapshot.root_id = None  # the fork's tool calls have idempotency keys of their own
        if self.keep_history:
            data = Checkpoint.encode(
                snapshot,
                (),
                agent_name=checkpoint.agent,
                session_id=None,
                running=True,
                handoffs=checkpoint.handoffs,
            )
            seed = dataclasses.replace(kept, session_values=snapshot.session_values)
            await seed_fork(self._store, new_id, seed, data, self.checkpoint_ttl)
        options = RunOptions.of((), saved=checkpoint.run_options)
        ctx = self._context(
            checkpoint.root_input,
            dict(snapshot.session_values),
            checkpoint.streaming,
            options=options,
        )
        ctx.restore(snapshot, checkpoint.answers({}), ResumePoints((), snapshot.user_states, {}))
        return Prepared(self.agent, ctx, None, tuple(checkpoint.handoffs))

    def cancel(self, checkpoint_id: str) -> bool:
        """Ask the run with this checkpoint id to stop (callable from any task or thread).

        Its tool calls in flight are stopped at once (see `RunStream.cancel`); the run then
        ends with a `RunCancelled` error and a checkpoint that `resume` continues. Return
        False when no such run is active in this runner.
        """
        stream = self._active.get(checkpoint_id)
        if stream is None:
            return False
        stream.cancel()
        return True

    def run(
        self,
        messages: Sequence[Message],
        *,
        session_id: str | None = None,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
        options: Sequence[RunOption] | None = None,
    ) -> RunStream:
        """Start a run on `messages`; iterate the returned stream for its events.

        With `session_id`, the run continues that conversation (its history and values) and
        the turn is added to it when the run finishes. If the run pauses, it is saved under
        `checkpoint_id` (a fresh id when None; `stream.checkpoint_id` tells it); an id that
        holds a paused run is refused. Ids are 1 to 256 characters, with no control
        characters; a bad one raises `UsageError` here. `options` change what the run's
        `ChatModelAgent`s use (see `plait.RunOption`).
        """
        messages = _check_messages(messages)
        run_options = None if options is None else RunOptions.of(check_options(options))
        if session_id is not None:
            check_id(session_id, "session_id", max_length=MAX_RUN_ID_LENGTH)
        if checkpoint_id is not None:
            check_id(checkpoint_id, "checkpoint_id", max_length=MAX_RUN_ID_LENGTH)
        if session_id == INDEX_ID and self._catalog.key == INDEX_ID:
            raise UsageError(f"session id '{INDEX_ID}' is where the runner lists its sessions")
        values = dict(session_values) if session_values is not None else None
        if session_id is None and checkpoint_id is None:  # nothing to read first
            ctx = self._context(messages, values, self.enable_streaming, options=run_options)
            return RunStream(self._setup(), None, Prepared(self.agent, ctx), resumed_from=None)
        prepare = functools.partial(
            self._prepare_run, messages, session_id, checkpoint_id, values, run_options
        )
        return RunStream(self._setup(), checkpoint_id, prepare, resumed_from=None)

    def query(
        self,
        text: str,
        *,
        session_id: str | None = None,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
        options: Sequence[RunOption] | None = None,
    ) -> RunStream:
        """Start a run on one user message."""
        if not isinstance(text, str):
            raise UsageError(f"query takes a text, got {type(text).__name__}")
        return self.run(
            [Message.user(text)],
            session_id=session_id,
            checkpoint_id=checkpoint_id,
            session_values=session_values,
            options=options,
        )

    def resume(
        self,
        checkpoint_id: str,
        targets: Mapping[str, Any] | None = None,
        *,
        value: Any = UNSET,
        options: Sequence[RunOption] | None = None,
        approver: str = "local",
    ) -> RunStream:
        """Continue a paused run.

        `targets` maps interrupt ids to the data each `interrupt()` returns; `value=` is the
        data when exactly one interrupt is pending. Interrupts not targeted pause again with
        fresh ids. A run that pauses again is saved under a new checkpoint id; the resumed
        one is done for good. A rejected resume (unknown checkpoint or id, a value for
        several interrupts, already resumed, held by a live run) raises when iterated and
        leaves the checkpoint as it was. An id no store can hold raises `UsageError` here.
        `options` come after the saved per-run options (which hold): they add what is not
        saved (tools; a model object, which a run that had one needs again) or change the rest.
        `approver` is who answers the run's approvals (recorded in the audit log).
        """
        check_id(checkpoint_id, "checkpoint_id")
        given = check_options(options)
        setup = self._setup(check_user(approver, "approver"))
        prepare = functools.partial(
            self._prepare_resume, checkpoint_id, targets, value, given, setup.effects
        )
        return RunStream(setup, checkpoint_id, prepare, resumed_from=checkpoint_id)

    def _setup(self, approver: str = "local") -> RunSetup:
        """What each stream of this runner gets: where to save, and the run's options."""
        effects = EffectRun(
            self._store,
            user=self.user,
            approver=approver,
            ttl=self.checkpoint_ttl,
            agent=self.agent.name,
        )
        return RunSetup(
            agent_name=self.agent.name,
            store=self._store,
            active=self._active,
            event_filter=self.event_filter,
            durability=self.durability,
            ids=self.ids,
            hooks=with_global(self._hooks),  # the process-wide hooks outermost
            max_transfers=self.max_transfers,
            lease=self.lease,
            keep_steps=self.keep_steps,
            checkpoint_ttl=self.checkpoint_ttl,
            session_ttl=self.session_ttl,
            metadata=self.metadata,
            catalog=self._catalog,
            keep_history=self.keep_history,
            effects=effects,
        )

    def _context(
        self,
        messages: Sequence[Message],
        values: dict[str, Any] | None,
        streaming: bool,
        authors: Sequence[str] | None = None,
        *,
        options: RunOptions | None,
    ) -> Frame:
        return Frame.root(
            self.agent.name,
            messages,
            session_values=values,
            enable_streaming=streaming,
            authors=authors,
            options=options,
        )

    async def _prepare_run(
        self,
        messages: tuple[Message, ...],
        session_id: str | None,
        checkpoint_id: str | None,
        values: dict[str, Any] | None,
        options: RunOptions | None,
    ) -> Prepared:
        if checkpoint_id is not None:
            record = await self._store.get_checkpoint(checkpoint_id)
            if record is not None and record.status != "done":
                raise UsageError(
                    f"checkpoint id '{checkpoint_id}' holds a run that is {record.status}; "
                    "resume it, or start this run under another id"
                )
            if record is not None and self.durability == "step":
                await forget_history(self._store, checkpoint_id)  # a finished run's
        if session_id is None:
            ctx = self._context(messages, values, self.enable_streaming, options=options)
            return Prepared(self.agent, ctx)
        turn = await SessionTurn.load(self._store, session_id, messages)
        merged = {**turn.values, **(values or {})}
        authors, root_input = turn.root_input()
        ctx = self._context(root_input, merged, self.enable_streaming, authors, options=options)
        ctx.state.update(turn.state)
        ctx.run.local.update(turn.local)
        return Prepared(self.agent, ctx, turn)

    async def _lost_claim(self, checkpoint_id: str) -> ResumeError:
        """Return the error for a claim that did not hold: another resume won the race
        (`CheckpointAlreadyResumed`), or the checkpoint changed since it was read."""
        now = await self._store.get_checkpoint(checkpoint_id)
        won = CheckpointAlreadyResumed(
            f"checkpoint '{checkpoint_id}' was resumed by someone else at the same time"
        )
        if now is None or now.status != "pending":
            return won
        try:  # the winner's run may have saved a step over it already (live, or past its pause)
            check_lease(checkpoint := Checkpoint.decode(now.data, checkpoint_id))
        except CheckpointAlreadyResumed:
            return won
        if not checkpoint.interrupts:
            return won
        return ResumeError(
            f"checkpoint '{checkpoint_id}' changed while it was being resumed; try again"
        )

    async def _prepare_resume(
        self,
        checkpoint_id: str,
        targets: Mapping[str, Any] | None,
        value: Any,
        options: tuple[RunOption, ...],
        effects: EffectRun,
    ) -> Prepared:
        record = await self._store.get_checkpoint(checkpoint_id)
        if record is None:
            raise CheckpointNotFound(f"no checkpoint '{checkpoint_id}' in {self.store!r}")
        checkpoint = Checkpoint.decode(record.data, checkpoint_id)  # validated whole …
        if record.status != "pending":  # (its interrupts may be gone: its steps went on)
            raise CheckpointAlreadyResumed(
                f"checkpoint '{checkpoint_id}' was already resumed (it is {record.status}); "
                "a run that paused again did so under a new checkpoint id"
            )
        check_lease(checkpoint)  # a run going on from its step checkpoint has taken it
        by_id = checkpoint.targets(targets, value)
        states = checkpoint.user_states
        check_answers(checkpoint.interrupts, states, by_id, self.ids.now())
        effects.answering(checkpoint_id, checkpoint.interrupts)
        if checkpoint.agent != self.agent.name:
            raise ResumeError(
                f"checkpoint '{checkpoint_id}' belongs to agent '{checkpoint.agent}', "
                f"not '{self.agent.name}'"
            )
        run_options = RunOptions.resumed(options, checkpoint.run_options, checkpoint_id)
        if not await self._store.claim_checkpoint(checkpoint_id, record.version):  # … claim last
            raise await self._lost_claim(checkpoint_id)
        snapshot = checkpoint.snapshot()
        ctx = self._context(
            checkpoint.root_input,
            snapshot.session_values,
            checkpoint.streaming,
            options=run_options,
        )
        points = ResumePoints(checkpoint.interrupts, snapshot.user_states, by_id)
        ctx.restore(snapshot, checkpoint.answers(by_id), points)
        turn = None
        if checkpoint.session_id is not None:
            turn = SessionTurn(checkpoint.session_id, [], {}, [], checkpoint.session_turn)
        return Prepared(self.agent, ctx, turn, tuple(checkpoint.handoffs), record.data)

    run_sync = _to_the_end(
        run, "Run to the end in a new event loop and return the `RunResult` (never raises)."
    )
    query_sync = _to_the_end(
        query,
        "Run one user message to the end in a new event loop and return the `RunResult`.",
    )
    resume_sync = _to_the_end(
        resume,
        "Resume in a new event loop and return the `RunResult` (a rejected resume raises).",
    )


def _check_metadata(metadata: object) -> dict[str, Any]:
    """Return a copy of the runner's `metadata`: a mapping of str keys to JSON data."""
    if metadata is None:
        return {}
    data = json_mapping(metadata, "metadata", " (saved with every checkpoint)")
    return copy.deepcopy(data)


def _check_messages(messages: Any) -> tuple[Message, ...]:
    if isinstance(messages, str | Message):
        raise UsageError("Runner.run takes a list of messages; use query(text) for one text")
    try:
        items = tuple(messages)
    except TypeError:
        raise UsageError(
            f"Runner.run takes a list of messages, got {type(messages).__name__}"
        ) from None
    for index, item in enumerate(items):
        if not isinstance(item, Message):
            shown = repr(item)[:100]
            raise UsageError(
                f"Runner.run takes a list of Message; item {index} is {shown} "
                "(build one with Message.user(text))"
            )
    return items


_K = TypeVar("_K")


def _of_type(value: _K | None, kind: type[_K], problem: str) -> _K | None:
    """Return `value` when it is None or a `kind`, else raise `UsageError(problem)`."""
    if value is not None and not isinstance(value, kind):
        raise UsageError(f"{problem}, got {value!r}")
    return value


def _hook_chain(runner: Runner) -> HookChain:
    """The runner's hooks, outermost first: its `after_run` callables (they run after every
    other `after_run`), its own hooks; innermost (inside the agents' own hooks) its
    cassette's (it stands where the model and the tools are) and the limits (they see the
    request that is sent)."""
    limits, cassette = runner.limits, runner.cassette
    first = (AfterRunHooks(runner.after_run),) if runner.after_run else ()
    taped = () if cassette is None else (cassette.hooks(),)
    enforce = (limits.hooks(),) if limits is not None and limits.active else ()
    return HookChain((*first, *runner.hooks), innermost=(*taped, *enforce))
