"""OpenAI-compatible routes of plait's server: `GET /v1/models`, `GET /v1/models/{model}`,
`POST /v1/chat/completions` and `POST /v1/responses`.

The official `openai` client works against them unchanged: a model is an agent (its public
name), a chat completion or a response is a run of that agent. The routes are mounted on the
app of `create_app`, so they share its door: its Host guard, API keys, body limit, per-user
view of the store, runs and SSE writer. A completion's or a response's run is an ordinary
run, readable at `GET /v1/runs/{checkpoint_id}` (the id is in the `x-plait-checkpoint-id`
header of every answer) and resumable at `POST /v1/runs/{checkpoint_id}/resume` when it pauses.

What an answer holds:
- completed: the run's final output (text as is, any other value as JSON), `usage` summed
  over every model call. Streamed, the text of the run's top-level model turns as the model
  writes it, ending with the final answer (`plait.protocols._openai_common`).
- paused or cancelled: a text that says what the run waits for and how to resume it.
- failed: an error, not an answer: `424` with `{"error": {"message": "<plait error class>:
  ...", "type": "server_error", "param": null, "code": "run_failed"}}` (a streamed chat
  completion, whose status is already sent, ends with that error object as its last `data:`
  line before `[DONE]`; a streamed response with `response.failed`). The `openai` client
  raises, and does not retry (a retry would run the agent again).

Errors on these paths have OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`,
a body that does not fit is a `400`), so the `openai` client raises its own classes
(`BadRequestError`, `AuthenticationError`, `NotFoundError`, ...). `response_format` (and a
response's `text.format`) is honoured or refused (`plait.protocols._openai_format`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Depends, Header
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from plait.core.agent import Agent
from plait.errors import PlaitError
from plait.protocols._openai_chat import (
    ChatCompletion,
    ChatCompletionRequest,
    ChatMessage,
    ChunkRelay,
    completion,
)
from plait.protocols._openai_common import OPENAI_PATHS, openai_error, run_error
from plait.protocols._openai_format import chat_format, format_options, responses_format
from plait.protocols._openai_responses import (
    EventRelay,
    ResponseObject,
    ResponseRequest,
    conversation_of,
    response_object,
)
from plait.server.bodies import RunSummary
from plait.server.limits import ApiError
from plait.server.runs import LiveRun, Runs
from plait.server.sse import EventStream
from plait.server.users import UserStore, id_problem

__all__ = [
    "CHECKPOINT_HEADER",
    "OPENAI_PATHS",
    "SESSION_HEADER",
    "Caller",
    "CallerSource",
    "ChatCompletion",
    "ChatCompletionRequest",
    "ChatMessage",
    "ModelCard",
    "ModelList",
    "ResponseObject",
    "ResponseRequest",
    "openai_error",
    "openai_router",
]

_log = logging.getLogger("plait.server")

#: The response header with the run's checkpoint id (as on the app's other run routes).
CHECKPOINT_HEADER = "x-plait-checkpoint-id"
#: The request header that runs a completion in a plait session.
SESSION_HEADER = "x-plait-session-id"


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


# --- the routes ---------------------------------------------------------------------------


class OpenAIErrorInfo(BaseModel):
    """What went wrong, as OpenAI says it."""

    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None


class OpenAIError(BaseModel):
    """An error of the OpenAI-compatible routes."""

    error: OpenAIErrorInfo


def _agent(who: Caller, model: str) -> Agent:
    """Return the agent served as `model`.

    Raises:
        ApiError: `404` (`code` model_not_found): no such agent.
    """
    agent = who.server.agents.get(model)
    if agent is None:
        message = f"no agent '{model[:128]}'; GET /v1/models lists them"
        raise ApiError(404, message, param="model", code="model_not_found")
    return agent


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
    400: (
        "A body that does not fit, a `response_format` (`text.format`) the agent cannot "
        f"honour (`code`: unsupported_response_format), a bad `{SESSION_HEADER}` header or "
        "`previous_response_id`."
    ),
    401: "No valid API key.",
    404: "No agent of that name (`code`: model_not_found).",
    413: "The request body is over the server's limit.",
    424: "The run failed (`code`: run_failed; the message names the plait error class).",
}


def _route(summary: str, model: Any, answer: str, *statuses: int) -> dict[str, Any]:
    """Return the OpenAPI description of a route: its summary, answer and errors."""
    responses: dict[int | str, Any] = {
        status: {"model": OpenAIError, "description": _ERRORS[status]} for status in statuses
    }
    if answer:
        responses[200] = {
            "description": answer,
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }
    return {"summary": summary, "response_model": model, "responses": responses}


_STREAMED = (
    "The `{kind}`, or with `stream` true {events}. The `x-plait-checkpoint-id` header holds "
    "the run's checkpoint id."
)
_COMPLETIONS_ROUTE = _route(
    "Run an agent as an OpenAI chat completion",
    ChatCompletion,
    _STREAMED.format(
        kind="chat.completion", events="`chat.completion.chunk` events ending in `data: [DONE]`"
    ),
    400,
    401,
    404,
    413,
    424,
)
_RESPONSES_ROUTE = _route(
    "Run an agent as an OpenAI response",
    ResponseObject,
    _STREAMED.format(kind="response", events="`response.*` events ending in `response.completed`"),
    400,
    401,
    404,
    413,
    424,
)


def openai_router(caller: CallerSource) -> APIRouter:
    """Return the OpenAI-compatible routes; `caller` is the app's dependency that checks
    the API key and returns the caller (so the routes share the app's keys, users and runs)."""
    router = APIRouter(tags=["openai"])
    created = int(time.time())
    # a default, not an annotation: annotations are strings here, read from the module's names
    caller_dep: Any = Depends(caller)

    @router.get("/v1/models", **_route("List the agents as OpenAI models", ModelList, "", 401))
    async def list_models(who: Caller = caller_dep) -> ModelList:
        """Return every agent this server runs as an OpenAI model (`id`: its name)."""
        return ModelList(data=[ModelCard(id=name, created=created) for name in who.server.agents])

    @router.get(
        "/v1/models/{model}",
        **_route("Describe an agent as an OpenAI model", ModelCard, "", 401, 404),
    )
    async def retrieve_model(model: str, who: Caller = caller_dep) -> ModelCard:
        """Return agent `model` as an OpenAI model."""
        _agent(who, model)
        return ModelCard(id=model, created=created)

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

    @router.post("/v1/responses", **_RESPONSES_ROUTE)
    async def create_response(body: ResponseRequest, who: Caller = caller_dep) -> Response:
        """Run agent `model` on `input` and answer with its final output; with
        `previous_response_id`, in the conversation of that response (its latest)."""
        return await _respond(who, body)

    return router


async def _complete(who: Caller, body: ChatCompletionRequest, session_id: str | None) -> Response:
    """Start the run of a completion; answer with its chunks, its completion or its error."""
    agent = _agent(who, body.model)
    if session_id is not None and (problem := id_problem(session_id)) is not None:
        raise ApiError(400, f"{SESSION_HEADER}: {problem}")
    wanted = chat_format(body.response_format)
    options = format_options(agent, wanted)
    stamp = int(time.time())
    relay = None
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        relay = ChunkRelay(stamp, include_usage, live=wanted is None)
    run = await who.server.runs.start(
        who.store,
        body.model,
        [m.to_message() for m in body.messages],
        session_id=session_id,
        session_values=None,
        streaming=relay is not None,
        relay=relay,
        options=options,
    )
    return await _answer(run, relay is not None, lambda summary: completion(summary, run, stamp))


async def _respond(who: Caller, body: ResponseRequest) -> Response:
    """Start the run of a response; answer with its events, the response or its error."""
    agent = _agent(who, body.model)
    wanted = responses_format(body.text.format if body.text is not None else None)
    options = format_options(agent, wanted)
    runs = who.server.runs
    session_id = await conversation_of(who.store, runs, body.previous_response_id)
    session_id = session_id or uuid.uuid4().hex
    relay = EventRelay(body, live=wanted is None) if body.stream else None
    run = await runs.start(
        who.store,
        body.model,
        body.messages(),
        session_id=session_id,
        session_values=None,
        streaming=relay is not None,
        relay=relay,
        options=options,
    )
    try:  # the run has started: its answer goes out whether or not this is kept
        await who.store.put_record("o", session_id, run.checkpoint_id.encode())
    except PlaitError as exc:
        _log.warning(
            "could not record response %s as its conversation's latest: %s", run.checkpoint_id, exc
        )
    return await _answer(
        run, relay is not None, lambda summary: response_object(body, run, summary)
    )


async def _answer(
    run: LiveRun, streamed: bool, answer: Callable[[RunSummary], BaseModel]
) -> Response:
    """Answer with the run's events as they come (`streamed`), or, once it ends, with the
    body `answer` makes of its summary, or with its error."""
    headers = {CHECKPOINT_HEADER: run.checkpoint_id}
    if streamed:
        return EventStream(run, headers)
    summary, _ = await run.outcome()
    if summary.status == "failed":
        return JSONResponse(run_error(summary), status_code=424, headers=headers)
    return JSONResponse(answer(summary).model_dump(mode="json"), headers=headers)
