"""The shortcut of `POST /threads/{thread_id}/runs/stream` through the app's door.

Every streamed run of the Agent Protocol goes through this route, so, like `/v1`'s run
route (`plait.server.run_route`), it is taken from the door (`plait.server.door`) when the
route would run it: a known caller, a JSON body that is a valid `RunCreate` without
`after_seconds`. The body is parsed and validated as FastAPI does it (`json.loads`, then
the model from the object; `pydantic_core.from_json` parses it first, to the same object
as `json.loads`, which parses only what it refuses); the route's own work
(`runs.stream_run`) answers, without the framework's routing over the app's routes and
its dependency solving. Any other request goes on to the route, which answers it as
before (its 401, 422 or 501).
"""

from __future__ import annotations

import json

import pydantic_core
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from plait.protocols.agent_protocol.replay import RunLogs
from plait.protocols.agent_protocol.runs import RunCreate, stream_run
from plait.server.caller import Server, scope_caller
from plait.server.door import Shortcut
from plait.server.run_route import answer, is_json

__all__ = ["stream_shortcut"]

_PREFIX = "/threads/"
_SUFFIX = "/runs/stream"


def _parsed(body: bytes) -> object:
    """Return the JSON object of `body`, as `json.loads` reads it.

    Raises:
        ValueError: It is not JSON (`json.loads`'s error).
        RecursionError: It nests too deep for `json.loads`.
    """
    try:
        return pydantic_core.from_json(body)
    except ValueError:  # (a lone surrogate, a BOM, UTF-16...: `json.loads` may read it)
        return json.loads(body)


def stream_shortcut(logs: RunLogs) -> Shortcut:
    """Return the shortcut of the stream route whose runs keep their events in `logs`."""

    async def shortcut(scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        path: str = scope["path"]
        if scope["method"] != "POST" or not path.startswith(_PREFIX) or not path.endswith(_SUFFIX):
            return False
        thread_id = path[len(_PREFIX) : -len(_SUFFIX)]
        if not thread_id or "/" in thread_id or scope.get("root_path") or not is_json(scope):
            return False
        server: Server = scope["app"].state.plait
        caller = scope_caller(server, scope)
        if caller is None:
            return False
        try:
            request = RunCreate.model_validate(_parsed(body))
        except (ValueError, RecursionError, ValidationError):
            return False
        if request.after_seconds:
            return False
        await answer(scope, receive, send, stream_run(caller, thread_id, request, logs))
        return True

    return shortcut
