"""AG-UI on the server: `POST /agui/{agent}` streams valid AG-UI events of ordinary runs.

Every event received is validated against the `ag-ui-protocol` package's event classes
(by `type`, with no field the class does not know), and every stream's order is checked.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent, Event, EventType
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from plait import (
    AgentEvent,
    AgentInput,
    ChatModelAgent,
    GuardrailResult,
    Message,
    run_context,
    tool,
)
from plait.core.agent_context import AgentContext
from plait.server import create_app
from plait.stores import MemoryStore
from plait.testing import FunctionModel, ScriptedModel, call, reply
from plait.tools.base import ToolInfo
from tests.server.support import (
    WAIT,
    BackgroundStream,
    Controls,
    ServerThread,
    client,
    parse_sse,
    stream_run,
)

ROOT = Path(__file__).resolve().parents[2]
EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
ENDS = (EventType.RUN_FINISHED, EventType.RUN_ERROR)


def body(thread: str, *texts: str, run: str = "run-1", **extra: Any) -> dict[str, Any]:
    """Return a RunAgentInput (wire names) with one user message per text."""
    messages = [{"id": f"m{i}", "role": "user", "content": t} for i, t in enumerate(texts)]
    return {"threadId": thread, "runId": run, "messages": messages, **extra}


def agui(
    http: httpx.Client | TestClient, agent: str, data: dict[str, Any]
) -> tuple[httpx.Response, list[BaseEvent]]:
    """POST a RunAgentInput; return the response and its validated events (none if not 200)."""
    with http.stream("POST", f"/agui/{agent}", json=data) as response:
        if response.status_code != 200:
            response.read()
            return response, []
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [_validated(item) for name, item in parse_sse(response.iter_lines())]
    check_order(events, data)
    return response, events


def _validated(data: Any) -> BaseEvent:
    """Return the package's event for `data`: its class by `type`, no unknown field."""
    event = EVENTS.validate_python(data)
    assert isinstance(event, BaseEvent)
    assert type(event).__name__ == _class_name(data["type"])
    assert not event.model_extra, f"fields AG-UI does not define: {event.model_extra}"
    return event


def _class_name(kind: str) -> str:
    return "".join(part.capitalize() for part in kind.split("_")) + "Event"


def check_order(events: list[BaseEvent], data: dict[str, Any]) -> None:
    """Assert the AG-UI order: RUN_STARTED first, one end last, every start ended, content
    and arguments only between their start and end, steps nested."""
    assert events[0].type == EventType.RUN_STARTED
    assert events[-1].type in ENDS
    for event in (events[0], events[-1]):
        if event.type != EventType.RUN_ERROR:
            assert (event.thread_id, event.run_id) == (data["threadId"], data["runId"])  # type: ignore[attr-defined]
    texts: set[str] = set()
    calls: set[str] = set()
    steps: list[str] = []
    for event in events[1:-1]:
        kind = event.type
        assert kind not in (EventType.RUN_STARTED, *ENDS)
        if kind == EventType.TEXT_MESSAGE_START:
            assert event.message_id not in texts  # type: ignore[attr-defined]
            texts.add(event.message_id)  # type: ignore[attr-defined]
        elif kind in (EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_END):
            assert event.message_id in texts  # type: ignore[attr-defined]
            if kind == EventType.TEXT_MESSAGE_END:
                texts.remove(event.message_id)  # type: ignore[attr-defined]
        elif kind == EventType.TOOL_CALL_START:
            assert event.tool_call_id not in calls  # type: ignore[attr-defined]
            calls.add(event.tool_call_id)  # type: ignore[attr-defined]
        elif kind in (EventType.TOOL_CALL_ARGS, EventType.TOOL_CALL_END):
            assert event.tool_call_id in calls  # type: ignore[attr-defined]
            if kind == EventType.TOOL_CALL_END:
                calls.remove(event.tool_call_id)  # type: ignore[attr-defined]
        elif kind == EventType.TOOL_CALL_RESULT:
            assert event.tool_call_id not in calls  # type: ignore[attr-defined]
        elif kind == EventType.STEP_STARTED:
            steps.append(event.step_name)  # type: ignore[attr-defined]
        elif kind == EventType.STEP_FINISHED:
            assert steps, "a step finished that never started"
            assert steps.pop() == event.step_name  # type: ignore[attr-defined]
    assert not texts and not calls and not steps, "something started was not ended"


def of(events: list[BaseEvent], kind: EventType) -> list[Any]:
    """Return the events of one type."""
    return [e for e in events if e.type == kind]


def streamed_text(events: list[BaseEvent]) -> str:
    """Return the text of every TEXT_MESSAGE_CONTENT, joined."""
    return "".join(e.delta for e in of(events, EventType.TEXT_MESSAGE_CONTENT))


# --- the app under test: agents, a keyless app, a client ----------------------------------


@tool
def weather(city: str) -> str:
    """Tell the weather in a city, and remember the city asked about.

    Args:
        city: The city.
    """
    run_context().session_values["last_city"] = city
    return f"sunny in {city}"


def _weather_model(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
    if messages[-1].role == "tool":
        return reply(f"It is {messages[-1].content}.")
    return call("weather", {"city": "Paris"}, id="call_w1")


@tool
def approve(action: str) -> str:
    """Ask a person to approve an action.

    Args:
        action: What to approve.
    """
    from plait import interrupt

    answer = interrupt(f"approve {action}?")
    return f"{action}={answer}"


def _approver_model(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
    if messages[-1].role == "tool":
        return reply(f"done: {messages[-1].content}")
    return call("approve", {"action": "deploy"}, id="call_a1")


def _broken_model(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
    raise RuntimeError("the model is down")


class Whole:
    """A custom agent that says one whole message (no stream)."""

    name = "whole"
    description = "Says one whole message."

    async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Answer with one whole message."""
        yield ctx.event(message=Message.assistant("all at once"))


def make_app() -> Any:
    """Return a keyless app with the agents of these tests, on a memory store."""
    echo_model = FunctionModel(
        lambda m, t: reply("echo: " + " ".join(x.content for x in m if x.role == "user"))
    )
    billing = ChatModelAgent("billing", ScriptedModel(["your bill is 10"]))
    desk = ChatModelAgent(
        "desk",
        ScriptedModel([call("transfer_to_agent", {"agent_name": "billing"})]),
        sub_agents=[billing],
    )
    agents = [
        ChatModelAgent("echo", echo_model, instruction="Be brief, {user?}."),
        ChatModelAgent(
            "forecaster", FunctionModel(_weather_model), tools=[weather], output_key="forecast"
        ),
        ChatModelAgent("approver", FunctionModel(_approver_model), tools=[approve]),
        ChatModelAgent("broken", FunctionModel(_broken_model)),
        desk,
        Whole(),
    ]
    return create_app(agents, store=MemoryStore())


@pytest.fixture
def local() -> Iterator[TestClient]:
    """Return a client of a fresh keyless app."""
    with TestClient(make_app(), base_url="http://localhost") as http:
        yield http


# --- runs ---------------------------------------------------------------------------------


def test_a_text_answer_streams_deltas_that_join_to_the_answer(local: TestClient) -> None:
    response, events = agui(local, "echo", body("t-text", "hello there"))
    assert response.status_code == 200
    deltas = of(events, EventType.TEXT_MESSAGE_CONTENT)
    assert len(deltas) > 1  # streamed, not sent whole
    assert streamed_text(events) == "echo: hello there"
    finished = events[-1]
    assert finished.type == EventType.RUN_FINISHED
    assert finished.result == "echo: hello there"  # type: ignore[attr-defined]
    assert finished.outcome.type == "success"  # type: ignore[attr-defined]
    assert [e.step_name for e in of(events, EventType.STEP_STARTED)] == ["echo"]


def test_an_agui_run_is_an_ordinary_run_of_the_server(local: TestClient) -> None:
    response, events = agui(local, "echo", body("t-plain", "hi"))
    checkpoint_id = response.headers["x-plait-checkpoint-id"]
    assert events[0].metadata == {"checkpoint_id": checkpoint_id}
    summary = local.get(f"/v1/runs/{checkpoint_id}").json()
    assert summary["status"] == "completed"
    assert summary["final_output"] == "echo: hi"
    session = local.get("/v1/sessions/t-plain").json()
    assert [m["content"] for m in session["messages"]] == ["hi", "echo: hi"]


def test_a_thread_sends_only_its_new_user_messages(local: TestClient) -> None:
    agui(local, "echo", body("t-turns", "first"))
    history = [
        {"id": "m0", "role": "user", "content": "first"},
        {"id": "m1", "role": "assistant", "content": "echo: first"},
        {"id": "m2", "role": "user", "content": "second"},
    ]
    data = {"threadId": "t-turns", "runId": "run-2", "messages": history}
    _, events = agui(local, "echo", data)
    assert streamed_text(events) == "echo: first second"  # "first" once: from the session
    session = local.get("/v1/sessions/t-turns").json()
    assert [m["content"] for m in session["messages"]] == [
        "first",
        "echo: first",
        "second",
        "echo: first second",
    ]


def test_a_new_thread_takes_the_whole_history(local: TestClient) -> None:
    history = [
        {"id": "m0", "role": "user", "content": "earlier"},
        {"id": "m1", "role": "assistant", "content": "noted"},
        {"id": "m2", "role": "user", "content": "now"},
    ]
    _, events = agui(local, "echo", {"threadId": "t-new", "runId": "r", "messages": history})
    assert streamed_text(events) == "echo: earlier now"


def test_a_whole_message_is_one_content(local: TestClient) -> None:
    _, events = agui(local, "whole", body("t-whole", "hi"))
    assert [e.delta for e in of(events, EventType.TEXT_MESSAGE_CONTENT)] == ["all at once"]


def test_a_tool_call_is_started_given_arguments_ended_and_answered(local: TestClient) -> None:
    _, events = agui(local, "forecaster", body("t-tool", "weather?"))
    kinds = [e.type for e in events if e.type.name.startswith("TOOL_CALL")]
    assert kinds[0] == EventType.TOOL_CALL_START
    assert kinds[-2:] == [EventType.TOOL_CALL_END, EventType.TOOL_CALL_RESULT]
    (start,) = of(events, EventType.TOOL_CALL_START)
    assert (start.tool_call_id, start.tool_call_name) == ("call_w1", "weather")
    arguments = "".join(e.delta for e in of(events, EventType.TOOL_CALL_ARGS))
    assert json.loads(arguments) == {"city": "Paris"}
    (result,) = of(events, EventType.TOOL_CALL_RESULT)
    assert (result.tool_call_id, result.content) == ("call_w1", "sunny in Paris")
    assert streamed_text(events) == "It is sunny in Paris."


def test_state_snapshots_follow_the_session_values(local: TestClient) -> None:
    data = body("t-state", "weather?", state={"units": "C"})
    _, events = agui(local, "forecaster", data)
    snapshots = [e.snapshot for e in of(events, EventType.STATE_SNAPSHOT)]
    assert snapshots[0] == {"units": "C"}  # the state the run starts from
    # the tool's change is sent before the answer's text
    changed = next(
        i
        for i, e in enumerate(events)
        if e.type == EventType.STATE_SNAPSHOT and e.snapshot != snapshots[0]
    )
    assert events[changed].snapshot == {"units": "C", "last_city": "Paris"}
    first_text = next(i for i, e in enumerate(events) if e.type == EventType.TEXT_MESSAGE_START)
    assert changed < first_text
    # at the end: the output_key holds the answer
    assert events[-2].type == EventType.STATE_SNAPSHOT
    assert events[-2].snapshot == {
        "units": "C",
        "last_city": "Paris",
        "forecast": "It is sunny in Paris.",
    }
    assert local.get("/v1/sessions/t-state").json()["values"] == events[-2].snapshot


def test_state_fills_the_instruction(local: TestClient) -> None:
    app_agents = local.app.state.plait.agents  # type: ignore[attr-defined]
    model = app_agents["echo"].model
    agui(local, "echo", body("t-fill", "hi", state={"user": "Ann"}))
    assert model.requests[-1].messages[0].content == "Be brief, Ann."


def test_a_transfer_is_a_step_inside_the_step_of_its_source(local: TestClient) -> None:
    _, events = agui(local, "desk", body("t-desk", "my bill?"))
    steps = [(e.type, e.step_name) for e in events if e.type.name.startswith("STEP")]
    assert steps == [
        (EventType.STEP_STARTED, "desk"),
        (EventType.STEP_STARTED, "billing"),
        (EventType.STEP_FINISHED, "billing"),
        (EventType.STEP_FINISHED, "desk"),
    ]
    assert of(events, EventType.TOOL_CALL_START)[0].tool_call_name == "transfer_to_agent"
    billing_started = events.index(of(events, EventType.STEP_STARTED)[1])
    text_start = events.index(of(events, EventType.TEXT_MESSAGE_START)[0])
    assert billing_started < text_start
    assert streamed_text(events) == "your bill is 10"


def test_a_failing_model_ends_with_run_error(local: TestClient) -> None:
    response, events = agui(local, "broken", body("t-broken", "hi"))
    assert response.status_code == 200
    error = events[-1]
    assert error.type == EventType.RUN_ERROR
    assert error.code == "ModelError"  # type: ignore[attr-defined]
    assert "the model is down" in error.message  # type: ignore[attr-defined]
    assert not of(events, EventType.RUN_FINISHED)


# --- interrupts ---------------------------------------------------------------------------


def _paused(events: list[BaseEvent]) -> tuple[str, str]:
    """Assert a run paused on one interrupt; return (interrupt id, checkpoint id)."""
    finished = events[-1]
    assert finished.type == EventType.RUN_FINISHED
    outcome = finished.outcome  # type: ignore[attr-defined]
    assert outcome.type == "interrupt"
    (pending,) = outcome.interrupts
    result = finished.result  # type: ignore[attr-defined]
    (shown,) = result["interrupts"]
    assert shown["id"] == pending.id
    return pending.id, result["checkpoint_id"]


def test_an_interrupt_ends_the_run_and_resume_entries_continue_it(local: TestClient) -> None:
    _, events = agui(local, "approver", body("t-approve", "deploy it"))
    interrupt_id, checkpoint_id = _paused(events)
    (pending,) = events[-1].outcome.interrupts  # type: ignore[attr-defined]
    assert pending.message == "approve deploy?"
    assert pending.tool_call_id == "call_a1"
    assert local.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "paused"
    answer = {"resume": [{"interruptId": interrupt_id, "status": "resolved", "payload": "yes"}]}
    response, resumed = agui(local, "approver", body("t-approve", run="run-2", **answer))
    assert response.status_code == 200
    (result,) = of(resumed, EventType.TOOL_CALL_RESULT)
    assert (result.tool_call_id, result.content) == ("call_a1", "deploy=yes")
    assert resumed[-1].result == "done: deploy=yes"  # type: ignore[attr-defined]
    assert local.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "completed"
    again = agui(local, "approver", body("t-approve", run="run-3", **answer))[0]
    assert again.status_code == 409  # the pause was answered already


def test_forwarded_props_resume_with_a_value(local: TestClient) -> None:
    agui(local, "approver", body("t-value", "deploy it"))
    props = {"forwardedProps": {"resume": {"value": "no"}}}
    _, resumed = agui(local, "approver", body("t-value", run="run-2", **props))
    assert resumed[-1].result == "done: deploy=no"  # type: ignore[attr-defined]


def test_a_cancelled_resume_entry_answers_none(local: TestClient) -> None:
    _, events = agui(local, "approver", body("t-cancel", "deploy it"))
    interrupt_id, _ = _paused(events)
    entry = {"interruptId": interrupt_id, "status": "cancelled"}
    _, resumed = agui(local, "approver", body("t-cancel", run="r2", resume=[entry]))
    assert resumed[-1].result == "done: deploy=None"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("thread", "extra", "status"),
    [
        ("t-none", {"forwardedProps": {"resume": {"value": 1}}}, 400),  # nothing paused
        ("t-none", {"forwardedProps": {"resume": {"checkpoint_id": "nope"}}}, 404),
        ("t-none", {"forwardedProps": {"resume": {"value": 1, "targets": {}}}}, 422),
        ("t-none", {"forwardedProps": {"resume": {"answer": 1}}}, 422),
        ("t-none", {"forwardedProps": {"resume": "yes"}}, 422),
    ],
)
def test_a_bad_resume_is_refused_before_any_stream(
    local: TestClient, thread: str, extra: dict[str, Any], status: int
) -> None:
    response, events = agui(local, "approver", body(thread, **extra))
    assert response.status_code == status
    assert "error" in response.json()
    assert events == []


def test_a_resume_on_another_agent_is_refused(local: TestClient) -> None:
    agui(local, "approver", body("t-other", "deploy it"))
    props = {"forwardedProps": {"resume": {"value": "yes"}}}
    response, _ = agui(local, "echo", body("t-other", **props))
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "ResumeError"


# --- requests refused before any stream ---------------------------------------------------


def test_an_unknown_agent_is_404(local: TestClient) -> None:
    response, events = agui(local, "nobody", body("t-404", "hi"))
    assert response.status_code == 404
    assert events == []
    assert "nobody" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "data",
    [
        {"runId": "r", "messages": []},  # no threadId
        {"threadId": "t", "runId": "r", "messages": "hi"},
        {"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "robot"}]},
        {
            "threadId": "a/b",
            "runId": "r",
            "messages": [{"id": "1", "role": "user", "content": "x"}],
        },
        {
            "threadId": "t",
            "runId": "r",
            "state": [1],
            "messages": [{"id": "1", "role": "user", "content": "x"}],
        },
    ],
)
def test_a_malformed_body_is_422(local: TestClient, data: dict[str, Any]) -> None:
    response, _ = agui(local, "echo", data)
    assert response.status_code == 422
    assert "error" in response.json()


def test_no_user_message_to_answer_is_400(local: TestClient) -> None:
    data = {
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "1", "role": "assistant", "content": "x"}],
    }
    response, _ = agui(local, "echo", data)
    assert response.status_code == 400


def test_the_route_is_in_the_openapi_schema(local: TestClient) -> None:
    assert "/agui/{agent}" in local.get("/openapi.json").json()["paths"]


def test_without_the_package_the_route_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ag_ui" else found(name, *a)
    )
    app = create_app(ChatModelAgent("echo", ScriptedModel(["hi"])), store=MemoryStore())
    with TestClient(app, base_url="http://localhost") as http:
        response = http.post("/agui/echo", json=body("t", "hi"))
    assert response.status_code == 501
    assert "plait[agui]" in response.json()["error"]["message"]


def test_importing_plait_server_does_not_import_ag_ui() -> None:
    code = "import sys, plait, plait.server; assert 'ag_ui' not in sys.modules, 'imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# --- a real server with API keys (tests/server/conftest.py) -------------------------------


def test_over_a_socket_an_interrupt_and_its_resume(alice: httpx.Client) -> None:
    _, events = agui(alice, "helper", body("t-socket", "approve deploy"))
    interrupt_id, checkpoint_id = _paused(events)
    assert alice.get(f"/v1/runs/{checkpoint_id}").json()["status"] == "paused"
    entries = [{"interruptId": interrupt_id, "status": "resolved", "payload": "yes"}]
    _, resumed = agui(alice, "helper", body("t-socket", run="run-2", resume=entries))
    assert resumed[-1].result == "done: deploy=yes"  # type: ignore[attr-defined]


def test_threads_and_pauses_are_per_user(alice: httpx.Client, bob: httpx.Client) -> None:
    _, events = agui(alice, "helper", body("t-shared", "approve deploy"))
    interrupt_id, checkpoint_id = _paused(events)
    props = {"resume": {"value": "yes"}}
    refused, _ = agui(bob, "helper", body("t-shared", forwardedProps=props))
    assert refused.status_code == 400  # bob's thread "t-shared" has no pause
    props = {"resume": {"value": "yes", "checkpoint_id": checkpoint_id}}
    refused, _ = agui(bob, "helper", body("t-shared", forwardedProps=props))
    assert refused.status_code == 404  # alice's run is not bob's to see
    _, own = agui(bob, "helper", body("t-shared", "hello"))
    assert streamed_text(own) == "echo: hello"  # bob's own session, without alice's turn
    assert bob.get(f"/v1/runs/{checkpoint_id}").status_code == 404
    entries = [{"interruptId": interrupt_id, "status": "resolved", "payload": "ok"}]
    _, resumed = agui(alice, "helper", body("t-shared", run="r2", resume=entries))
    assert resumed[-1].result == "done: deploy=ok"  # type: ignore[attr-defined]


def test_a_cancelled_run_finishes_cancelled_and_resumes_by_checkpoint_id(
    alice: httpx.Client, controls: Controls
) -> None:
    data = body("t-slow", "slow")
    run = BackgroundStream(alice, "/agui/helper", data)
    assert run.started.wait(WAIT) and controls.slow_started.wait(WAIT)
    assert alice.post(f"/v1/runs/{run.checkpoint_id}/cancel").status_code == 202
    events = [_validated(item) for _, item in run.join()]
    check_order(events, data)
    finished = events[-1]
    assert finished.outcome.type == "cancelled"  # type: ignore[attr-defined]
    checkpoint_id = finished.result["checkpoint_id"]  # type: ignore[attr-defined]
    props = {"resume": {"checkpoint_id": checkpoint_id}}
    _, resumed = agui(alice, "helper", body("t-slow", run="run-2", forwardedProps=props))
    assert resumed[-1].result == "done: slow work done"  # type: ignore[attr-defined]


def test_without_a_key_the_route_is_401(base_url: str) -> None:
    response = httpx.post(f"{base_url}/agui/helper", json=body("t", "hi"))
    assert response.status_code == 401


def test_an_answer_an_output_guardrail_blocks_is_streamed_by_no_protocol() -> None:
    def polite(ctx: AgentContext, answer: str) -> GuardrailResult:
        return GuardrailResult(tripwire="stupid" in answer, info="rude")

    def answer(messages: list[Message], tools: list[ToolInfo]) -> str:
        return "a kind answer" if messages[-1].content == "nice" else "what a stupid question"

    agent = ChatModelAgent("rude", FunctionModel(answer), output_guardrails=[polite])
    app = create_app(agent, store=MemoryStore())
    chat = {"model": "rude", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with ServerThread(app) as server, client(server.url) as http:
        _, passed = agui(http, "rude", body("t-kind", "nice"))
        _, events = agui(http, "rude", body("t-rude", "hi"))
        session = http.get("/v1/sessions/t-rude").json()
        _, sse = stream_run(http, "/v1/agents/rude/runs", {"input": "hi"})
        with http.stream("POST", "/v1/chat/completions", json=chat) as response:
            wire = response.read().decode()
    assert passed[-1].type == EventType.RUN_FINISHED
    assert streamed_text(passed) == "a kind answer"  # passed on once the guardrail passed it
    assert events[-1].type == EventType.RUN_ERROR
    assert events[-1].code == "GuardrailTripped"  # type: ignore[attr-defined]
    assert not of(events, EventType.TEXT_MESSAGE_START)
    assert "stupid" not in json.dumps([e.model_dump(mode="json") for e in events])
    assert [m["content"] for m in session["messages"]] == ["hi"]
    assert sse[-1][1]["error"]["type"] == "GuardrailTripped"
    assert "stupid" not in json.dumps(sse)
    assert "GuardrailTripped" in wire and "stupid" not in wire


# --- docs/protocols.md --------------------------------------------------------------------


def test_the_docs_example_runs() -> None:
    page = (ROOT / "docs" / "protocols.md").read_text()
    section = page.split("## AG-UI", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the AG-UI section has no python example"
    namespace: dict[str, Any] = {"__name__": "agui_docs_example"}
    exec(compile(block.group(1), "docs/protocols.md", "exec", dont_inherit=True), namespace)
