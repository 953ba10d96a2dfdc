"""A2A over real HTTP: a plait agent served by `a2a.app` to the a2a-sdk's own client, and
`a2a.RemoteAgent` calling a plait A2A server alone, streaming, paused and resumed, as a team
member, a graph node and an `AgentTool`; dead, silent and malformed remotes."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
import uvicorn
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.helpers import get_data_parts, get_text_parts, new_data_part
from a2a.types import (
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from plait import AgentTool, ChatModelAgent, Runner, StateGraph, Team, interrupt
from plait.errors import RemoteAgentError, UsageError
from plait.graph import END, START
from plait.messages import Message as PlaitMessage
from plait.protocols import a2a
from plait.stores import MemoryStore, SqliteStore
from plait.testing import FunctionModel, ScriptedModel, call, reply
from tests.protocols.a2a_support import GatedModel

ROOT = Path(__file__).resolve().parents[2]
WAIT = 10.0


# --- serving ---------------------------------------------------------------------------


class _Server:
    """A uvicorn server for an ASGI app on a free port, in a thread of its own."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", ws="none")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.servers[0].sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> _Server:
        self.thread.start()
        deadline = time.monotonic() + WAIT
        while not self.server.started:  # poll for readiness
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(WAIT)


@pytest.fixture
def serve() -> Iterator[Any]:
    """Return a function that serves an ASGI app until the test ends; it returns the URL."""
    with contextlib.ExitStack() as stack:

        def start(app: Any) -> str:
            server: _Server = stack.enter_context(_Server(app))
            return server.url

        yield start


def ask(question: str) -> str:
    """Ask the person a question and return the answer."""
    answer: str = interrupt(question)
    return answer


def trip_model(questions: Sequence[str] = ("Which city?",)) -> FunctionModel:
    """Return a model that asks `questions` in turn (one `ask` call each), then answers with
    the answers; with no questions it echoes the request."""

    def respond(messages: list[PlaitMessage], tools: Any) -> PlaitMessage:
        start = max(i for i, m in enumerate(messages) if m.role == "user")
        answers = [m.content for m in messages[start:] if m.role == "tool"]
        if len(answers) < len(questions):
            return call("ask", {"question": questions[len(answers)]})
        if not questions:
            return reply(f"you said {messages[start].content}")
        return reply("a trip to " + " on ".join(answers))

    return FunctionModel(respond)


def planner(questions: Sequence[str] = ("Which city?",)) -> ChatModelAgent:
    return ChatModelAgent("planner", trip_model(questions), description="Plans trips.", tools=[ask])


def user_message(text: str | None = None, *, task: Task | None = None, data: Any = None) -> Message:
    message = Message(role=Role.ROLE_USER, message_id=f"m-{time.monotonic_ns()}")
    if text is not None:
        message.parts.append(Part(text=text))
    if data is not None:
        message.parts.append(new_data_part(data))
    if task is not None:
        message.task_id, message.context_id = task.id, task.context_id
    return message


async def send(url: str, message: Message, *, streaming: bool = True) -> list[StreamResponse]:
    """Send `message` with the a2a-sdk's client; return every response."""
    async with httpx.AsyncClient(timeout=WAIT) as http:
        config = ClientConfig(streaming=streaming, httpx_client=http)
        client = await create_client(url, client_config=config)
        return [r async for r in client.send_message(SendMessageRequest(message=message))]


async def final_task(url: str, message: Message) -> Task:
    """Send `message` without streaming; return the task it answers with."""
    [response] = await send(url, message, streaming=False)
    assert response.HasField("task"), response
    return response.task


# --- the server, with the a2a-sdk's client ---------------------------------------------


async def test_the_card_describes_the_agent(serve: Any) -> None:
    url = serve(a2a.app(planner()))
    async with httpx.AsyncClient(timeout=WAIT) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
    assert (card.name, card.description) == ("planner", "Plans trips.")
    assert card.capabilities.streaming is True
    interfaces = [(i.url, i.protocol_version) for i in card.supported_interfaces]
    assert interfaces == [(url + "/", "1.0"), (url + "/", "0.3")]  # where it was asked
    [skill] = card.skills
    assert (skill.name, skill.description) == ("planner", "Plans trips.")
    fixed = serve(
        a2a.app(planner(), url="https://agents.example/planner", streaming=False, version="2.1.0")
    )
    async with httpx.AsyncClient(timeout=WAIT) as http:
        card = await A2ACardResolver(http, fixed).get_agent_card()
    assert {i.url for i in card.supported_interfaces} == {"https://agents.example/planner"}
    assert (card.capabilities.streaming, card.version) == (False, "2.1.0")


async def test_a_run_is_a_completed_task_with_the_answer(serve: Any) -> None:
    url = serve(a2a.app(planner(questions=())))
    task = await final_task(url, user_message("hello there"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    [artifact] = task.artifacts
    assert artifact.name == "answer"
    assert get_text_parts(artifact.parts) == ["you said hello there"]
    assert get_text_parts(task.status.message.parts) == ["you said hello there"]


async def test_streaming_sends_the_text_as_one_artifact_as_it_is_produced(serve: Any) -> None:
    model = GatedModel("you said ", "three words here")
    url = serve(a2a.app(ChatModelAgent("echo", model)))
    updates: list[Any] = []
    async with httpx.AsyncClient(timeout=WAIT) as http:
        client = await create_client(url, client_config=ClientConfig(httpx_client=http))
        request = SendMessageRequest(message=user_message("three words here"))
        async for response in client.send_message(request):
            if response.HasField("artifact_update"):
                updates.append(response.artifact_update)
                model.go.set()  # the first words came before the model went on
            elif response.HasField("status_update"):
                status = response.status_update.status
                if status.state == TaskState.TASK_STATE_WORKING:
                    assert not status.message.parts  # the text is in the artifact only
                last = status.state
    assert last == TaskState.TASK_STATE_COMPLETED
    assert {u.artifact.artifact_id for u in updates} == {"answer"}
    assert [(u.append, u.last_chunk) for u in (updates[0], updates[-1])] == [
        (False, False),
        (True, True),
    ]
    assert get_text_parts(updates[0].artifact.parts) == ["you said "]
    text = "".join("".join(get_text_parts(u.artifact.parts)) for u in updates)
    assert text == "you said three words here"


async def test_an_interrupt_asks_for_input_and_the_next_message_resumes(serve: Any) -> None:
    store = MemoryStore()
    url = serve(a2a.app(planner(), store=store))
    asked = await final_task(url, user_message("plan a trip"))
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    message = asked.status.message
    assert get_text_parts(message.parts) == ["Which city?"]
    [data] = get_data_parts(message.parts)
    [pending] = data["interrupts"]
    assert pending["info"] == "Which city?"
    assert pending["address"].startswith("agent:planner;tool:ask:")
    done = await final_task(url, user_message("Lisbon", task=asked))
    assert (done.id, done.context_id) == (asked.id, asked.context_id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_text_parts(done.artifacts[0].parts) == ["a trip to Lisbon"]
    # the run behind it is a plait run on the context's session
    view = await Runner(planner(), store=store).sessions.get(asked.context_id)
    assert view is not None
    assert [m.content for m in view.messages if m.role == "user"] == ["plan a trip"]
    assert view.messages[-1].content == "a trip to Lisbon"


async def test_a_data_part_is_the_resume_value(serve: Any) -> None:
    seen: list[Any] = []

    def pick(options: list[str]) -> str:
        """Ask the person to pick."""
        seen.append(interrupt({"pick one of": options}))
        return "picked"

    def model(messages: list[PlaitMessage], tools: Any) -> PlaitMessage:
        if messages[-1].role == "tool":
            return reply("ok")
        return call("pick", {"options": ["a", "b"]})

    url = serve(a2a.app(ChatModelAgent("picker", FunctionModel(model), tools=[pick])))
    asked = await final_task(url, user_message("go"))
    assert get_data_parts(asked.status.message.parts)[0]["interrupts"][0]["info"] == {
        "pick one of": ["a", "b"]
    }
    done = await final_task(url, user_message(task=asked, data={"choice": "b", "count": 2}))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert seen == [{"choice": "b", "count": 2}]  # a whole number stays an int


async def test_several_interrupts_take_an_object_by_id_and_a_bad_answer_asks_again(
    serve: Any,
) -> None:
    def model(messages: list[PlaitMessage], tools: Any) -> PlaitMessage:
        if messages[-1].role == "tool":
            return reply(" & ".join(m.content for m in messages if m.role == "tool"))
        return PlaitMessage.assistant(
            "",
            [
                call("ask", {"question": "Which city?"}).tool_calls[0],
                call("ask", {"question": "Which day?"}).tool_calls[0],
            ],
        )

    url = serve(a2a.app(ChatModelAgent("both", FunctionModel(model), tools=[ask])))
    asked = await final_task(url, user_message("go"))
    pending = get_data_parts(asked.status.message.parts)[0]["interrupts"]
    assert sorted(p["info"] for p in pending) == ["Which city?", "Which day?"]
    again = await final_task(url, user_message("Lisbon", task=asked))  # one text for two
    assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert get_text_parts(again.status.message.parts)[0].startswith("could not resume")
    answers = {p["id"]: ("Lisbon" if p["info"] == "Which city?" else "Monday") for p in pending}
    done = await final_task(url, user_message(task=again, data=answers))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_text_parts(done.artifacts[0].parts) == ["Lisbon & Monday"]


async def test_a_failed_run_is_a_failed_task_with_the_error(serve: Any) -> None:
    def broken(messages: list[PlaitMessage], tools: Any) -> PlaitMessage:
        raise RuntimeError("the provider is down")

    url = serve(a2a.app(ChatModelAgent("broken", ScriptedModel([broken]))))
    task = await final_task(url, user_message("hi"))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    [text] = get_text_parts(task.status.message.parts)
    assert text.startswith("ModelError: ") and "the provider is down" in text
    [data] = get_data_parts(task.status.message.parts)
    assert data["error"]["type"] == "ModelError"


async def test_a_task_waiting_for_input_can_be_canceled(serve: Any) -> None:
    url = serve(a2a.app(planner()))
    asked = await final_task(url, user_message("plan a trip"))
    async with httpx.AsyncClient(timeout=WAIT) as http:
        client = await create_client(url, client_config=ClientConfig(httpx_client=http))
        canceled = await client.cancel_task(CancelTaskRequest(id=asked.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_message_without_text_or_data_fails_its_task(serve: Any) -> None:
    url = serve(a2a.app(planner(questions=())))
    message = user_message()
    message.parts.append(Part(url="https://example.com/a.png"))
    task = await final_task(url, message)
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "no text or data part" in get_text_parts(task.status.message.parts)[0]


async def test_a_message_of_data_alone_is_the_input_as_json(serve: Any) -> None:
    url = serve(a2a.app(planner(questions=())))
    task = await final_task(url, user_message(data={"order": 7}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_text_parts(task.artifacts[0].parts) == ['you said {"order": 7}']


async def test_tasks_of_one_context_share_the_session(serve: Any) -> None:
    heard: list[list[str]] = []

    def model(messages: list[PlaitMessage], tools: Any) -> PlaitMessage:
        heard.append([m.content for m in messages if m.role == "user"])
        return reply("noted")

    url = serve(a2a.app(ChatModelAgent("notes", FunctionModel(model))))
    first = await final_task(url, user_message("first"))
    second = user_message("second")
    second.context_id = first.context_id
    await final_task(url, second)
    assert heard == [["first"], ["first", "second"]]


# --- RemoteAgent against a plait A2A server --------------------------------------------


async def test_a_remote_agent_takes_its_name_from_the_card_and_answers(serve: Any) -> None:
    for streaming in (True, False):
        url = serve(a2a.app(planner(questions=()), streaming=streaming))
        remote = a2a.RemoteAgent(url)
        assert (remote.name, remote.description) == ("planner", "Plans trips.")
        result = await Runner(remote).query("hello").collect()
        assert result.error is None, result.error
        assert result.final_output == "you said hello"
        named = a2a.RemoteAgent(url, name="trips", description="Remote trips.")
        assert (named.name, named.description) == ("trips", "Remote trips.")


async def test_a_remote_agent_streams_the_remote_text(serve: Any) -> None:
    model = GatedModel("you said ", "a b c")
    url = serve(a2a.app(ChatModelAgent("echo", model, description="Echoes.")))
    chunks: list[str] = []
    stream = Runner(a2a.RemoteAgent(url), enable_streaming=True).query("a b c")
    async for event in stream:
        assert event.message is not None and event.message.stream is not None
        async for chunk in event.message.stream:
            chunks.append(chunk.content)
            model.go.set()  # the first words came before the remote model went on
    result = await stream.collect()
    assert result.error is None, result.error
    assert chunks[0] == "you said " and "".join(chunks) == "you said a b c"
    assert result.final_output == "you said a b c"


async def test_a_remote_interrupt_pauses_the_local_run_and_resumes_it(
    serve: Any, tmp_path: Path
) -> None:
    url = serve(a2a.app(planner(questions=("Which city?", "Which day?"))))
    store = SqliteStore(tmp_path / "plait.db")
    first = await Runner(a2a.RemoteAgent(url), store=store).query("plan").collect()
    assert first.error is None, first.error
    assert [i.info for i in first.interrupts] == ["Which city?"]
    assert first.checkpoint_id is not None
    # a new runner and agent object on the same store, as another process would
    second = (
        await Runner(a2a.RemoteAgent(url), store=store)
        .resume(first.checkpoint_id, value="Lisbon")
        .collect()
    )
    assert [i.info for i in second.interrupts] == ["Which day?"]
    assert second.checkpoint_id is not None
    done = (
        await Runner(a2a.RemoteAgent(url), store=store, enable_streaming=True)
        .resume(second.checkpoint_id, value="Monday")
        .collect()
    )
    assert done.error is None, done.error
    assert done.final_output == "a trip to Lisbon on Monday"


async def test_a_remote_agent_keeps_a_session_as_one_remote_context(serve: Any) -> None:
    heard: list[list[str]] = []

    def model(messages: list[PlaitMessage], tools: Any) -> PlaitMessage:
        heard.append([m.content for m in messages if m.role == "user"])
        return reply("noted")

    url = serve(a2a.app(ChatModelAgent("notes", FunctionModel(model))))
    runner = Runner(a2a.RemoteAgent(url))
    for text in ("first", "second"):
        result = await runner.query(text, session_id="chat").collect()
        assert result.error is None, result.error
    await runner.query("alone").collect()  # no session: a context of its own
    assert heard == [["first"], ["first", "second"], ["alone"]]


async def test_a_remote_agent_is_a_team_member(serve: Any) -> None:
    url = serve(a2a.app(planner()))

    def lead_model(messages: list[PlaitMessage], tools: Any) -> PlaitMessage:
        if messages[-1].role == "tool":
            return reply(f"the planner says: {messages[-1].content}")
        return call("planner", {"request": "plan a trip"})

    lead = ChatModelAgent("lead", FunctionModel(lead_model), description="Leads.")
    runner = Runner(Team.coordinator(lead, [a2a.RemoteAgent(url)]))
    paused = await runner.query("I want a holiday").collect()
    assert paused.error is None, paused.error
    assert [i.info for i in paused.interrupts] == ["Which city?"]
    assert paused.checkpoint_id is not None
    done = await runner.resume(paused.checkpoint_id, value="Rome").collect()
    assert done.error is None, done.error
    assert done.final_output == "the planner says: a trip to Rome"


class _GraphState(TypedDict, total=False):
    messages: list[Any]


async def test_a_remote_agent_is_a_graph_node(serve: Any) -> None:
    url = serve(a2a.app(planner()))
    graph = StateGraph(_GraphState)
    graph.add_node("planner", a2a.RemoteAgent(url))
    graph.add_edge(START, "planner")
    graph.add_edge("planner", END)
    runner = Runner(graph.compile(name="flow"))
    paused = await runner.query("plan a trip").collect()
    assert paused.error is None, paused.error
    assert [i.info for i in paused.interrupts] == ["Which city?"]
    assert paused.checkpoint_id is not None
    done = await runner.resume(paused.checkpoint_id, value="Oslo").collect()
    assert done.error is None, done.error
    texts = [(await e.message.get_message()).content for e in done.events if e.message]
    assert "a trip to Oslo" in texts


async def test_a_remote_agent_is_an_agent_tool(serve: Any) -> None:
    url = serve(a2a.app(planner(questions=())))

    def model(messages: list[PlaitMessage], tools: Any) -> PlaitMessage:
        if messages[-1].role == "tool":
            return reply(f"done: {messages[-1].content}")
        return call("planner", {"request": "ping"})

    agent = ChatModelAgent("main", FunctionModel(model), tools=[AgentTool(a2a.RemoteAgent(url))])
    result = await Runner(agent).query("go").collect()
    assert result.error is None, result.error
    assert result.final_output == "done: you said ping"


async def test_a_failed_remote_task_is_a_remote_agent_error(serve: Any) -> None:
    def broken(messages: list[PlaitMessage], tools: Any) -> PlaitMessage:
        raise RuntimeError("the provider is down")

    url = serve(a2a.app(ChatModelAgent("broken", ScriptedModel([broken]), description="B.")))
    result = await Runner(a2a.RemoteAgent(url)).query("hi").collect()
    err = result.error
    assert isinstance(err, RemoteAgentError)
    assert (err.state, err.agent_name, err.url) == ("failed", "broken", url)
    assert err.task_id
    assert "ModelError" in err.message and "the provider is down" in err.message


# --- dead, silent and malformed remotes ------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_a_dead_remote_is_a_typed_error_at_once() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(RemoteAgentError, match="cannot read its agent card"):
        a2a.RemoteAgent(url)
    remote = a2a.RemoteAgent(url, name="gone", description="Gone.")
    result = await Runner(remote).query("hi").collect()
    assert isinstance(result.error, RemoteAgentError)
    assert (result.error.url, result.error.agent_name) == (url, "gone")
    assert time.monotonic() - started < 10


@pytest.fixture
def silent_url() -> Iterator[str]:
    """Return the URL of a socket that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


async def test_a_silent_remote_is_a_typed_error_after_the_timeout(silent_url: str) -> None:
    started = time.monotonic()
    with pytest.raises(RemoteAgentError):
        a2a.RemoteAgent(silent_url, timeout=0.5)
    remote = a2a.RemoteAgent(silent_url, name="mute", description="Mute.", timeout=0.5)
    result = await Runner(remote).query("hi").collect()
    assert isinstance(result.error, RemoteAgentError)
    assert time.monotonic() - started < 5


def _card_json(url: str, *, streaming: bool) -> dict[str, Any]:
    return {
        "name": "odd",
        "description": "Answers oddly.",
        "version": "1",
        "supportedInterfaces": [
            {"url": url + "/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": streaming},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }


def _odd_app(card: Any, answer: Response) -> Starlette:
    async def agent_card(request: Request) -> Response:
        body = card(str(request.base_url).rstrip("/")) if callable(card) else card
        return JSONResponse(body)

    async def rpc(request: Request) -> Response:
        return answer

    return Starlette(
        routes=[
            Route("/.well-known/agent-card.json", agent_card),
            Route("/", rpc, methods=["POST"]),
        ]
    )


@pytest.mark.parametrize(
    "card", [[1, 2], {"name": 5}, {"name": "x", "supportedInterfaces": "nope"}]
)
def test_a_malformed_card_is_a_typed_error(serve: Any, card: Any) -> None:
    url = serve(_odd_app(card, PlainTextResponse("")))
    with pytest.raises(RemoteAgentError, match="cannot read its agent card"):
        a2a.RemoteAgent(url)


def test_a_card_without_an_interface_is_a_typed_error(serve: Any) -> None:
    url = serve(_odd_app({"name": "lonely", "description": "L."}, PlainTextResponse("")))
    with pytest.raises(RemoteAgentError, match="names no interface"):
        a2a.RemoteAgent(url)


@pytest.mark.parametrize("streaming", [True, False])
@pytest.mark.parametrize(
    "answer",
    [
        PlainTextResponse("not json at all"),
        JSONResponse({"jsonrpc": "2.0", "id": "1", "result": {"nonsense": 1}}),
        JSONResponse({"surprise": True}),
    ],
    ids=["text", "nonsense-result", "not-json-rpc"],
)
async def test_a_malformed_answer_is_a_typed_error(
    serve: Any, streaming: bool, answer: Response
) -> None:
    url = serve(_odd_app(lambda base: _card_json(base, streaming=streaming), answer))
    remote = a2a.RemoteAgent(url)
    assert remote.name == "odd"
    result = await Runner(remote, enable_streaming=True).query("hi").collect()
    assert isinstance(result.error, RemoteAgentError), result.error


async def test_a_remote_that_answers_with_a_message_is_understood(serve: Any) -> None:
    answer = {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": "hello back"}]}
    rpc = JSONResponse({"jsonrpc": "2.0", "id": "1", "result": {"message": answer}})
    url = serve(_odd_app(lambda base: _card_json(base, streaming=False), rpc))
    result = await Runner(a2a.RemoteAgent(url)).query("hello").collect()
    assert result.error is None, result.error
    assert result.final_output == "hello back"


async def test_headers_go_with_every_request(serve: Any) -> None:
    seen: list[str | None] = []

    async def agent_card(request: Request) -> Response:
        seen.append(request.headers.get("x-api-key"))
        return JSONResponse(_card_json(str(request.base_url).rstrip("/"), streaming=False))

    async def rpc(request: Request) -> Response:
        seen.append(request.headers.get("x-api-key"))
        return JSONResponse({"jsonrpc": "2.0", "id": "1", "result": {}})

    routes = [Route("/.well-known/agent-card.json", agent_card), Route("/", rpc, methods=["POST"])]
    url = serve(Starlette(routes=routes))
    remote = a2a.RemoteAgent(url, headers={"x-api-key": "k-1"})
    await Runner(remote).query("hi").collect()
    assert seen == ["k-1", "k-1"]  # the card, then the message


# --- arguments and the extra -----------------------------------------------------------


def test_bad_arguments_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="http"):
        a2a.RemoteAgent("ftp://example.com", name="x", description="y")
    with pytest.raises(UsageError, match="timeout"):
        a2a.RemoteAgent("http://example.com", name="x", description="y", timeout=0)
    with pytest.raises(UsageError, match="Agent"):
        a2a.app("not an agent")  # type: ignore[arg-type]


def test_importing_plait_does_not_import_the_sdk() -> None:
    code = (
        "import sys, plait, plait.protocols.a2a; "
        "assert 'a2a' not in sys.modules, sorted(m for m in sys.modules if 'a2a' in m)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_without_the_extra_a_usage_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("a2a", "a2a.client", "a2a.server.routes"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(UsageError, match=re.escape('pip install "plait[a2a]"')):
        a2a.app(planner())
    with pytest.raises(UsageError, match=re.escape('pip install "plait[a2a]"')):
        a2a.RemoteAgent("http://example.com", name="x", description="y")


# --- the documented example ------------------------------------------------------------


def test_the_documented_example_runs() -> None:
    page = (ROOT / "docs" / "protocols.md").read_text()
    section = page.split("## A2A", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    namespace: dict[str, Any] = {"__name__": "a2a_example"}
    exec(compile(block.group(1), "docs/protocols.md", "exec", dont_inherit=True), namespace)
