"""The one door of every request of plait's apps: the Host guard, the body limit, shortcuts.

`Door` is a pure ASGI middleware, the only one plait adds to an app (`create_app`, the A2A
app, the MCP app's HTTP side), so that every request of every route and protocol passes the
same checks, in this order, before any route runs:

1. **Host guard** (`rule`, see `plait.server.hosts`): a request whose `Host`, or `Origin`
   from a browser, names a host the server does not answer is refused with `403`.
2. **Body limit** (`max_bytes`, see `plait.server.limits`): the body is read here, counting
   the bytes actually received; a `Content-Length` over the limit is refused before reading
   anything and a chunked body as soon as it passes the limit (`413`); a body holding a
   lone UTF-16 surrogate is refused with `422`. The app then reads the body from memory.
3. **Shortcuts**: a route that every run goes through (`POST /v1/agents/{name}/runs`) may
   take the request straight from the door, without the framework's routing and
   dependency solving. A shortcut takes a request only when it can answer it exactly as
   its route would (a well-formed body, a known caller); anything else it leaves to the
   app, whose route answers it (its errors, with their shapes), so the route is the one
   definition of what the API answers and the shortcut only a faster way to the same
   answer. Requests that FastAPI's own telemetry observes always go through the app.

Errors take the shape registered for the request's path (`limits.add_error_shape`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from plait.server.hosts import HostRule, host_problem
from plait.server.limits import error_response, lone_surrogate, surrogate_problem

__all__ = ["Door", "Shortcut"]

#: A route taken from the door: given the request's scope, its whole body, the `receive`
#: that then reports the client leaving, and `send`; returns whether it answered (False:
#: the app answers, and the shortcut has sent nothing).
Shortcut = Callable[[Scope, bytes, Receive, Send], Awaitable[bool]]


@dataclass
class Door:
    """Check every HTTP request of `app` (see the module's docstring): its host against
    `rule` (None: any host), its body against `max_bytes` (None: no limit, the body is left
    to the app as it streams), then offer it to `shortcut`, then to each of `shortcuts`."""

    app: ASGIApp
    _: KW_ONLY
    rule: HostRule | None = None
    max_bytes: int | None = None
    shortcut: Shortcut | None = None
    shortcuts: Sequence[Shortcut] = ()

    def __post_init__(self) -> None:
        first = () if self.shortcut is None else (self.shortcut,)
        self._offered = (*first, *self.shortcuts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.rule is not None:
            problem = host_problem(self.rule, scope)
            if problem is not None:
                await _answer(send, error_response(403, "http", problem, scope=scope))
                return
        if self.max_bytes is None:
            await self.app(scope, receive, send)
            return
        body = await self._body(scope, receive, send)
        if body is None:
            return
        if self._offered and scope.get("fastapi.telemetry") is None:
            for shortcut in self._offered:  # (`receive` now gives what follows the body)
                if await shortcut(scope, body, receive, send):
                    return
        await self.app(scope, _replay(body, receive), send)

    async def _body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """Return the request's whole body; None when the door answered instead (too
        large, not text) or the client left."""
        assert self.max_bytes is not None
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, send)
            return None
        message = await receive()
        if message["type"] == "http.disconnect":
            return None  # the client left before sending its body
        body: bytes | bytearray = message.get("body", b"")
        if message.get("more_body", False):
            body = bytearray(body)
            while True:
                if len(body) > self.max_bytes:
                    await self._refuse(scope, send)
                    return None
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                body += message.get("body", b"")
                if not message.get("more_body", False):
                    break
        if len(body) > self.max_bytes:
            await self._refuse(scope, send)
            return None
        at = lone_surrogate(body)
        if at is not None:
            problem = surrogate_problem(body, at)
            await _answer(send, error_response(422, "http", problem, scope=scope))
            return None
        return bytes(body)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        message = f"the request body is over the limit of {self.max_bytes} bytes"
        response = error_response(
            413, "http", message, {"connection": "close"}, scope=scope, code="request_too_large"
        )
        await _answer(send, response)


async def _answer(send: Send, response: JSONResponse) -> None:
    """Send an error `response` from the door, before the app sees the request."""
    start = {"type": "http.response.start", "status": response.status_code}
    await send({**start, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """Return a `receive` that gives `body` once, then passes on (to see a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
