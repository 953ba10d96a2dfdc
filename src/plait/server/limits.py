"""The edges of every request: the body-size limit, and errors as `{"error": {type, message}}`.

The app's door (`plait.server.door.Door`) reads the request body before the app does,
counting the bytes actually received, and answers `413` past the limit (`422` for a body
that is not text: `lone_surrogate`). `install_error_handlers` gives FastAPI's own errors
(unknown route, bad body) and plait's errors the API's one error shape. A protocol that
speaks another error shape on its own paths (the OpenAI-compatible routes) registers it with
`add_error_shape`: every error of a request under those paths, from a route, a dependency
(the API key) or the door (the body limit, the Host guard), then takes that shape.
`handled_error` answers an API or plait error as these handlers do, for a route the door
takes without the app's routing.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from plait.errors import (
    CheckpointAlreadyResumed,
    CheckpointNotFound,
    PlaitError,
    QuotaExceeded,
    ResumeError,
    StoreError,
    UsageError,
)

__all__ = [
    "ApiError",
    "ErrorShape",
    "Problem",
    "add_error_shape",
    "error_response",
    "handled_error",
    "install_error_handlers",
    "lone_surrogate",
    "plait_shape",
    "quota_response",
    "status_for",
    "surrogate_problem",
]

_log = logging.getLogger("plait.server")
_MAX_MESSAGE = 2000


class ApiError(Exception):
    """An error response: HTTP status, error type ("http" or a plait error class) and message;
    `param` and `code` are for shapes that carry them (OpenAI's: the request field at fault
    and a machine-readable code)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "http",
        headers: Mapping[str, str] | None = None,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message
        self.headers = dict(headers or {})
        self.param = param
        self.code = code


@dataclass(frozen=True, kw_only=True, slots=True)
class Problem:
    """What went wrong with a request, before it is given a shape: its HTTP status, the
    error type ("http" or a plait error class), the message, and (when known) the request
    field at fault and a machine-readable code."""

    status: int
    type: str
    message: str
    param: str | None = None
    code: str | None = None
    #: More fields of the error (a quota's: `quota`, `retry_after`).
    extra: Mapping[str, Any] | None = None


#: Turns a problem into the status and JSON body of its response.
ErrorShape = Callable[[Problem], tuple[int, dict[str, Any]]]


def plait_shape(problem: Problem) -> tuple[int, dict[str, Any]]:
    """Return the API's own error: `{"error": {"type", "message"}}` (and the problem's
    `extra` fields), the status as it is."""
    error = {"type": problem.type, "message": problem.message, **(problem.extra or {})}
    return problem.status, {"error": error}


def add_error_shape(app: Any, paths: Sequence[str], shape: ErrorShape) -> None:
    """Give the errors of `app`'s requests under `paths` (a path itself, or anything below
    it) the response `shape` makes of them."""
    shapes: list[tuple[tuple[str, ...], ErrorShape]] = getattr(app.state, "error_shapes", [])
    app.state.error_shapes = [*shapes, (tuple(paths), shape)]


def _shape_for(scope: Scope) -> ErrorShape:
    """Return the error shape of the request of `scope` (the API's own by default)."""
    state = getattr(scope.get("app"), "state", None)
    path: str = scope.get("path", "")
    shapes: list[tuple[tuple[str, ...], ErrorShape]] = getattr(state, "error_shapes", [])
    for paths, shape in shapes:
        if any(path == p or path.startswith(p + "/") for p in paths):
            return shape
    return plait_shape


def error_response(
    status: int,
    type: str,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    scope: Scope | None = None,
    param: str | None = None,
    code: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> JSONResponse:
    """Return an error response: `{"error": {"type", "message"}}`, or the shape registered
    for the path of `scope` (`add_error_shape`)."""
    problem = Problem(
        status=status,
        type=type,
        message=message[:_MAX_MESSAGE],
        param=param,
        code=code,
        extra=extra,
    )
    shape = plait_shape if scope is None else _shape_for(scope)
    status, body = shape(problem)
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def status_for(error: PlaitError) -> int:
    """Return the HTTP status of a plait error raised before a run started."""
    if isinstance(error, QuotaExceeded):
        return 429
    if isinstance(error, CheckpointNotFound):
        return 404
    if isinstance(error, CheckpointAlreadyResumed):
        return 409
    if isinstance(error, ResumeError | UsageError):
        return 400
    if isinstance(error, StoreError):
        return 503
    return 500


_ESCAPE = re.compile(rb"\\(u[0-9a-fA-F]{4}|.)", re.S)


def lone_surrogate(body: bytes | bytearray) -> int | None:
    """Return the byte offset of the first JSON escape in `body` that is a lone UTF-16
    surrogate (a high one not followed at once by a low one, or a low one alone), or None.

    Such a string decodes in Python but is not text: it cannot be encoded as UTF-8, so no
    store, stream or summary could keep it. The server refuses it at the door."""
    if b"\\u" not in body:
        return None
    high: tuple[int, int] | None = None  # (start, end) of a high surrogate's escape
    for match in _ESCAPE.finditer(body):
        escape = match.group(1)
        code = int(escape[1:], 16) if len(escape) == 5 else -1
        if high is not None:
            if 0xDC00 <= code <= 0xDFFF and match.start() == high[1]:
                high = None
                continue
            return high[0]
        if 0xD800 <= code <= 0xDBFF:
            high = (match.start(), match.end())
        elif 0xDC00 <= code <= 0xDFFF:
            return match.start()
    return None if high is None else high[0]


def surrogate_problem(body: bytes | bytearray, at: int) -> str:
    """Return the error message of a body holding a lone surrogate at byte `at`
    (`lone_surrogate`), naming where in the JSON it is when the body can be read."""
    where = _surrogate_path(body) or f"the body (a \\u escape at byte {at})"
    return f"{where}: holds a lone UTF-16 surrogate, which is not text: send valid Unicode"


def _surrogate_path(body: bytes | bytearray) -> str | None:
    """Return where in the JSON `body` the first string with a lone surrogate is, as
    `input[0].content`, or None when the body cannot be read as JSON."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str) and _not_text(item):
            return path or "the body"
        if isinstance(item, dict):
            for key, child in reversed(item.items()):
                name = f"{path}.{key}" if path else str(key)
                if _not_text(str(key)):
                    return f"{name!r}"
                stack.append((name, child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in reversed(list(enumerate(item))))
    return None


def _not_text(value: str) -> bool:
    try:
        value.encode()
    except UnicodeEncodeError:
        return True
    return False


_NOT_AN_OBJECT = {"model_attributes_type", "dict_type", "model_type"}


def _describe(errors: Any) -> str:
    """Return validation errors as one line: `body.input: Field required; ...`."""
    parts = []
    for error in errors:
        loc = tuple(error.get("loc", ()))
        kind = error.get("type")
        if kind == "json_invalid":
            detail = (error.get("ctx") or {}).get("error", "")
            at = loc[-1] if len(loc) > 1 else "?"
            parts.append(f"the body is not valid JSON (at character {at}: {detail})")
            continue
        text = f"{'.'.join(str(part) for part in loc)}: {error.get('msg', 'invalid')}"
        if loc == ("body",) and kind in _NOT_AN_OBJECT:
            text += " (send a JSON object with Content-Type: application/json)"
        parts.append(text)
    return "; ".join(parts) or "the request does not match the schema"


def _param(errors: Any) -> str | None:
    """Return the body field the first validation error is about, as `messages[0].role`."""
    for error in errors:
        loc = tuple(error.get("loc", ()))
        if len(loc) < 2 or loc[0] != "body" or error.get("type") == "json_invalid":
            return None
        param = str(loc[1])
        for part in loc[2:]:
            param += f"[{part}]" if isinstance(part, int) else f".{part}"
        return param
    return None


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
    return error_response(exc.status_code, "http", detail, exc.headers, scope=request.scope)


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    return error_response(422, "http", _describe(errors), scope=request.scope, param=_param(errors))


async def _on_api(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(
        exc.status,
        exc.type,
        exc.message,
        exc.headers,
        scope=request.scope,
        param=exc.param,
        code=exc.code,
    )


async def _on_plait(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, PlaitError)
    if isinstance(exc, QuotaExceeded):
        return quota_response(exc, request.scope)
    status = status_for(exc)
    if status >= 500:
        _log.error("%s on %s %s: %s", type(exc).__name__, request.method, request.url.path, exc)
    return error_response(status, type(exc).__name__, exc.message, scope=request.scope)


def quota_response(exc: QuotaExceeded, scope: Scope | None = None) -> JSONResponse:
    """Return the `429` of a quota that refuses a run: `Retry-After`, and the error
    `{"type": "quota_exceeded", "quota", "retry_after", "message"}`."""
    return error_response(
        429,
        "quota_exceeded",
        exc.message,
        {"retry-after": str(exc.retry_after)},
        scope=scope,
        code="quota_exceeded",
        extra={"quota": exc.quota, "retry_after": exc.retry_after},
    )


async def _on_other(request: Request, exc: Exception) -> JSONResponse:
    message = "internal server error (see the server's log)"
    return error_response(500, "http", message, scope=request.scope)


async def handled_error(scope: Scope, exc: Exception) -> JSONResponse | None:
    """Return the response the app's handlers give `exc` (an `ApiError` or a plait error)
    on the request of `scope`; None for any other exception."""
    if isinstance(exc, ApiError):
        return await _on_api(Request(scope), exc)
    if isinstance(exc, PlaitError):
        return await _on_plait(Request(scope), exc)
    return None


def install_error_handlers(app: FastAPI) -> None:
    """Give every error response of `app` the shape `{"error": {"type", "message"}}`."""
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(ApiError, _on_api)
    app.add_exception_handler(PlaitError, _on_plait)
    app.add_exception_handler(Exception, _on_other)
