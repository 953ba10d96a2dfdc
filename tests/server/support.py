"""What the server tests share: test agents, a real uvicorn server in a thread, SSE parsing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from plait import ChatModelAgent, Message, Team, Usage, interrupt, run_context, tool
from plait.core.agent import Agent
from plait.testing import FunctionModel, call, calls, reply
from plait.tools.base import ToolInfo

WAIT = 10.0  # the longest any test waits for something that should happen at once


@dataclass
class Controls:
    """Switches the test tools watch, shared by every server of a test."""

    release: threading.Event = field(default_factory=threading.Event)
    blocked: threading.Event = field(default_factory=threading.Event)
    slow_started: threading.Event = field(default_factory=threading.Event)
    slow_calls: list[str] = field(default_factory=list)

    def reset(self) -> None:
        """Put every switch back as it was."""
        for event in (self.release, self.blocked, self.slow_started):
            event.clear()
        self.slow_calls.clear()


def _last_user_text(messages: list[Message]) -> str:
    return next(m.content for m in reversed(messages) if m.role == "user")


def _helper_reply(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
    """The helper's model: answers tool results, and picks a tool by the user's words."""
    last = messages[-1]
    if last.role == "tool":
        results = [m.content for m in messages if m.role == "tool"]
        return reply("done: " + " | ".join(results), usage=Usage(input_tokens=3, output_tokens=5))
    words = _last_user_text(messages).split()
    first = words[0] if words else ""
    if first == "approve":
        return call("approve", {"action": " ".join(words[1:])})
    if first == "two":
        return calls(call("approve", {"action": "a"}), call("approve", {"action": "b"}))
    if first in ("slow", "block"):
        return call(first)
    if first == "fail":
        raise RuntimeError("the model is down")
    return reply(f"echo: {' '.join(words)}", usage=Usage(input_tokens=2, output_tokens=3))


def make_agents(controls: Controls) -> dict[str, Agent]:
    """Return the agents every test server runs (fresh objects, same behaviour)."""

    @tool
    def approve(action: str) -> str:
        """Ask a person to approve an action.

        Args:
            action: What to approve.
        """
        answer = interrupt({"question": f"approve {action}?"})
        return f"{action}={answer}"

    @tool
    async def slow() -> str:
        """Work until the run is asked to stop (the first time)."""
        controls.slow_calls.append("slow")
        controls.slow_started.set()
        ctx = run_context()
        deadline = time.monotonic() + WAIT
        while len(controls.slow_calls) == 1 and not ctx.cancelled:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.01)
        return "slow work done"

    @tool
    async def block() -> str:
        """Wait until the test releases it."""
        controls.blocked.set()
        await asyncio.to_thread(controls.release.wait, WAIT)
        return "unblocked"

    helper = ChatModelAgent(
        "helper",
        FunctionModel(_helper_reply),
        description="Echoes, asks for approval, works slowly.",
        tools=[approve, slow, block],
    )
    return {"helper": helper, "desk": _desk_team()}


def _desk_team() -> Team:
    """A swarm whose entry hands off to billing, which answers."""

    def triage(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
        if messages[-1].role == "tool":
            return reply("handed off")
        return call("transfer_to_agent", {"agent_name": "billing", "reason": "a bill"})

    triage_agent = ChatModelAgent("triage", FunctionModel(triage), description="Routes.")
    billing = ChatModelAgent(
        "billing", FunctionModel(lambda m, t: reply("your bill is 10")), description="Bills."
    )
    return Team.swarm(triage_agent, [triage_agent, billing], name="desk", description="A desk.")


class ServerThread:
    """A uvicorn server for `app` on a free port, in a thread of its own."""

    def __init__(self, app: FastAPI) -> None:
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", ws="none", http="h11"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        """Return the server's base URL."""
        sockets = self.server.servers[0].sockets
        host, port = sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + WAIT
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(WAIT * 3)


@contextlib.contextmanager
def client(base_url: str, key: str | None = None) -> Iterator[httpx.Client]:
    """Return an HTTP client for a test server (with a bearer key, if given)."""
    headers = {} if key is None else {"authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=WAIT * 2) as http:
        yield http


def parse_sse(lines: Iterator[str]) -> Iterator[tuple[str, Any]]:
    """Yield (event name, decoded data) for each SSE event in `lines`."""
    name, data = "message", []
    for line in lines:
        if line == "":
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].lstrip(" "))


def stream_run(http: httpx.Client, path: str, body: dict[str, Any]) -> tuple[httpx.Response, list]:
    """POST a streaming run; return the response and its [(event, data)] list."""
    with http.stream("POST", path, json=body) as response:
        if response.status_code != 200:
            response.read()
            return response, []
        return response, list(parse_sse(response.iter_lines()))


def wait_for_status(http: httpx.Client, checkpoint_id: str, *statuses: str) -> dict[str, Any]:
    """Poll a run's summary until its status is one of `statuses`; return it."""
    deadline = time.monotonic() + WAIT
    while True:
        summary = http.get(f"/v1/runs/{checkpoint_id}").json()
        if summary.get("status") in statuses or time.monotonic() > deadline:
            return summary
        time.sleep(0.02)


class BackgroundStream:
    """A streamed run read by a thread of its own (with its own client)."""

    def __init__(self, http: httpx.Client, path: str, body: dict[str, Any]) -> None:
        self._base_url = str(http.base_url)
        self._headers = dict(http.headers)
        self._path, self._body = path, body
        self.started = threading.Event()
        self.status = 0
        self.checkpoint_id = ""
        self.events: list[tuple[str, Any]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with (
            httpx.Client(base_url=self._base_url, headers=self._headers, timeout=WAIT * 2) as http,
            http.stream("POST", self._path, json=self._body) as response,
        ):
            self.status = response.status_code
            self.checkpoint_id = response.headers.get("x-plait-checkpoint-id", "")
            self.started.set()
            self.events = list(parse_sse(response.iter_lines()))

    def join(self) -> list[tuple[str, Any]]:
        """Wait for the stream's end; return its events."""
        self._thread.join(WAIT * 2)
        assert not self._thread.is_alive(), "the stream did not end"
        return self.events
