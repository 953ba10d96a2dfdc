"""AG-UI front-end tools: `RunAgentInput.tools` are offered to the model, a call of one
pauses the run, and the next request's tool message with its result resumes it.

Requests are built with the `ag-ui-protocol` package's types and sent over a real socket;
every event received is validated by the package's event classes (`tests.server.test_agui`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    EventType,
    FunctionCall,
    ResumeEntry,
    RunAgentInput,
    Tool,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from plait import AgentTool, ChatModelAgent, Message, tool
from plait import ToolCall as PlaitCall
from plait.core.agent import Agent
from plait.server import create_app
from plait.stores import MemoryStore
from plait.testing import ScriptedModel, call, calls
from tests.server.support import ServerThread, client
from tests.server.test_agui import agui, of, streamed_text

CONFIRM = Tool(
    name="confirm",
    description="Ask the user to confirm an action.",
    parameters={
        "type": "object",
        "properties": {"action": {"type": "string"}},
        "required": ["action"],
    },
)
ASK = UserMessage(id="m1", content="delete my account")


@tool
def lookup(account: str) -> str:
    """Look an account up.

    Args:
        account: The account.
    """
    return f"{account} exists"


@contextlib.contextmanager
def serving(agent: Agent) -> Iterator[httpx.Client]:
    """Serve `agent` on a real socket; return a client of it."""
    app = create_app(agent, store=MemoryStore())
    with ServerThread(app) as server, client(server.url) as http:
        yield http


def request(
    thread: str,
    run: str,
    messages: Sequence[Any] = (ASK,),
    tools: Sequence[Tool] = (CONFIRM,),
    **extra: Any,
) -> dict[str, Any]:
    """Return a `RunAgentInput` as its JSON body."""
    body = RunAgentInput(
        thread_id=thread, run_id=run, messages=list(messages), tools=list(tools), **extra
    )
    return body.model_dump(mode="json", by_alias=True, exclude_none=True)


def asked(call_id: str, action: str = "delete", message_id: str = "m2") -> AssistantMessage:
    """Return the assistant message of a `confirm` call, as a client keeps it."""
    arguments = json.dumps({"action": action})
    function = FunctionCall(name="confirm", arguments=arguments)
    return AssistantMessage(
        id=message_id, tool_calls=[ToolCall(id=call_id, type="function", function=function)]
    )


def answered(call_id: str, content: str, **extra: Any) -> ToolMessage:
    """Return the tool message of a client that ran a call."""
    return ToolMessage(id=f"result-{call_id}", tool_call_id=call_id, content=content, **extra)


def paused_on(events: list[BaseEvent]) -> list[Any]:
    """Assert the stream ended with a pause; return its AG-UI interrupts."""
    finished = events[-1]
    assert finished.type == EventType.RUN_FINISHED
    outcome = finished.outcome  # type: ignore[attr-defined]
    assert outcome.type == "interrupt"
    return list(outcome.interrupts)


def confirming_agent(*script: Any) -> tuple[ChatModelAgent, ScriptedModel]:
    """Return an agent with a tool of its own whose model follows `script`."""
    model = ScriptedModel(list(script))
    return ChatModelAgent("assistant", model, tools=[lookup]), model


# --- a front-end tool's round trip -------------------------------------------------------


def test_a_front_end_tool_is_offered_and_its_call_pauses_the_run() -> None:
    agent, model = confirming_agent(call("confirm", {"action": "delete"}, id="call_c1"))
    with serving(agent) as http:
        response, events = agui(http, "assistant", request("t-offer", "run-1"))
        summary = http.get(f"/v1/runs/{response.headers['x-plait-checkpoint-id']}").json()
    offered = model.requests[0].tools
    assert [t.name for t in offered] == ["lookup", "confirm"]  # besides the agent's own
    assert offered[1].description == CONFIRM.description
    assert offered[1].parameters == CONFIRM.parameters
    (start,) = of(events, EventType.TOOL_CALL_START)
    assert (start.tool_call_id, start.tool_call_name) == ("call_c1", "confirm")
    arguments = "".join(e.delta for e in of(events, EventType.TOOL_CALL_ARGS))
    assert json.loads(arguments) == {"action": "delete"}
    ends = of(events, EventType.TOOL_CALL_END)
    assert [e.tool_call_id for e in ends] == ["call_c1"]
    assert of(events, EventType.TOOL_CALL_RESULT) == []  # the client runs it
    (pending,) = paused_on(events)
    assert pending.tool_call_id == "call_c1"
    info = {"tool": "confirm", "arguments": {"action": "delete"}, "tool_call_id": "call_c1"}
    assert pending.metadata["info"] == {"frontend_tool": info}
    result = events[-1].result  # type: ignore[attr-defined]
    assert result["checkpoint_id"] == summary["checkpoint_id"]
    assert summary["status"] == "paused"


def test_the_tool_message_with_the_result_resumes_the_run() -> None:
    agent, model = confirming_agent(
        call("confirm", {"action": "delete"}, id="call_c1"), "Deleted, as you confirmed."
    )
    with serving(agent) as http:
        _, first = agui(http, "assistant", request("t-result", "run-1"))
        checkpoint_id = first[-1].result["checkpoint_id"]  # type: ignore[attr-defined]
        history = [ASK, asked("call_c1"), answered("call_c1", "yes")]
        response, events = agui(http, "assistant", request("t-result", "run-2", history))
        session = http.get("/v1/sessions/t-result").json()
    assert response.headers["x-plait-checkpoint-id"] == checkpoint_id  # that run goes on
    seen = model.requests[1].messages[-1]
    assert (seen.role, seen.tool_call_id, seen.content) == ("tool", "call_c1", "yes")
    assert streamed_text(events) == "Deleted, as you confirmed."
    assert events[-1].result == "Deleted, as you confirmed."  # type: ignore[attr-defined]
    assert events[-1].outcome.type == "success"  # type: ignore[attr-defined]
    assert of(events, EventType.TOOL_CALL_RESULT) == []  # the client has its own result
    assert [(m["role"], m["content"]) for m in session["messages"]] == [
        ("user", "delete my account"),
        ("assistant", ""),
        ("tool", "yes"),
        ("assistant", "Deleted, as you confirmed."),
    ]


def test_a_call_in_an_agent_run_as_a_tool_pauses_and_resumes_the_whole_run() -> None:
    inner_model = ScriptedModel([call("confirm", {"action": "delete"}, id="call_c1"), "done"])
    inner = ChatModelAgent("clerk", inner_model, description="Does account work.")
    outer_model = ScriptedModel([call("clerk", {"request": "delete it"}, id="call_o1"), "ok"])
    outer = ChatModelAgent("desk", outer_model, tools=[AgentTool(inner)])
    with serving(outer) as http:
        _, first = agui(http, "desk", request("t-deep", "run-1"))
        (pending,) = paused_on(first)
        history = [ASK, asked("call_c1"), answered("call_c1", "yes")]
        _, events = agui(http, "desk", request("t-deep", "run-2", history))
    assert pending.tool_call_id == "call_c1"  # the inner call, not the outer one
    assert [t.name for t in outer_model.requests[0].tools] == ["clerk", "confirm"]
    assert inner_model.requests[1].messages[-1].content == "yes"
    assert events[-1].result == "ok"  # type: ignore[attr-defined]


def test_two_calls_are_answered_one_request_at_a_time() -> None:
    both = calls(
        call("confirm", {"action": "delete"}, id="call_c1"),
        call("confirm", {"action": "export"}, id="call_c2"),
    )
    agent, model = confirming_agent(both, "both answered")
    with serving(agent) as http:
        _, first = agui(http, "assistant", request("t-two", "run-1"))
        one = [ASK, asked("call_c1"), answered("call_c1", "yes")]
        _, second = agui(http, "assistant", request("t-two", "run-2", one))
        two = [*one, asked("call_c2", "export", "m3"), answered("call_c2", "no")]
        _, third = agui(http, "assistant", request("t-two", "run-3", two))
    assert sorted(p.tool_call_id for p in paused_on(first)) == ["call_c1", "call_c2"]
    (still,) = paused_on(second)  # the other call asks again, under a fresh interrupt id
    assert still.tool_call_id == "call_c2"
    assert still.id not in {p.id for p in paused_on(first)}
    results = [(m.tool_call_id, m.content) for m in model.requests[1].messages if m.role == "tool"]
    assert results == [("call_c1", "yes"), ("call_c2", "no")]
    assert third[-1].result == "both answered"  # type: ignore[attr-defined]


def test_a_tool_message_with_an_error_tells_the_model_the_error() -> None:
    agent, model = confirming_agent(call("confirm", {"action": "delete"}, id="call_c1"), "sorry")
    with serving(agent) as http:
        agui(http, "assistant", request("t-error", "run-1"))
        failed = answered("call_c1", "", error="the dialog was closed")
        agui(http, "assistant", request("t-error", "run-2", [ASK, asked("call_c1"), failed]))
    assert model.requests[1].messages[-1].content == "error: the dialog was closed"


def test_a_cancelled_resume_entry_declines_the_call() -> None:
    agent, model = confirming_agent(call("confirm", {"action": "delete"}, id="call_c1"), "kept")
    with serving(agent) as http:
        _, first = agui(http, "assistant", request("t-decline", "run-1"))
        (pending,) = paused_on(first)
        entry = ResumeEntry(interrupt_id=pending.id, status="cancelled")
        _, events = agui(http, "assistant", request("t-decline", "run-2", [], resume=[entry]))
    declined = "declined: confirm was not run"
    assert model.requests[1].messages[-1].content == declined
    (result,) = of(events, EventType.TOOL_CALL_RESULT)  # the client sent no result of its own
    assert (result.tool_call_id, result.content) == ("call_c1", declined)
    assert events[-1].result == "kept"  # type: ignore[attr-defined]


def test_arguments_that_are_not_an_object_are_told_to_the_model() -> None:
    bad = Message.assistant(tool_calls=(PlaitCall(id="call_c1", name="confirm", arguments="[1]"),))
    agent, model = confirming_agent(bad, "I will ask properly.")
    with serving(agent) as http:
        _, events = agui(http, "assistant", request("t-args", "run-1"))
    told = model.requests[1].messages[-1]
    assert told.role == "tool" and "must be a JSON object" in told.content
    assert events[-1].outcome.type == "success"  # type: ignore[attr-defined]


# --- requests refused before any stream --------------------------------------------------


def test_a_thread_that_waits_for_a_result_refuses_a_request_without_it() -> None:
    agent, model = confirming_agent(call("confirm", {"action": "delete"}, id="call_c1"), "done")
    with serving(agent) as http:
        agui(http, "assistant", request("t-wait", "run-1"))
        later = [ASK, asked("call_c1"), UserMessage(id="m3", content="never mind")]
        refused, events = agui(http, "assistant", request("t-wait", "run-2", later))
        error = refused.json()["error"]
        history = [ASK, asked("call_c1"), answered("call_c1", "yes")]
        _, resumed = agui(http, "assistant", request("t-wait", "run-3", history))
    assert refused.status_code == 400 and events == []
    assert error["type"] == "ResumeError"
    assert "'call_c1' (confirm)" in error["message"]
    assert len(model.requests) == 2  # the refused request ran nothing
    assert resumed[-1].result == "done"  # type: ignore[attr-defined]  # still waiting, then


def test_user_messages_after_the_result_are_refused() -> None:
    agent, _ = confirming_agent(call("confirm", {"action": "delete"}, id="call_c1"), "done")
    with serving(agent) as http:
        agui(http, "assistant", request("t-after", "run-1"))
        more = UserMessage(id="m4", content="and my files")
        history = [ASK, asked("call_c1"), answered("call_c1", "yes"), more]
        refused, _ = agui(http, "assistant", request("t-after", "run-2", history))
    assert refused.status_code == 400
    assert "would not be read" in refused.json()["error"]["message"]


def test_a_resume_without_the_waiting_tool_is_refused_and_the_run_stays_paused() -> None:
    agent, _ = confirming_agent(call("confirm", {"action": "delete"}, id="call_c1"), "done")
    history = [ASK, asked("call_c1"), answered("call_c1", "yes")]
    with serving(agent) as http:
        agui(http, "assistant", request("t-gone", "run-1"))
        refused, _ = agui(http, "assistant", request("t-gone", "run-2", history, tools=[]))
        _, resumed = agui(http, "assistant", request("t-gone", "run-3", history))
    assert refused.status_code == 400
    assert "['confirm']" in refused.json()["error"]["message"]
    assert resumed[-1].result == "done"  # type: ignore[attr-defined]


def _transferring() -> ChatModelAgent:
    billing = ChatModelAgent("billing", ScriptedModel([]))
    return ChatModelAgent("assistant", ScriptedModel([]), tools=[lookup], sub_agents=[billing])


def _clerk() -> ChatModelAgent:
    return ChatModelAgent("clerk", ScriptedModel([]), description="Does account work.")


@pytest.mark.parametrize(
    ("agent", "tools"),
    [
        (_transferring(), [Tool(name="lookup", description="the agent's own name")]),
        (_transferring(), [Tool(name="transfer_to_agent", description="transfer's name")]),
        (
            ChatModelAgent("assistant", ScriptedModel([]), tools=[AgentTool(_clerk())]),
            [Tool(name="clerk", description="the name of an agent it calls")],
        ),
        (_transferring(), [CONFIRM, CONFIRM]),
    ],
    ids=["own-tool", "transfer", "agent-tool", "twice"],
)
def test_a_front_end_tool_whose_name_is_taken_is_400(agent: Agent, tools: list[Tool]) -> None:
    with serving(agent) as http:
        refused, events = agui(http, "assistant", request("t-clash", "run-1", tools=tools))
    assert refused.status_code == 400 and events == []
    error = refused.json()["error"]
    assert error["type"] == "UsageError"
    assert tools[-1].name in error["message"]


def test_parameters_that_are_not_a_schema_object_are_422() -> None:
    agent, model = confirming_agent("never")
    odd = Tool(name="pick", description="Pick a file.", parameters=["not", "a", "schema"])
    with serving(agent) as http:
        refused, _ = agui(http, "assistant", request("t-schema", "run-1", tools=[odd]))
    assert refused.status_code == 422
    assert "tools[0].parameters" in refused.json()["error"]["message"]
    assert model.requests == []
