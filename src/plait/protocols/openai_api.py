"""OpenAI-compatible routes of plait's server: `GET /v1/models` and `POST /v1/chat/completions`.

The official `openai` client works against them unchanged: a model is an agent (its public
name), a chat completion is a run of that agent on the request's messages. The routes are
mounted on the app of `create_app`, so they share its API keys, its per-user view of the
store and its runs: a completion's run is an ordinary run, readable at
`GET /v1/runs/{checkpoint_id}` (the id is in the `x-plait-checkpoint-id` header of every
completion) and resumable at `POST /v1/runs/{checkpoint_id}/resume` when it pauses.

What a completion holds:
- completed: the run's final output as the assistant message's content (text as is, any
  other value as JSON), `finish_reason` "stop", `usage` summed over every model call.
- paused or cancelled: `finish_reason` "stop" and a content that says what the run waits for
  and how to resume it.
- failed: an error, not an answer: `424` with `{"error": {"type": <plait error class>,
  "message", "param": null, "code": "run_failed"}}` (a streamed completion, whose status is
  already sent, ends with that error object as its last `data:` line before `[DONE]`). The
  `openai` client raises on both, and does not retry (a retry would run the agent again).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Depends, Header
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator
from starlette.types import Receive, Scope, Send

from plait.core.agent import Agent
from plait.messages import Message, ToolCall
from plait.server.bodies import ErrorResponse, RunSummary
from plait.server.limits import ApiError
from plait.server.runs import LiveRun, Nudge, Runs
from plait.server.sse import PING_INTERVAL
from plait.server.users import UserStore, id_problem

__all__ = [
    "CHECKPOINT_HEADER",
    "SESSION_HEADER",
    "Caller",
    "CallerSource",
    "ChatCompletion",
    "ChatCompletionRequest",
    "ChatMessage",
    "ModelList",
    "openai_router",
]

#: The response header with the run's checkpoint id (as on the app's other run routes).
CHECKPOINT_HEADER = "x-plait-checkpoint-id"
#: The request header that runs a completion in a plait session.
SESSION_HEADER = "x-plait-session-id"


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
        if isinstance(value, list):
            for part in value:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind != "text":
                    raise ValueError(f"only text parts are supported, got a {kind!r} part")
        return value

    @model_validator(mode="after")
    def _fits_role(self) -> ChatMessage:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs its tool_call_id")
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError(f"a {self.role} message needs content")
        return self

    def to_message(self) -> Message:
        """Return the plait `Message` this chat message describes."""
        content = self.content
        if isinstance(content, list):
            content = "\n".join(part.text for part in content)
        calls = tuple(
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
            for c in self.tool_calls or ()
        )
        return Message(
            role="system" if self.role == "developer" else self.role,
            content=content or "",
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

    `stream` and `stream_options.include_usage` are honoured; every other OpenAI field
    (temperature, tools, user, metadata, ...) is accepted and ignored: the agent decides.
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


# --- responses ----------------------------------------------------------------------------


class ModelCard(BaseModel):
    """An agent, shown as a model."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "plait"


class ModelList(BaseModel):
    """The agents this server runs, as OpenAI's model list."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


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


def _usage(summary: RunSummary) -> dict[str, int]:
    prompt, completion = summary.usage.input_tokens, summary.usage.output_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def answer_text(summary: RunSummary) -> str:
    """Return the assistant content of a run that did not fail: its final output, or what
    it waits for and how to resume it."""
    if summary.status == "completed":
        output = summary.final_output
        if output is None:
            return ""
        return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    checkpoint = summary.checkpoint_id
    if summary.status == "cancelled":
        if checkpoint is None:
            return "The run was cancelled before it ended."
        return (
            "The run was cancelled. Continue it with POST /v1/runs/"
            f"{checkpoint}/resume and the body {{}}."
        )
    lines = ["The run is paused until these interrupts are answered:"]
    for pending in summary.interrupts:
        info = json.dumps(pending.info, ensure_ascii=False, default=repr)
        lines.append(f"- {pending.id}: {info}")
    lines.append(
        f"Resume it with POST /v1/runs/{checkpoint}/resume and the body "
        '{"value": <answer>} for one interrupt, or {"targets": {"<interrupt id>": <answer>}}.'
    )
    return "\n".join(lines)


def _run_error(summary: RunSummary) -> dict[str, Any]:
    error = summary.error
    return {
        "error": {
            "type": error.type if error is not None else "PlaitError",
            "message": error.message if error is not None else "the run failed",
            "param": None,
            "code": "run_failed",
        }
    }


def _completion(summary: RunSummary, run: LiveRun, created: int) -> ChatCompletion:
    return ChatCompletion(
        id=f"chatcmpl-{run.checkpoint_id}",
        created=created,
        model=run.agent,
        choices=[Choice(message=AssistantMessage(content=answer_text(summary)))],
        usage=CompletionUsage.model_validate(_usage(summary)),
    )


# --- the streamed answer ------------------------------------------------------------------


class ChunkStream(Response):
    """A completion as `chat.completion.chunk` server-sent events, then `data: [DONE]`.

    The first chunk (`delta.role`) goes out at once; the final answer's text comes as a
    content delta when the run has it, then a chunk with `finish_reason`, then (with
    `include_usage`) a chunk with no choices and the run's usage. A comment line keeps a
    quiet stream open. A client that leaves ends the stream, not the run.
    """

    media_type = "text/event-stream"

    def __init__(
        self, run: LiveRun, created: int, include_usage: bool, headers: Mapping[str, str]
    ) -> None:
        self.run = run
        self.created = created
        self.include_usage = include_usage
        self.status_code = 200
        self.background = None
        self.init_headers({"cache-control": "no-store", "x-accel-buffering": "no", **headers})

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _data(self._body([{"index": 0, "delta": delta, "finish_reason": finish}]))

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

    def _ending(self, summary: RunSummary) -> bytes:
        if summary.status == "failed":
            return _data(_run_error(summary)) + _DONE
        parts = [self._chunk({"content": answer_text(summary)}), self._chunk({}, "stop")]
        if self.include_usage:
            parts.append(_data({**self._body([]), "usage": _usage(summary)}))
        return b"".join(parts) + _DONE

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the role chunk, wait for the run's summary, send the answer and `[DONE]`."""
        run = self.run
        loop = asyncio.get_running_loop()
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        first = self._chunk({"role": "assistant", "content": ""})
        await send({"type": "http.response.body", "body": first, "more_body": True})
        listener = loop.create_task(_listen(receive, run))
        ping = loop.call_later(PING_INTERVAL, run.nudge, Nudge.PING)
        try:
            while True:
                item = await run.queue.get()
                if isinstance(item, RunSummary):
                    body = self._ending(item)
                    await send({"type": "http.response.body", "body": body, "more_body": False})
                    return
                if item is Nudge.STOP:  # the client left: the run goes on without it
                    return
                if item is Nudge.PING:
                    await send({"type": "http.response.body", "body": _PING, "more_body": True})
                    ping = loop.call_later(PING_INTERVAL, run.nudge, Nudge.PING)
        finally:
            ping.cancel()
            listener.cancel()


_PING = b": ping\n\n"
_DONE = b"data: [DONE]\n\n"


def _data(body: Mapping[str, Any]) -> bytes:
    return b"data: %b\n\n" % json.dumps(body, ensure_ascii=False).encode()


async def _listen(receive: Receive, run: LiveRun) -> None:
    """Wait for the client to leave; then wake the stream so that it stops."""
    while (await receive())["type"] != "http.disconnect":
        pass
    run.nudge(Nudge.STOP)


# --- the routes ---------------------------------------------------------------------------


def _not_found(model: str) -> JSONResponse:
    message = f"no agent '{model[:128]}'; GET /v1/models lists them"
    body = {
        "error": {"type": "http", "message": message, "param": "model", "code": "model_not_found"}
    }
    return JSONResponse(body, status_code=404)


class Service(Protocol):
    """What the routes use of the app: its agents and its runs."""

    @property
    def agents(self) -> Mapping[str, Agent]:
        """Return the agents by public name."""
        ...

    @property
    def runs(self) -> Runs:
        """Return the app's runs."""
        ...


class Caller(Protocol):
    """Who calls: the app's service and the caller's own view of the store."""

    @property
    def server(self) -> Service:
        """Return the app's service."""
        ...

    @property
    def store(self) -> UserStore:
        """Return the caller's view of the store."""
        ...


#: The app's dependency that authenticates a request and returns its `Caller`.
CallerSource = Callable[..., Awaitable[Caller]]

_ERRORS = {
    400: f"A bad `{SESSION_HEADER}` header.",
    401: "No valid API key.",
    404: "No agent of that name (`code`: model_not_found).",
    413: "The request body is over the server's limit.",
    422: "The body does not match the schema.",
    424: "The run failed (`type`: the plait error class, `code`: run_failed).",
}
_MODELS_ROUTE: dict[str, Any] = {
    "summary": "List the agents as OpenAI models",
    "response_model": ModelList,
    "responses": {401: {"model": ErrorResponse, "description": _ERRORS[401]}},
}
_COMPLETIONS_ROUTE: dict[str, Any] = {
    "summary": "Run an agent as an OpenAI chat completion",
    "response_model": ChatCompletion,
    "responses": {
        200: {
            "description": (
                "A `chat.completion`, or with `stream` true `chat.completion.chunk` events "
                f"ending in `data: [DONE]`. The `{CHECKPOINT_HEADER}` header holds the run's "
                "checkpoint id."
            ),
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **{
            status: {"model": ErrorResponse, "description": text}
            for status, text in _ERRORS.items()
        },
    },
}


def openai_router(caller: CallerSource) -> APIRouter:
    """Return the OpenAI-compatible routes; `caller` is the app's dependency that checks
    the API key and returns the caller (so the routes share the app's keys, users and runs)."""
    router = APIRouter(tags=["openai"])
    created = int(time.time())
    # a default, not an annotation: annotations are strings here, read from the module's names
    caller_dep: Any = Depends(caller)

    @router.get("/v1/models", **_MODELS_ROUTE)
    async def list_models(who: Caller = caller_dep) -> ModelList:
        """Return every agent this server runs as an OpenAI model (`id`: its name)."""
        return ModelList(data=[ModelCard(id=name, created=created) for name in who.server.agents])

    @router.post("/v1/chat/completions", **_COMPLETIONS_ROUTE)
    async def chat_completions(
        body: ChatCompletionRequest,
        session_id: Annotated[
            str | None, Header(alias=SESSION_HEADER, description="Run in this plait session.")
        ] = None,
        who: Caller = caller_dep,
    ) -> Response:
        """Run agent `model` on `messages` and answer with its final output. A run that
        pauses answers with what it waits for; resume it at
        `POST /v1/runs/{checkpoint_id}/resume` (the id is in the `x-plait-checkpoint-id`
        header)."""
        return await _complete(who, body, session_id)

    return router


async def _complete(who: Caller, body: ChatCompletionRequest, session_id: str | None) -> Response:
    """Start the run of a completion; answer with its chunks, its completion or its error."""
    if body.model not in who.server.agents:
        return _not_found(body.model)
    if session_id is not None and (problem := id_problem(session_id)) is not None:
        raise ApiError(400, f"{SESSION_HEADER}: {problem}")
    messages = [m.to_message() for m in body.messages]
    run = await who.server.runs.start(
        who.store, body.model, messages, session_id=session_id, session_values=None
    )
    stamp = int(time.time())
    headers = {CHECKPOINT_HEADER: run.checkpoint_id}
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        return ChunkStream(run, stamp, include_usage, headers)
    summary, _ = await run.outcome()
    if summary.status == "failed":
        return JSONResponse(_run_error(summary), status_code=424, headers=headers)
    completion = _completion(summary, run, stamp)
    return JSONResponse(completion.model_dump(mode="json"), headers=headers)
