"""What `POST /v1/agents/{name}/runs` does, and its shortcut through the app's door.

`start` is the route's work, whichever way a request reaches it: FastAPI's route in
`plait.server.app` (with its dependencies: the caller, the validated body), or
`run_shortcut`, which the door (`plait.server.door`) offers every request first. Every run
goes through this route, so the shortcut spares it the framework's routing over the app's
routes and its dependency solving; it takes only a request the route would run (a known
agent, a known caller, a JSON body that is a valid `RunRequest`) and leaves any other to the
route, whose answer is then the API's (404, 401, 422 with their messages).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from email.message import Message as _ContentType

from fastapi import Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from plait.server.bodies import RunRequest
from plait.server.caller import CHECKPOINT_HEADER, Caller, Server, scope_caller
from plait.server.limits import ApiError, handled_error
from plait.server.rejoin import kept_relay
from plait.server.runs import LiveRun
from plait.server.sse import EventStream

__all__ = ["answer", "is_json", "respond", "run_shortcut", "start"]

_PREFIX = "/v1/agents/"
_SUFFIX = "/runs"
_NAME_AT, _NAME_END = len(_PREFIX), -len(_SUFFIX)


async def start(caller: Caller, name: str, body: RunRequest) -> Response:
    """Start a run of agent `name` for `caller` as `body` asks; answer with its stream or
    its summary.

    Raises:
        ApiError: No agent `name` (`404`).
        PlaitError: The run could not start (a quota, the store).
    """
    if name not in caller.server.agents:
        raise ApiError(404, f"no agent '{name[:128]}'; GET /v1/agents lists them")
    run = await caller.server.runs.start(
        caller.store,
        name,
        body.messages(),
        session_id=body.session_id,
        session_values=body.session_values,
        streaming=body.deltas,
        relay=kept_relay(caller.server.runs, body.deltas),
    )
    return await respond(run, body.stream)


async def respond(run: LiveRun, stream: bool) -> Response:
    """Answer with the run's event stream, or wait for it and answer with its summary."""
    headers = {CHECKPOINT_HEADER: run.checkpoint_id}
    if stream:
        return EventStream(run, headers)
    summary, events = await run.outcome()
    body = summary.model_dump(mode="json")
    body["events"] = [json.loads(event) for event in events]
    return JSONResponse(body, headers=headers)


async def run_shortcut(scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
    """Start the run of a `POST /v1/agents/{name}/runs` the route would run, and answer it;
    return False (having sent nothing) for any other request (see the module's docstring)."""
    path: str = scope["path"]
    if scope["method"] != "POST" or not path.startswith(_PREFIX) or not path.endswith(_SUFFIX):
        return False
    name = path[_NAME_AT:_NAME_END]
    server: Server = scope["app"].state.plait
    if name not in server.agents or scope.get("root_path") or not is_json(scope):
        return False
    caller = scope_caller(server, scope)
    if caller is None:
        return False
    try:
        request = RunRequest.model_validate_json(body)
    except ValidationError:
        return False
    await answer(scope, receive, send, start(caller, name, request))
    return True


async def answer(scope: Scope, receive: Receive, send: Send, respond: Awaitable[Response]) -> None:
    """Answer a request a shortcut took with the response `respond` gives, or with the
    response the app's handlers give the error it raises (as its route would)."""
    try:
        response = await respond
    except Exception as exc:
        handled = await handled_error(scope, exc)
        if handled is None:
            raise  # the app's last handler answers `500` and logs it
        response = handled
    await response(scope, receive, send)


def is_json(scope: Scope) -> bool:
    """Whether the request says its body is JSON, as FastAPI reads `Content-Type`."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            found = value.decode("latin-1")
            if found == "application/json":
                return True
            kind = _ContentType()
            kind["content-type"] = found
            subtype = kind.get_content_subtype()
            return kind.get_content_maintype() == "application" and (
                subtype == "json" or subtype.endswith("+json")
            )
    return False
