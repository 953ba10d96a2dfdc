"""Chat completions: the request, the `chat.completion` answer and its streamed chunks."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from plait.messages import Message, ToolCall
from plait.protocols._openai_common import (
    AnswerRelay,
    answer_text,
    data,
    only_kinds,
    plait_role_and_text,
    run_error,
)
from plait.server.bodies import RunSummary
from plait.server.runs import LiveRun
from plait.server.sse import encode

__all__ = [
    "ChatCompletion",
    "ChatCompletionRequest",
    "ChatMessage",
    "ChunkRelay",
    "completion",
    "usage_of",
]

# --- requests -----------------------------------------------------------------------------


class TextPart(BaseModel):
    """A text part of a message's content (the only kind of part plait takes)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    type: Literal["text"]
    text: str


class FunctionCall(BaseModel):
    """The function of an assistant's tool call: its name and JSON arguments."""

    model_config = ConfigDict(extra="ignore", strict=True)

    name: str
    arguments: str = ""


class ChatToolCall(BaseModel):
    """A tool call of an assistant message."""

    model_config = ConfigDict(extra="ignore", strict=True)

    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(BaseModel):
    """An OpenAI chat message: `developer` counts as `system`; `content` is a text, a list
    of text parts (joined by newlines) or null (an assistant message with tool calls)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ChatToolCall] | None = None
    tool_call_id: str | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _text_parts_only(cls, value: Any) -> Any:
        return only_kinds(value, ("text",), "part")

    @model_validator(mode="after")
    def _fits_role(self) -> ChatMessage:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs its tool_call_id")
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError(f"a {self.role} message needs content")
        return self

    def to_message(self) -> Message:
        """Return the plait `Message` this chat message describes."""
        role, content = plait_role_and_text(self.role, self.content)
        calls = tuple(
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
            for c in self.tool_calls or ()
        )
        return Message(
            role=role,
            content=content,
            tool_calls=calls,
            tool_call_id=self.tool_call_id,
            name=self.name,
        )


class StreamOptions(BaseModel):
    """Options of a streamed completion."""

    model_config = ConfigDict(extra="ignore", strict=True)

    include_usage: StrictBool = False


class ChatCompletionRequest(BaseModel):
    """A chat completion request: `model` (an agent's name) and `messages`, the run's input.

    `stream`, `stream_options.include_usage` and `response_format` are honoured; every other
    OpenAI field (temperature, tools, user, metadata, ...) is accepted and ignored: the agent
    decides.
    """

    model_config = ConfigDict(extra="ignore", strict=True)

    model: str = Field(description="The name of the agent to run (`GET /v1/models`).")
    messages: Annotated[list[ChatMessage], Field(min_length=1)] = Field(
        description="The run's input messages."
    )
    stream: StrictBool | None = Field(
        default=False, description="true: `chat.completion.chunk` server-sent events."
    )
    stream_options: StreamOptions | None = None
    response_format: dict[str, Any] | None = Field(
        default=None,
        description=(
            '`{"type": "json_schema", "json_schema": {"name", "schema"}}` (or `json_object`): '
            "the agent answers with JSON valid for the schema; `400` when it cannot."
        ),
    )


# --- responses ----------------------------------------------------------------------------


class AssistantMessage(BaseModel):
    """The completion's message: the run's final answer (or what the paused run waits for)."""

    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None


class Choice(BaseModel):
    """The one choice of a completion."""

    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop"] = "stop"
    logprobs: None = None


class CompletionUsage(BaseModel):
    """Tokens spent by every model call of the run."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    """A `chat.completion`: its id is `chatcmpl-` and the run's checkpoint id."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage
    system_fingerprint: None = None


def usage_of(summary: RunSummary) -> dict[str, int]:
    """Return a run's usage as OpenAI's chat `usage`."""
    prompt, completion = summary.usage.input_tokens, summary.usage.output_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion(summary: RunSummary, run: LiveRun, created: int) -> ChatCompletion:
    """Return the `chat.completion` of a run that did not fail."""
    return ChatCompletion(
        id=f"chatcmpl-{run.checkpoint_id}",
        created=created,
        model=run.agent,
        choices=[Choice(message=AssistantMessage(content=answer_text(summary)))],
        usage=CompletionUsage.model_validate(usage_of(summary)),
    )


# --- the streamed answer ------------------------------------------------------------------

_DONE = encode(b"", "[DONE]")


class ChunkRelay(AnswerRelay):
    """A completion as `chat.completion.chunk` server-sent events, then `data: [DONE]`.

    The first chunk (`delta.role`) goes out as the run starts; then the text of the run's
    top-level model turns as the model writes it (a blank line between two turns' text),
    and the final answer when it was not the last turn's text (see `AnswerRelay`); then a
    chunk with `finish_reason`, then (with `include_usage`) a chunk with no choices and the
    run's usage. A failed run ends with `data: {"error": {...}}` before `[DONE]`.
    """

    def __init__(self, created: int, include_usage: bool, *, live: bool) -> None:
        super().__init__(live=live)
        self.created = created
        self.include_usage = include_usage
        self.sent = False  # some text has gone out

    def attach(self, run: LiveRun) -> None:
        """Serve `run`: the stream opens with the role chunk."""
        super().attach(run)
        self.run = run
        self.put(self._chunk({"role": "assistant", "content": ""}))
        self.opening = run.queue.qsize()  # it may wait for the run's first event

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return data(self._body([{"index": 0, "delta": delta, "finish_reason": finish}]))

    def _body(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": f"chatcmpl-{self.run.checkpoint_id}",
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.run.agent,
            "choices": choices,
        }
        if self.include_usage:
            body["usage"] = None
        return body

    def open_turn(self) -> None:
        """Put a blank line between the text of two turns."""
        if self.sent:
            self.put(self._chunk({"content": "\n\n"}))

    def text(self, delta: str) -> None:
        """Send a piece of a turn's text as a content delta."""
        self.sent = True
        self.put(self._chunk({"content": delta}))

    def closing(self, summary: RunSummary) -> bytes:
        """Return the end of the stream: the rest of the answer, `finish_reason`, usage."""
        if summary.status == "failed":
            return data(run_error(summary)) + _DONE
        parts: list[bytes] = []
        rest = self.still_to_send(summary)
        if rest is not None:
            parts.append(self._chunk({"content": f"\n\n{rest}" if self.sent else rest}))
        parts.append(self._chunk({}, "stop"))
        if self.include_usage:
            parts.append(data({**self._body([]), "usage": usage_of(summary)}))
        return b"".join(parts) + _DONE
