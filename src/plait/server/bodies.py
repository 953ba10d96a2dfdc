"""The JSON bodies of plait's HTTP API: requests, run summaries, sessions and errors."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    model_validator,
)

from plait._util.json import load_plain
from plait.messages import Message
from plait.server.users import id_problem

__all__ = [
    "AgentInfo",
    "CancelAccepted",
    "ErrorInfo",
    "ErrorResponse",
    "ForkRequest",
    "HandoffOut",
    "Health",
    "InterruptOut",
    "MessageBody",
    "ResumeRequest",
    "RunList",
    "RunListItem",
    "RunRecord",
    "RunRequest",
    "RunResponse",
    "Responses",
    "RunStatus",
    "RunSummary",
    "SafeId",
    "SessionDetail",
    "SessionInfo",
    "SessionMessage",
    "StepOut",
    "ToolCallBody",
    "UsageOut",
    "error_responses",
]


def _safe_id(value: str) -> str:
    problem = id_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


#: A session id given by a client: the API's one id rule (`plait.server.users.id_problem`):
#: 1 to 128 characters, none a control character, line or paragraph separator or lone
#: surrogate, no "/", not "." or "..".
SafeId = Annotated[str, StringConstraints(min_length=1), AfterValidator(_safe_id)]

RunStatus = Literal["running", "completed", "paused", "failed", "cancelled"]


#: The `stream` field of the bodies that start or continue a run.
_Stream = Annotated[
    StrictBool, Field(description="true: an event stream (SSE); false: one JSON summary.")
]
#: The `deltas` field of the bodies that start or resume a run.
_Deltas = Annotated[
    StrictBool,
    Field(
        description="With `stream`: the models stream, and each chunk of text is also sent "
        "as it comes, as an `agent_delta` event (on a resume: when the run was started "
        "with `deltas`)."
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ToolCallBody(BaseModel):
    """A tool call of an assistant message; `arguments` is JSON text."""

    model_config = ConfigDict(strict=True)

    id: str
    name: str
    arguments: str = ""


class MessageBody(BaseModel):
    """A message object: `role` and `content`, optionally `tool_calls`, `tool_call_id` and
    `name` (other fields, such as a session message's `author`, are ignored)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCallBody] = []
    tool_call_id: str | None = None
    name: str | None = None

    def to_message(self) -> Message:
        """Return the plait `Message` this body describes (read through `Message`'s schema)."""
        message: Message = load_plain(Message, self.model_dump())
        return message


class RunRequest(_Strict):
    """Start a run: `input` is a text (one user message) or a list of message objects."""

    input: str | Annotated[list[MessageBody], Field(min_length=1)] = Field(
        description="A text (sent as one user message) or a non-empty list of message objects."
    )
    session_id: SafeId | None = Field(
        default=None, description="Continue this conversation (created on first use)."
    )
    session_values: dict[str, Any] | None = Field(
        default=None, description="Values for the run's session (instruction placeholders)."
    )
    stream: _Stream = True
    deltas: _Deltas = False

    def messages(self) -> list[Message]:
        """Return the run's input messages."""
        if isinstance(self.input, str):
            return [Message.user(self.input)]
        return [m.to_message() for m in self.input]


class ResumeRequest(_Strict):
    """Resume a paused run: `targets` maps interrupt ids to answers, or `value` answers the
    one pending interrupt (neither: interrupts pause again with fresh ids)."""

    targets: dict[str, Any] | None = Field(
        default=None, description="Interrupt id -> the value its interrupt() returns."
    )
    value: Any = Field(
        default=None, description="The answer when exactly one interrupt is pending."
    )
    stream: _Stream = True
    deltas: _Deltas = False

    @model_validator(mode="after")
    def _one_of(self) -> ResumeRequest:
        if self.targets is not None and "value" in self.model_fields_set:
            raise ValueError("give targets or value, not both")
        return self

    @property
    def has_value(self) -> bool:
        """Whether the body gave `value` (null included)."""
        return "value" in self.model_fields_set


class ForkRequest(_Strict):
    """Start a new run from a kept step of a run (see `GET /v1/runs/{id}/history`)."""

    step: int = Field(description="The number of the step to fork from.")
    session_values: dict[str, Any] | None = Field(
        default=None, description="Session values merged over the step's values."
    )
    stream: _Stream = True


class StepOut(BaseModel):
    """A kept step of a run: its number, the agent that took it, the last event before
    it (an `AgentEvent.to_json()` object, or null), and the session values and team state
    at it."""

    step: int
    agent: str
    event: dict[str, Any] | None = None
    session_values: dict[str, Any] = {}
    state: dict[str, Any] = {}


class ErrorInfo(BaseModel):
    """What went wrong: a plait error class name (or "http") and a message."""

    type: str
    message: str


class ErrorResponse(BaseModel):
    """The body of every error response."""

    error: ErrorInfo


#: A route's `responses=`: what each status answers with, for the OpenAPI schema.
Responses = dict[int | str, dict[str, Any]]


def error_responses(meanings: Mapping[int, str], *statuses: int) -> Responses:
    """Return a route's error responses: each of `statuses` (every status of `meanings` when
    none is given) answered with an `ErrorResponse`, described by what it means there."""
    return {
        status: {"model": ErrorResponse, "description": meanings[status]}
        for status in statuses or tuple(meanings)
    }


class InterruptOut(BaseModel):
    """A pending interrupt: answer it by `id` when resuming."""

    id: str
    info: Any = None
    address: str


class UsageOut(BaseModel):
    """Tokens spent by the run's model calls."""

    input_tokens: int = 0
    output_tokens: int = 0


class HandoffOut(BaseModel):
    """A handoff between team members."""

    timestamp: datetime
    from_agent: str
    to_agent: str
    message: str = ""
    reason: str = ""
    step_count: int = 0
    tokens_used: int = 0


class RunSummary(BaseModel):
    """How a run stands or ended.

    `status` is "running" while the run goes on, then "completed", "paused" (see
    `interrupts`), "cancelled" (resumable) or "failed" (see `error`). `checkpoint_id` is
    the id to act on: the running run's own id, the checkpoint to resume when paused or
    cancelled, null when the run completed or failed.
    """

    status: RunStatus
    checkpoint_id: str | None = None
    final_output: Any = None
    interrupts: list[InterruptOut] = []
    error: ErrorInfo | None = None
    usage: UsageOut = UsageOut()
    handoffs: list[HandoffOut] = []
    agent: str = Field(description="The public name of the agent that runs it.")
    session_id: str | None = None
    metadata: dict[str, Any] = Field(
        default={}, description="The run's metadata (the runner's, saved with its checkpoints)."
    )


class RunRecord(RunSummary):
    """A run summary as the server stores it: with the id of the run it belongs to (a
    resumed run goes on under its first id), when that run started and when this was
    written (None in records of servers that did not say), and while it runs the worker
    that runs it (`plait.server.leases`)."""

    run_id: str | None = None
    started_at: datetime | None = None
    updated_at: datetime | None = None
    worker: str | None = None


class RunListItem(RunSummary):
    """A run of `GET /v1/runs`: its latest summary, with its `run_id` (the id its first
    response gave in `x-plait-checkpoint-id`) and when that summary was written."""

    run_id: str
    updated_at: datetime


class RunList(BaseModel):
    """A page of the caller's runs, newest first; `next_cursor` asks for the next page
    (null: this is the last)."""

    runs: list[RunListItem]
    next_cursor: str | None = None


class RunResponse(RunSummary):
    """A run's summary with every event (`AgentEvent.to_json()` objects), for
    `"stream": false`."""

    events: list[dict[str, Any]] = []


class AgentInfo(BaseModel):
    """An agent the server runs."""

    name: str
    description: str


class Health(BaseModel):
    """The server is up."""

    status: Literal["ok"] = "ok"


class SessionInfo(BaseModel):
    """One of the caller's sessions, and the agent (its public name) that wrote it last
    (null for a session written before the server said)."""

    session_id: str
    updated_at: datetime
    agent: str | None = None


class SessionMessage(BaseModel):
    """A message of a session, with its `author` ("user", or the agent that wrote it)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCallBody] = []
    tool_call_id: str | None = None
    name: str | None = None
    usage: UsageOut | None = None
    author: str


class SessionDetail(BaseModel):
    """A session: its messages, values and handoffs."""

    session_id: str
    messages: list[SessionMessage]
    values: dict[str, Any]
    handoffs: list[HandoffOut]


class CancelAccepted(BaseModel):
    """The cancel request is recorded; `status` is the run's status when it was."""

    checkpoint_id: str
    status: RunStatus
