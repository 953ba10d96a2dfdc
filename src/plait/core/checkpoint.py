"""Checkpoints: the one place a run is encoded to and decoded from its saved form.

A checkpoint is versioned JSON (never pickle), validated against one schema before anything
is claimed: the run's root input, the history recorded so far, session values, team state
and each agent's own state, whether it streamed, every pending interrupt (id, address,
info), the typed resume record of each component along the paths to them, the run's
budgets and counters, the JSON-able fields of its per-run options, and its metadata. Bytes
that are not a valid plait checkpoint are a `CheckpointCorrupt` naming what is wrong;
version 1 checkpoints are migrated when read.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from typing_extensions import TypedDict

from plait._util.json import encoded, first_problem, to_json
from plait._util.typed import restore_types, value_types
from plait.core.checkpoint_v1 import migrate_v1
from plait.core.history import as_records, whole_messages
from plait.core.run_state import RunSnapshot
from plait.errors import (
    CheckpointAlreadyResumed,
    CheckpointCorrupt,
    CheckpointVersionError,
    ResumeError,
    SerializationError,
    UsageError,
)
from plait.events import AgentAction, HandoffLog, InterruptCtx
from plait.messages import Message

__all__ = [
    "FORMAT",
    "VERSION",
    "Checkpoint",
    "CustomRecord",
    "DoneCall",
    "FlowRecord",
    "GraphJoin",
    "GraphRecord",
    "LaneRecord",
    "Lease",
    "NestedRecord",
    "ParallelRecord",
    "ReactRecord",
    "ReplayRecord",
    "SequenceRecord",
    "SwarmRecord",
    "UNSET",
]

FORMAT = "plait.checkpoint"
VERSION = 2
#: Validate every checkpoint as it is written, as `decode` will read it. Off in production
#: (records are built without validation on the hot path); plait's tests turn it on, so a
#: record that would not read back fails where it is written.
VALIDATE_WRITES = False


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()

Pairs = list[tuple[str, Message]]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DoneCall(_Record):
    """A tool call that finished before the round paused, by its position in the round."""

    index: int
    content: str
    action: AgentAction | None = None


class ReactRecord(_Record):
    """A ReAct agent: its model input so far and where its loop stands."""

    kind: Literal["react"] = "react"
    messages: list[Message]
    calls_made: int
    phase: Literal["tools", "model"]
    done: list[DoneCall] = []

    @model_validator(mode="after")
    def _done_calls_exist(self) -> ReactRecord:
        """Every finished call names a call of the round, once."""
        if not self.done:
            return self
        last = self.messages[-1] if self.messages else None
        count = len(last.tool_calls) if last is not None and last.role == "assistant" else 0
        seen: set[int] = set()
        for call in self.done:
            if not 0 <= call.index < count:
                raise ValueError(
                    f"finished tool call {call.index} is not one of the round's {count} calls"
                )
            if call.index in seen:
                raise ValueError(f"tool call {call.index} is recorded as finished twice")
            seen.add(call.index)
        return self


class SequenceRecord(_Record):
    """A sequence or loop: the running child, its run path, and the loop's iteration."""

    kind: Literal["sequence"] = "sequence"
    index: int
    path: list[str]
    iteration: int = 0


class ParallelRecord(_Record):
    """A parallel workflow: the children not finished, and each lane's history."""

    kind: Literal["parallel"] = "parallel"
    pending: list[str]
    lanes: dict[str, Pairs]


class FlowRecord(_Record):
    """A transfer flow: the agents transferred to, in order, from the entry agent."""

    kind: Literal["flow"] = "flow"
    chain: list[str]


class SwarmRecord(_Record):
    """A swarm: the active member, its run path, the handoffs so far and the guard window."""

    kind: Literal["swarm"] = "swarm"
    active: str
    path: list[str]
    handoffs: int
    window: list[str]
    messages: list[Message] | None = None  # the active member's input, when it was handed one
    elapsed: float = 0.0  # seconds the active member ran before the run was saved


class NestedRecord(_Record):
    """An agent run as a tool: the child's own input and history."""

    kind: Literal["nested"] = "nested"
    input: list[Message]
    history: Pairs


class LaneRecord(_Record):
    """A composite's lane: the messages its children recorded so far."""

    kind: Literal["lane"] = "lane"
    history: Pairs


class CustomRecord(_Record):
    """What an agent kept with `ctx.save_state(key, value)` at one place of the run: each
    value as plain JSON, and for a pydantic model its class (`module:qualname`)."""

    kind: Literal["custom"] = "custom"
    values: dict[str, Any] = {}
    models: dict[str, str] = {}


class ReplayRecord(_Record):
    """An agent that runs again from its start when resumed: how many of its own events it
    emitted before the pause, and what they said (the same events are not emitted again)."""

    kind: Literal["replay"] = "replay"
    emitted: int
    said: list[str] = []  # a digest of each of those events, in order (`plait.kernel`)


class GraphJoin(_Record):
    """A join of a state graph: its source nodes, and those that have finished."""

    sources: list[str]
    seen: list[str]


class GraphRecord(_Record):
    """A state graph: its state, the next nodes, the step count, the updates of nodes that
    finished in the paused super-step, and its joins."""

    kind: Literal["graph"] = "graph"
    state: dict[str, Any]
    frontier: list[str]
    steps: int
    done: dict[str, Any] = {}
    joins: list[GraphJoin] = []


AnyRecord = Annotated[
    ReactRecord
    | SequenceRecord
    | ParallelRecord
    | FlowRecord
    | SwarmRecord
    | NestedRecord
    | LaneRecord
    | GraphRecord
    | CustomRecord
    | ReplayRecord,
    Field(discriminator="kind"),
]


class _Located(_Record):
    address: str
    record: AnyRecord


class _Interrupt(_Record):
    id: str
    address: str
    info: Any = None


class _Budget(_Record):
    key: str
    team: str
    max_steps: int | None
    max_tokens: int | None
    steps: int
    tokens: int


class _RunOption(_Record):
    """The JSON-able fields of a per-run option (`plait.RunOption`)."""

    agent: str | None = None
    instruction: str | None = None
    model: str | None = None
    model_options: dict[str, Any] | None = None
    max_iterations: int | None = None
    model_object: bool = False  # it gave a model object (not saved: a resume gives it again)


class Lease(_Record):
    """Who runs a running checkpoint, and until when (a Unix time) it holds it."""

    owner: str
    until: float


class _Document(_Record):
    format: Literal["plait.checkpoint"]
    version: Literal[2]
    agent: str
    session_id: str | None
    session_turn: Pairs | None
    running: bool
    lease: Lease | None = None
    streaming: bool
    root_input: list[Message]
    root_authors: list[str] | None = None
    history: Pairs
    session_values: dict[str, Any]
    session_value_types: dict[str, str] = {}  # key -> the class of a typed value
    state: dict[str, Any]
    local: dict[str, dict[str, Any]]
    interrupts: list[_Interrupt]
    records: list[_Located]
    user_states: dict[str, Any]
    answers: dict[str, list[Any]]
    budgets: list[_Budget] = []
    model_calls: int = 0
    requests: int | None = None  # None (written before it was kept): model_calls
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    transfers: int = 0
    handoffs: list[HandoffLog] = []
    metadata: dict[str, Any] = {}
    root_id: str | None = None
    run_options: list[_RunOption] = []


class Checkpoint:
    """A decoded, validated checkpoint."""

    def __init__(self, doc: _Document, checkpoint_id: str) -> None:
        self.checkpoint_id = checkpoint_id
        self._doc = doc
        self.interrupts = tuple(
            InterruptCtx(id=i.id, address=i.address, info=i.info) for i in doc.interrupts
        )

    @property
    def user_states(self) -> dict[str, Any]:
        """Return the `state` of each interrupt, by its address."""
        return self._doc.user_states

    @property
    def agent(self) -> str:
        """Return the name of the root agent the run belongs to."""
        return self._doc.agent

    @property
    def session_id(self) -> str | None:
        """Return the session the paused turn belongs to, if any."""
        return self._doc.session_id

    @property
    def session_turn(self) -> Pairs:
        """Return the messages the paused session turn added so far, with their authors."""
        return list(self._doc.session_turn or [])

    @property
    def running(self) -> bool:
        """Whether this is the step checkpoint of a run that had not paused."""
        return self._doc.running

    @property
    def lease(self) -> Lease | None:
        """Return who holds this running checkpoint, and until when."""
        return self._doc.lease

    def stopped(self) -> bytes:
        """Return this checkpoint encoded as a stopped run's: not running and with no lease,
        so any process may resume it (as a run cancelled at a safe point is)."""
        doc = self._doc.model_copy(update={"running": False, "lease": None})
        return doc.model_dump_json().encode()

    @property
    def streaming(self) -> bool:
        """Whether the saved run streamed model output."""
        return self._doc.streaming

    @property
    def root_input(self) -> list[Message]:
        """Return the messages the saved run started with."""
        return list(self._doc.root_input)

    @property
    def handoffs(self) -> list[HandoffLog]:
        """Return the handoffs the saved run made before it was saved."""
        return list(self._doc.handoffs)

    @property
    def metadata(self) -> dict[str, Any]:
        """Return the checkpoint's metadata slot."""
        return dict(self._doc.metadata)

    @property
    def run_options(self) -> list[dict[str, Any]]:
        """Return the JSON-able fields of the run's per-run options, in order."""
        return [option.model_dump() for option in self._doc.run_options]

    @staticmethod
    def encode(
        snapshot: RunSnapshot,
        interrupts: tuple[InterruptCtx, ...],
        *,
        agent_name: str,
        session_id: str | None,
        session_turn: Pairs | None = None,
        running: bool = False,
        lease: Lease | None = None,
        handoffs: list[HandoffLog] | None = None,
    ) -> bytes:
        """Encode a saved run; a value that is not JSON is a `SerializationError` naming it."""
        doc = {  # every field of `_Document`, in order (`_json_shape`)
            "format": FORMAT,
            "version": VERSION,
            "agent": agent_name,
            "session_id": session_id,
            "session_turn": session_turn,
            "running": running,
            "lease": lease,
            "streaming": snapshot.enable_streaming,
            "root_input": list(snapshot.root_input),
            "root_authors": None if snapshot.root_authors is None else list(snapshot.root_authors),
            "history": whole_messages(snapshot.history),
            **_session_values(snapshot.session_values),
            "state": snapshot.state,
            "local": snapshot.local,
            "interrupts": [{"id": i.id, "address": i.address, "info": i.info} for i in interrupts],
            "records": [
                {"address": address, "record": record}
                for (address, _), record in snapshot.records.items()
            ],
            "user_states": snapshot.user_states,
            "answers": snapshot.answers,
            "budgets": _budgets(snapshot),
            "model_calls": snapshot.model_calls,
            "requests": snapshot.requests,
            "tool_calls": snapshot.tool_calls,
            "input_tokens": snapshot.tokens[0],
            "output_tokens": snapshot.tokens[1],
            "transfers": snapshot.transfers,
            "handoffs": handoffs or [],
            "metadata": snapshot.metadata,
            "root_id": snapshot.root_id,
            "run_options": [_RunOption.model_construct(**entry) for entry in snapshot.options],
        }

        def by_pydantic() -> bytes:
            try:
                return _document_shape().dump_json(doc, warnings="error")
            except Exception:
                _name_unencodable(snapshot, interrupts)
                raise

        data = encoded(doc, by_pydantic)
        if VALIDATE_WRITES:
            Checkpoint.decode(data, "(being written)")
        return data

    @classmethod
    def decode(cls, raw: bytes, checkpoint_id: str) -> Checkpoint:
        """Decode and validate checkpoint bytes, refusing anything that is not a valid plait
        checkpoint with a `CheckpointCorrupt` that names the first problem."""
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CheckpointCorrupt(f"checkpoint '{checkpoint_id}' is not JSON: {exc}") from None
        except RecursionError:
            raise CheckpointCorrupt(
                f"checkpoint '{checkpoint_id}' is nested too deeply to be a plait checkpoint"
            ) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CheckpointCorrupt(f"checkpoint '{checkpoint_id}' is not a plait checkpoint")
        version = data.get("version")
        if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
            raise CheckpointVersionError(
                f"checkpoint '{checkpoint_id}' is in format {version}, this plait reads up to "
                f"{VERSION}: resume it with a newer plait",
                version=version,
                supported=VERSION,
            )
        if type(version) is not int or version not in (1, VERSION):
            raise CheckpointCorrupt(
                f"checkpoint '{checkpoint_id}' has format version {_short(version)}; "
                f"this plait reads versions 1 to {VERSION}"
            )
        if version == 1:
            data = migrate_v1(data, checkpoint_id)
        try:
            doc = _Document.model_validate(data)
        except ValidationError as exc:
            where, problem = first_problem(exc)
            raise CheckpointCorrupt(
                f"checkpoint '{checkpoint_id}' is damaged at {where}: {problem}"
            ) from None
        except RecursionError:
            raise CheckpointCorrupt(
                f"checkpoint '{checkpoint_id}' is nested too deeply to be a plait checkpoint"
            ) from None
        return cls(doc, checkpoint_id)

    def targets(self, targets: Mapping[str, Any] | None, value: Any) -> dict[str, Any]:
        """Check resume data against the pending interrupts; return {interrupt id: data}."""
        pending = {i.id for i in self.interrupts}
        if targets is not None and value is not UNSET:
            raise UsageError("resume takes targets= or value=, not both")
        if not pending and (value is not UNSET or targets):
            raise CheckpointAlreadyResumed(  # its steps overwrote the pause: it went on
                f"checkpoint '{self.checkpoint_id}' has no interrupt to answer: its run went on "
                "past its pause (it was resumed), or never paused; resume it without targets "
                "or value to continue from its last step"
            )
        if value is not UNSET:
            if len(pending) != 1:
                raise ResumeError(
                    f"value= resumes exactly one interrupt, but {len(pending)} are pending in "
                    f"checkpoint '{self.checkpoint_id}'; pass targets={{id: data}} instead"
                )
            return {next(iter(pending)): value}
        targets = dict(targets or {})
        unknown = sorted(set(targets) - pending)
        if unknown:
            raise ResumeError(
                f"no pending interrupt {unknown} in checkpoint '{self.checkpoint_id}'; "
                f"pending: {sorted(pending)}"
            )
        return targets

    def snapshot(self) -> RunSnapshot:
        """Return the saved run, ready for `RunContext.restore`."""
        doc = self._doc
        return RunSnapshot(
            root_input=tuple(doc.root_input),
            root_authors=None if doc.root_authors is None else tuple(doc.root_authors),
            history=as_records(doc.history),
            session_values=restore_types(dict(doc.session_values), doc.session_value_types),
            state=dict(doc.state),
            local={k: dict(v) for k, v in doc.local.items()},
            enable_streaming=doc.streaming,
            records={(r.address, r.record.kind): r.record for r in doc.records},
            user_states=dict(doc.user_states),
            answers={k: list(v) for k, v in doc.answers.items()},
            budgets={
                b.key: (b.team, b.max_steps, b.max_tokens, b.steps, b.tokens) for b in doc.budgets
            },
            model_calls=doc.model_calls,
            requests=doc.model_calls if doc.requests is None else doc.requests,
            tool_calls=doc.tool_calls,
            tokens=(doc.input_tokens, doc.output_tokens),
            transfers=doc.transfers,
            metadata=dict(doc.metadata),
            root_id=doc.root_id,
            options=self.run_options,
        )

    def answers(self, targets: dict[str, Any]) -> dict[str, list[Any]]:
        """Return what each interrupted point's `interrupt()` returns on resume, in order."""
        answers = {k: list(v) for k, v in self._doc.answers.items()}
        for interrupt in self.interrupts:
            if interrupt.id in targets:
                answers.setdefault(interrupt.address, []).append(targets[interrupt.id])
        return answers


def _json_shape(model: type[BaseModel], name: str, **fields: Any) -> Any:
    """Return a `TypedDict` of `model`'s fields, in order (`fields` replaces some of their
    types): a dict of them encodes to the same JSON as the model, without building it."""
    types = {key: fields.get(key, field.annotation) for key, field in model.model_fields.items()}
    return TypedDict(name, types)  # type: ignore[operator]


@functools.cache
def _document_shape() -> TypeAdapter[Any]:
    """Return the encoder of a checkpoint document given as a dict (see `Checkpoint.encode`)."""
    # each record is one of `AnyRecord`'s models, made by plait: typed `Any`, it is encoded
    # by its own model's serializer (the same JSON), without matching it against the union
    records = list.__class_getitem__(_json_shape(_Located, "_LocatedJSON", record=Any))
    interrupts = list.__class_getitem__(_json_shape(_Interrupt, "_InterruptJSON"))
    shape = _json_shape(_Document, "_DocumentJSON", records=records, interrupts=interrupts)
    return TypeAdapter(shape)


def _budgets(snapshot: RunSnapshot) -> list[_Budget]:
    """Return the team budgets of a saved run, as a checkpoint holds them."""
    return [
        _Budget.model_construct(key=k, team=t, max_steps=ms, max_tokens=mt, steps=s, tokens=tk)
        for k, (t, ms, mt, s, tk) in snapshot.budgets.items()
    ]


def _session_values(values: dict[str, Any]) -> dict[str, Any]:
    """The session values of a document, with the classes of the typed ones."""
    return {"session_values": values, "session_value_types": value_types(values) if values else {}}


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def _name_unencodable(snapshot: RunSnapshot, interrupts: tuple[InterruptCtx, ...]) -> None:
    """Raise a `SerializationError` naming the first part of the run that is not JSON."""
    parts: list[tuple[str, Any]] = [
        ("session_values", snapshot.session_values),
        ("state", snapshot.state),
        ("local state", snapshot.local),
        ("interrupt info", [i.info for i in interrupts]),
        ("interrupt state", snapshot.user_states),
        ("resume data", snapshot.answers),
        ("metadata", snapshot.metadata),
        ("run options", snapshot.options),
    ]
    parts += [(f"state of {a} ({k})", r) for (a, k), r in snapshot.records.items()]
    for root, value in parts:
        to_json(value, Any, root=root)
    raise SerializationError("the run's state cannot be encoded as JSON", path="")
