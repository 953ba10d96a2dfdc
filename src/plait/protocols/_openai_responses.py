"""The Responses API: the request, the `response` object and its streamed events.

A response is a run of the agent named by `model` in a plait session of its own, the
conversation: `previous_response_id` continues the conversation of that response (its
session: the agent sees the turns before, so `input` holds only the new ones). The session
keeps one line of turns, so a conversation is continued from its latest response only; a
response that is not its conversation's latest, or whose run did not complete, is a `400`.

Streamed, a response is OpenAI's events: `response.created`, `response.in_progress`, then
for each top-level model turn that writes text a `message` item (`response.output_item.added`,
`response.content_part.added`, `response.output_text.delta` per piece of text as the model
writes it, `response.output_text.done`, `response.content_part.done`,
`response.output_item.done`), then `response.completed` (or `response.failed`). A message
item's `phase` says what it is: `"final_answer"`, or `"commentary"` for the text of a turn
that was not the answer (it called tools, or another turn came after it); the final answer
is the last item (see `plait.protocols._openai_common.AnswerRelay`). Not streamed, a
response's `output` is one message: the final answer.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from plait.errors import CheckpointNotFound
from plait.messages import Message
from plait.protocols._openai_common import (
    AnswerRelay,
    answer_text,
    data,
    only_kinds,
    plait_role_and_text,
)
from plait.server.bodies import RunSummary
from plait.server.limits import ApiError
from plait.server.runs import LiveRun, Runs
from plait.server.users import UserStore, id_problem

__all__ = [
    "EventRelay",
    "ResponseObject",
    "ResponseRequest",
    "conversation_of",
    "response_object",
]

Phase = Literal["commentary", "final_answer"]

# --- requests -----------------------------------------------------------------------------


class InputText(BaseModel):
    """A text part of an input message (`input_text`, or an assistant's `output_text`)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    type: Literal["input_text", "output_text", "text"]
    text: str


class InputMessage(BaseModel):
    """A message of a response's `input`: `developer` counts as `system`; `content` is a
    text or text parts (joined by newlines)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[InputText]

    @field_validator("content", mode="before")
    @classmethod
    def _text_parts_only(cls, value: Any) -> Any:
        return only_kinds(value, ("text", "input_text", "output_text"), "part")

    def to_message(self) -> Message:
        """Return the plait `Message` this input message describes."""
        role, content = plait_role_and_text(self.role, self.content)
        return Message(role=role, content=content)


class TextConfig(BaseModel):
    """A response's `text` options: `format` is honoured (or refused), the rest ignored."""

    model_config = ConfigDict(extra="ignore")

    format: dict[str, Any] | None = None


class ResponseRequest(BaseModel):
    """A response request: `model` (an agent's name) and `input` (a text, or message items).

    `instructions` (a system message before the input), `previous_response_id`, `stream` and
    `text.format` are honoured; `conversation` and `background` are refused (plait continues
    a conversation with `previous_response_id`, and answers at once); every other OpenAI
    field (temperature, tools, store, metadata, ...) is accepted and ignored.
    """

    model_config = ConfigDict(extra="ignore", strict=True)

    model: str = Field(description="The name of the agent to run (`GET /v1/models`).")
    input: str | Annotated[list[InputMessage], Field(min_length=1)] = Field(
        description="The new turn: a user text, or message items."
    )
    instructions: str | None = Field(default=None, description="A system message for this turn.")
    previous_response_id: str | None = Field(
        default=None, description="Continue the conversation of this response (its latest)."
    )
    stream: StrictBool | None = Field(default=False, description="true: server-sent events.")
    text: TextConfig | None = None
    conversation: Any = None
    background: StrictBool | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _messages_only(cls, value: Any) -> Any:
        return only_kinds(value, ("message",), "item", default="message")

    @model_validator(mode="after")
    def _nothing_unserved(self) -> ResponseRequest:
        if self.conversation is not None:
            raise ValueError("conversation is not supported: continue with previous_response_id")
        if self.background:
            raise ValueError("background is not supported: a response answers when it ends")
        return self

    def messages(self) -> list[Message]:
        """Return the run's input: the instructions, then the input's messages."""
        given = self.input
        found = [Message.user(given)] if isinstance(given, str) else [m.to_message() for m in given]
        if self.instructions:
            found.insert(0, Message.system(self.instructions))
        return found


async def conversation_of(store: UserStore, runs: Runs, previous: str | None) -> str | None:
    """Return the session a response continues: that of `previous` (a response id), or None
    for a new conversation.

    Raises:
        ApiError: `400`: `previous` is no response of the caller's, not its conversation's
            latest, or its run did not complete.
    """
    if previous is None:
        return None
    param, code = "previous_response_id", "previous_response_not_found"
    checkpoint_id = previous.removeprefix("resp_")
    summary = None
    if previous.startswith("resp_") and id_problem(checkpoint_id) is None:
        try:
            summary = await runs.summary(store, checkpoint_id)
        except CheckpointNotFound:
            summary = None
    session = None if summary is None else summary.session_id
    latest = None if session is None else await store.get_record("o", session)
    if summary is None or session is None:
        raise ApiError(400, f"no response '{previous[:128]}'", param=param, code=code)
    if latest is None:  # a run of the API, or a response whose conversation was not recorded
        raise ApiError(
            400, f"'{previous[:128]}' is no response of a conversation", param=param, code=code
        )
    if latest.decode() != checkpoint_id:
        raise ApiError(
            400,
            f"response '{previous[:128]}' is not the latest of its conversation (resp_"
            f"{latest.decode()} is): a conversation goes on from its latest response",
            param=param,
        )
    if summary.status != "completed":
        raise ApiError(
            400,
            f"response '{previous[:128]}' is {summary.status}: a conversation goes on from a "
            "completed response (a paused run is resumed at POST /v1/runs/{id}/resume)",
            param=param,
        )
    return session


# --- the response -------------------------------------------------------------------------


class OutputText(BaseModel):
    """The text of a message item."""

    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[Any] = []
    logprobs: list[Any] = []


class OutputMessage(BaseModel):
    """A message item of a response's output."""

    id: str
    type: Literal["message"] = "message"
    status: Literal["in_progress", "completed"] = "completed"
    role: Literal["assistant"] = "assistant"
    content: list[OutputText] = []
    phase: Phase | None = None


class ResponseUsage(BaseModel):
    """Tokens spent by every model call of the run."""

    input_tokens: int
    input_tokens_details: dict[str, int] = {"cached_tokens": 0}
    output_tokens: int
    output_tokens_details: dict[str, int] = {"reasoning_tokens": 0}
    total_tokens: int


class ResponseError(BaseModel):
    """Why a streamed response failed."""

    code: Literal["server_error"] = "server_error"
    message: str


class ResponseObject(BaseModel):
    """A `response`: its id is `resp_` and the run's checkpoint id."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Literal["in_progress", "completed", "failed"]
    model: str
    output: list[OutputMessage] = []
    usage: ResponseUsage | None = None
    error: ResponseError | None = None
    incomplete_details: None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    metadata: dict[str, str] = {}
    parallel_tool_calls: bool = True
    tool_choice: str = "auto"
    tools: list[Any] = []
    temperature: float | None = None
    top_p: float | None = None
    text: dict[str, Any] = {"format": {"type": "text"}}


def _usage(summary: RunSummary) -> ResponseUsage:
    given, made = summary.usage.input_tokens, summary.usage.output_tokens
    return ResponseUsage(input_tokens=given, output_tokens=made, total_tokens=given + made)


def _head(request: ResponseRequest, run: LiveRun, created: int) -> ResponseObject:
    """Return the response of `run` as it starts (no output yet)."""
    fmt = request.text.format if request.text is not None else None
    return ResponseObject(
        id=f"resp_{run.checkpoint_id}",
        created_at=created,
        status="in_progress",
        model=run.agent,
        instructions=request.instructions,
        previous_response_id=request.previous_response_id,
        text={"format": fmt or {"type": "text"}},
    )


def response_object(request: ResponseRequest, run: LiveRun, summary: RunSummary) -> ResponseObject:
    """Return the response of a run that did not fail: the final answer as one message."""
    answer = OutputMessage(
        id=f"msg_{run.checkpoint_id}_0",
        content=[OutputText(text=answer_text(summary))],
        phase="final_answer",
    )
    head = _head(request, run, int(time.time()))
    return head.model_copy(
        update={"status": "completed", "output": [answer], "usage": _usage(summary)}
    )


# --- the streamed response ----------------------------------------------------------------


class EventRelay(AnswerRelay):
    """A response as OpenAI's server-sent events (see the module's docstring)."""

    head: ResponseObject

    def __init__(self, request: ResponseRequest, *, live: bool) -> None:
        super().__init__(live=live)
        self.request = request
        self.sequence = 0
        self.items: list[OutputMessage] = []
        self.waiting: OutputMessage | None = None  # a turn's item whose phase is not known yet

    def attach(self, run: LiveRun) -> None:
        """Serve `run`: the stream opens with `response.created` and `.in_progress`."""
        super().attach(run)
        self.head = _head(self.request, run, int(time.time()))
        body = self.head.model_dump(mode="json")
        self.put(self._event("response.created", response=body))
        self.put(self._event("response.in_progress", response=body))
        self.opening = run.queue.qsize()  # these may wait for the run's first event

    def _event(self, kind: str, **fields: Any) -> bytes:
        body = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return data(body, kind.encode())

    def _place(self, item: OutputMessage) -> dict[str, Any]:
        return {"item_id": item.id, "output_index": self.items.index(item), "content_index": 0}

    def _open(self) -> list[bytes]:
        """Start a message item: the events that add it and its text part."""
        item = OutputMessage(id=f"msg_{self.head.id[5:]}_{len(self.items)}", status="in_progress")
        self.items.append(item)
        part = OutputText(text="").model_dump(mode="json")
        added = {"output_index": len(self.items) - 1, "item": item.model_dump(mode="json")}
        return [
            self._event("response.output_item.added", **added),
            self._event("response.content_part.added", **self._place(item), part=part),
        ]

    def _text(self, item: OutputMessage, delta: str) -> bytes:
        return self._event(
            "response.output_text.delta", **self._place(item), delta=delta, logprobs=[]
        )

    def _text_done(self, item: OutputMessage, text: str) -> list[bytes]:
        """End the text of an item."""
        item.content = [OutputText(text=text)]
        part = item.content[0].model_dump(mode="json")
        where = self._place(item)
        return [
            self._event("response.output_text.done", **where, text=text, logprobs=[]),
            self._event("response.content_part.done", **where, part=part),
        ]

    def _done(self, item: OutputMessage, phase: Phase) -> bytes:
        """End an item, saying what it is."""
        item.status, item.phase = "completed", phase
        index = self.items.index(item)
        return self._event(
            "response.output_item.done", output_index=index, item=item.model_dump(mode="json")
        )

    def _settle(self, phase: Phase) -> list[bytes]:
        """End the item waiting for its phase, if any, as `phase`."""
        waiting, self.waiting = self.waiting, None
        return [] if waiting is None else [self._done(waiting, phase)]

    def open_turn(self) -> None:
        """A turn writes text: the item before it was not the answer; a new item starts."""
        for event in [*self._settle("commentary"), *self._open()]:
            self.put(event)

    def text(self, delta: str) -> None:
        """Send a piece of the turn's text."""
        self.put(self._text(self.items[-1], delta))

    def close_turn(self, text: str, *, calls: bool) -> None:
        """End the turn's text; its item is commentary when it called tools, else it waits
        to be known (the answer, unless another turn writes after it)."""
        item = self.items[-1]
        for event in self._text_done(item, text):
            self.put(event)
        if calls:
            self.put(self._done(item, "commentary"))
        else:
            self.waiting = item

    def closing(self, summary: RunSummary) -> bytes:
        """Return the end of the stream: the answer's item, then `response.completed` (or
        `response.failed`)."""
        if summary.status == "failed":
            error = summary.error
            message = f"{error.type}: {error.message}" if error else "the run failed"
            events = self._settle("commentary")
            failed = self.head.model_copy(
                update={
                    "status": "failed",
                    "output": self.items,
                    "error": ResponseError(message=message),
                }
            )
            events.append(self._event("response.failed", response=failed.model_dump(mode="json")))
            return b"".join(events)
        rest = self.still_to_send(summary)
        if rest is None and self.waiting is not None:
            events = self._settle("final_answer")
        else:
            final = answer_text(summary) if rest is None else rest
            events = [*self._settle("commentary"), *self._open()]
            item = self.items[-1]
            if final:
                events.append(self._text(item, final))
            events += [*self._text_done(item, final), self._done(item, "final_answer")]
        update = {"status": "completed", "output": self.items, "usage": _usage(summary)}
        done = self.head.model_copy(update=update)
        events.append(self._event("response.completed", response=done.model_dump(mode="json")))
        return b"".join(events)
