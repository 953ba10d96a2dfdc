"""A stream's head (its status and headers) goes out with the run's first event, in one
write with it; alone once `HEAD_HOLD` has passed without one; with what a protocol's relay
queued first (the Agent Protocol's `metadata` and the thread's values)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from plait import ChatModelAgent, tool
from plait.server import create_app
from plait.server.bodies import RunSummary
from plait.server.run_queue import RunQueue
from plait.server.runs import LiveRun, Nudge, Relay, Runs
from plait.server.sse import EventStream
from plait.stores import MemoryStore
from plait.testing import FunctionModel, call, reply

pytestmark = pytest.mark.timeout(60)
WAIT = 30.0  # seconds a test waits for what must come (it fails rather than hangs)


class _Feed:
    def __init__(self, relay: Relay | None = None) -> None:
        self.queue: RunQueue[Any] = RunQueue()
        self.relay = relay if relay is not None else Relay()
        self.relay.put = self.queue.put_nowait

    def nudge(self, nudge: Nudge) -> None:
        self.queue.put_nowait(nudge)


class _Client:
    """The ASGI side of one response: what the app sent, and a way to wait for more."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.changed = asyncio.Event()
        self.left = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        self.changed.set()

    async def until(self, done: Callable[[], bool]) -> None:
        async def wait() -> None:
            while not done():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(wait(), WAIT)

    def kinds(self) -> list[str]:
        return [m["type"].rsplit(".", 1)[-1] for m in self.sent]


async def _turns(n: int = 20) -> None:
    """Let the loop run every ready callback a few times (no time passes for the test)."""
    for _ in range(n):
        await asyncio.sleep(0)


async def _serve(stream: EventStream, client: _Client) -> asyncio.Task[None]:
    scope = {"type": "http"}
    return asyncio.ensure_future(stream(scope, client.receive, client.send))


async def test_the_head_waits_for_the_first_event_and_goes_out_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("plait.server.sse.HEAD_HOLD", 3600.0)
    feed, client = _Feed(), _Client()
    task = await _serve(EventStream(feed, {"x-plait-checkpoint-id": "c1"}), client)  # type: ignore[arg-type]
    await _turns()
    assert client.sent == []  # nothing yet: no event to write the head with
    feed.queue.put_nowait('{"n":1}')
    await client.until(lambda: len(client.sent) == 2)
    start, body = client.sent
    assert start["type"] == "http.response.start" and start["status"] == 200
    assert (b"x-plait-checkpoint-id", b"c1") in start["headers"]
    assert body == {
        "type": "http.response.body",
        "body": b'event: agent_event\r\ndata: {"n":1}\r\n\r\n',
        "more_body": True,
    }
    feed.queue.put_nowait('{"n":2}')
    feed.queue.put_nowait(RunSummary(status="completed", agent="a"))
    await asyncio.wait_for(task, WAIT)
    assert client.kinds() == ["start", "body", "body"]
    assert client.sent[-1]["more_body"] is False
    assert client.sent[-1]["body"].startswith(b'event: agent_event\r\ndata: {"n":2}')
    assert b"event: run_end" in client.sent[-1]["body"]


async def test_a_run_slow_to_give_its_first_event_gets_its_head_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("plait.server.sse.HEAD_HOLD", 0.01)
    feed, client = _Feed(), _Client()
    task = await _serve(EventStream(feed, {}), client)  # type: ignore[arg-type]
    await client.until(lambda: bool(client.sent))  # the head, though no event came
    await _turns()
    assert client.kinds() == ["start"]
    feed.queue.put_nowait('{"n":1}')
    await client.until(lambda: len(client.sent) == 2)
    assert client.sent[1]["body"] == b'event: agent_event\r\ndata: {"n":1}\r\n\r\n'
    feed.queue.put_nowait(RunSummary(status="completed", agent="a"))
    await asyncio.wait_for(task, WAIT)
    assert client.kinds() == ["start", "body", "body"]  # one head, no empty write


async def test_a_run_that_ends_before_any_event_sends_head_and_end_in_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("plait.server.sse.HEAD_HOLD", 3600.0)
    feed, client = _Feed(), _Client()
    task = await _serve(EventStream(feed, {}), client)  # type: ignore[arg-type]
    await _turns()
    feed.queue.put_nowait(RunSummary(status="failed", agent="a"))
    await asyncio.wait_for(task, WAIT)
    assert client.kinds() == ["start", "body"]
    assert client.sent[1]["more_body"] is False
    assert client.sent[1]["body"].startswith(b"event: run_end\r\n")


async def test_a_client_that_leaves_before_the_first_event_ends_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("plait.server.sse.HEAD_HOLD", 3600.0)
    feed, client = _Feed(), _Client()
    task = await _serve(EventStream(feed, {}), client)  # type: ignore[arg-type]
    await _turns()
    client.left.set()
    await asyncio.wait_for(task, WAIT)  # the stream ends; the run is not its to stop
    assert client.kinds() == ["start"]


class _Opening(Relay):
    opening = 1


async def test_what_the_relay_queued_first_waits_with_the_head(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("plait.server.sse.HEAD_HOLD", 3600.0)
    feed, client = _Feed(_Opening()), _Client()
    feed.queue.put_nowait(b"event: metadata\r\ndata: {}\r\n\r\n")  # queued as the run starts
    task = await _serve(EventStream(feed, {}), client)  # type: ignore[arg-type]
    await _turns()
    assert client.sent == []
    feed.queue.put_nowait(b"event: values\r\ndata: {}\r\n\r\n")
    await client.until(lambda: len(client.sent) == 2)
    assert client.sent[1]["body"] == (
        b"event: metadata\r\ndata: {}\r\n\r\nevent: values\r\ndata: {}\r\n\r\n"
    )
    feed.queue.put_nowait(RunSummary(status="completed", agent="a"))
    await asyncio.wait_for(task, WAIT)


# Through the app: the Agent Protocol's stream route and `/v1`, their model held back.


async def _drive(app: Any, method: str, path: str, body: Any, client: _Client) -> None:
    data = json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(data)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": data, "more_body": False}
        return await client.receive()

    await app(scope, receive, client.send)


def _held_app() -> tuple[Any, asyncio.Event, asyncio.Event]:
    """Return an app whose agent's model waits for `go` (and sets `asked` when asked)."""
    asked, go = asyncio.Event(), asyncio.Event()

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    async def answer(messages: list[Any], tools: list[Any]) -> Any:
        if messages[-1].role == "tool":
            return reply("the sum is 3")
        asked.set()
        await go.wait()
        return call("add", {"a": 1, "b": 2})

    agent = ChatModelAgent(
        name="assistant", description="adds", model=FunctionModel(answer), tools=[add]
    )
    return create_app(agent, store=MemoryStore()), asked, go


@pytest.mark.parametrize(
    ("path", "body", "first"),
    [
        ("/v1/agents/assistant/runs", {"input": "add 1 and 2"}, [b"event: agent_event"]),
        (
            "/threads/t1/runs/stream",
            {
                "assistant_id": "assistant",
                "input": {"messages": [{"role": "user", "content": "add 1 and 2"}]},
                "stream_mode": "values",
                "if_not_exists": "create",
            },
            [b"event: metadata", b"event: values", b'"type":"human"', b'"type":"ai"'],
        ),
    ],
)
async def test_a_routes_head_goes_out_with_the_runs_first_event(
    monkeypatch: pytest.MonkeyPatch, path: str, body: Any, first: list[bytes]
) -> None:
    monkeypatch.setattr("plait.server.sse.HEAD_HOLD", 3600.0)
    app, asked, go = _held_app()
    async with app.router.lifespan_context(app):
        client = _Client()
        task = asyncio.ensure_future(_drive(app, "POST", path, body, client))
        await asyncio.wait_for(asked.wait(), WAIT)
        await _turns()
        assert client.sent == []  # the model has not answered: nothing to write yet
        go.set()
        await asyncio.wait_for(task, WAIT)
    assert client.kinds()[:2] == ["start", "body"]
    assert client.sent[0]["status"] == 200
    opening = client.sent[1]["body"]
    assert all(part in opening for part in first), opening
    assert client.sent[-1]["more_body"] is False


# The run's last event goes out with its end, in one write; the events before it as they come.


def _gated_answer_app() -> tuple[Any, asyncio.Event, asyncio.Event]:
    """Return an app whose agent's model, asked again after its tool answered, waits for
    `go` (and sets `asked` as it is asked)."""
    asked, go = asyncio.Event(), asyncio.Event()

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    async def answer(messages: list[Any], tools: list[Any]) -> Any:
        if messages[-1].role == "tool":
            asked.set()
            await go.wait()
            return reply("the sum is 3")
        return call("add", {"a": 1, "b": 2})

    agent = ChatModelAgent(
        name="assistant", description="adds", model=FunctionModel(answer), tools=[add]
    )
    return create_app(agent, store=MemoryStore()), asked, go


@pytest.mark.parametrize("session", [True, False])
async def test_a_runs_last_event_goes_out_with_its_end(
    monkeypatch: pytest.MonkeyPatch, session: bool
) -> None:
    monkeypatch.setattr("plait.server.sse.HEAD_HOLD", 3600.0)
    app, asked, go = _gated_answer_app()
    body: dict[str, Any] = {"input": "add 1 and 2"}
    if session:
        body["session_id"] = "s1"
    async with app.router.lifespan_context(app):
        client = _Client()
        task = asyncio.ensure_future(_drive(app, "POST", "/v1/agents/assistant/runs", body, client))
        await asyncio.wait_for(asked.wait(), WAIT)
        # the tool call's event went out before the model answered (as it came; with a
        # session, once the next event came: the run holds one back for its session)
        await client.until(lambda: len(client.sent) >= 2)
        assert b'"tool_calls"' in client.sent[1]["body"]
        go.set()
        await asyncio.wait_for(task, WAIT)
    last = client.sent[-1]
    assert last["more_body"] is False and b"event: run_end" in last["body"]
    before = b"".join(m.get("body", b"") for m in client.sent[:-1])
    answer = b'"content":"the sum is 3"'  # (the event's message; the end has final_output)
    # with a session the run's last event is known as it comes: it waits for the end
    assert (answer in last["body"]) is session
    assert (answer in before) is not session


class _SlowEnd(MemoryStore):
    """A memory store whose writes of a run's final record wait for `done` (once `slow`)."""

    def __init__(self) -> None:
        super().__init__()
        self.slow = False
        self.waiting = asyncio.Event()
        self.done = asyncio.Event()

    async def put_session(self, session_id: str, data: bytes, **kwargs: Any) -> int:
        if self.slow and "/r/" in session_id and b'"completed"' in data:
            self.waiting.set()
            await self.done.wait()
        return await super().put_session(session_id, data, **kwargs)


def _hello_app(store: _SlowEnd) -> Any:
    """Return an app whose agent answers "hello" at once (one event), on `store`."""
    agent = ChatModelAgent(
        name="assistant", description="answers", model=FunctionModel(lambda m, t: "hello")
    )
    return create_app(agent, store=store)


async def _until_its_end_is_written(
    app: Any, store: _SlowEnd
) -> tuple[_Client, asyncio.Future[None]]:
    """Start a streamed run with a session; return once its end is being written."""
    store.slow = True
    client = _Client()
    body = {"input": "hi", "session_id": "s1"}
    task = asyncio.ensure_future(_drive(app, "POST", "/v1/agents/assistant/runs", body, client))
    await asyncio.wait_for(store.waiting.wait(), WAIT)
    return client, task


async def test_a_client_that_leaves_while_the_last_event_waits_ends_its_answer_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("plait.server.sse.HEAD_HOLD", 3600.0)
    store = _SlowEnd()
    app = _hello_app(store)
    async with app.router.lifespan_context(app):
        client, task = await _until_its_end_is_written(app, store)
        assert client.sent == []  # its one event waits for the end (the head with it)
        client.left.set()
        await asyncio.wait_for(task, WAIT)  # the answer ended, though the end is not written
        assert not store.done.is_set()
        store.done.set()  # (the run ends as the app stops)


async def test_a_nudge_sends_a_last_event_that_waits_for_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("plait.server.sse.HEAD_HOLD", 3600.0)
    live: list[LiveRun] = []
    register = Runs.register

    def seen(runs: Runs, run: LiveRun) -> None:
        live.append(run)
        register(runs, run)

    monkeypatch.setattr(Runs, "register", seen)
    store = _SlowEnd()
    app = _hello_app(store)
    async with app.router.lifespan_context(app):
        client, task = await _until_its_end_is_written(app, store)
        assert client.sent == []  # its one event is its last: it waits for the end
        live[0].nudge(Nudge.PING)  # as the loop's pings (or the head's wait) nudge it
        await client.until(lambda: len(client.sent) == 2)
        assert client.kinds() == ["start", "body"]
        assert b'"content":"hello"' in client.sent[1]["body"]
        assert b": ping" in client.sent[1]["body"]
        assert not store.done.is_set()
        store.done.set()
        await asyncio.wait_for(task, WAIT)
    assert client.kinds() == ["start", "body", "body"]
    assert b"event: run_end" in client.sent[-1]["body"]
