"""A provider endpoint over real HTTP that replays scripted answers, for the model tests."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

SSE = Callable[[list[dict[str, Any]]], AsyncIterator[str]]


@dataclass
class Scripted:
    """One scripted answer: a JSON body, or SSE events, with a status and a delay."""

    body: dict[str, Any] | None = None
    events: list[dict[str, Any]] | None = None
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


class ScriptedServer:
    """A POST endpoint at `path` that records requests and replays a script."""

    def __init__(self, path: str, sse: SSE, exhausted: dict[str, Any]) -> None:
        self.script: list[Scripted] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.base_url = ""
        self._sse = sse
        self._exhausted = exhausted
        self.app = FastAPI()
        self.app.post(path)(self._answer)

    def reset(self, *script: Scripted) -> None:
        self.script = list(script)
        self.requests = []
        self.headers = []

    async def _answer(self, request: Request) -> Response:
        self.requests.append(await request.json())
        self.headers.append(dict(request.headers))
        if not self.script:
            return JSONResponse(self._exhausted, status_code=599)
        answer = self.script.pop(0)
        if answer.delay:
            await asyncio.sleep(answer.delay)
        if answer.events is not None:
            return StreamingResponse(self._sse(answer.events), media_type="text/event-stream")
        return JSONResponse(answer.body, status_code=answer.status, headers=answer.headers)


@contextmanager
def serving(fake: ScriptedServer, root: str = "") -> Iterator[ScriptedServer]:
    """Serve `fake` on a free 127.0.0.1 port in a thread; set its `base_url` (+ `root`)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(fake.app, log_level="warning", lifespan="off", ws="none", http="h11")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.01)
    fake.base_url = f"http://127.0.0.1:{port}{root}"
    try:
        yield fake
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
