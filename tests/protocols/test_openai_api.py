"""The OpenAI-compatible routes, driven by the official `openai` client against a real server:
models, completions (plain and streamed), usage over every model call, pauses, failures,
bad bodies and OpenAI's error shape, API keys and per-user isolation, sessions, and the
example of docs/protocols.md."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from plait import ChatModelAgent, Message, Usage, interrupt, tool
from plait.testing import ScriptedModel, call, reply
from plait.tools.base import ToolInfo
from tests.protocols.openai_support import HEADER, serve
from tests.server.support import client, wait_for_status

ROOT = Path(__file__).resolve().parents[2]


@tool
def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: The order id.
    """
    return f"order {order} ships today"


@tool
def refund(order: str) -> str:
    """Refund an order once a person approves.

    Args:
        order: The order id.
    """
    answer = interrupt({"question": f"refund {order}?"})
    return f"refund {order}: {answer}"


def _tool_answer(messages: list[Message], tools: list[ToolInfo]) -> Message:
    """The model's second reply: the tool's result, as the final answer."""
    assert messages[-1].role == "tool"
    return reply(f"Done: {messages[-1].content}.", usage=Usage(input_tokens=20, output_tokens=7))


def _desk(*script: Any) -> ChatModelAgent:
    return ChatModelAgent(
        "desk", ScriptedModel(list(script)), description="Answers.", tools=[lookup, refund]
    )


def _two_calls() -> ChatModelAgent:
    """A run of two model calls: a tool call, then an answer built from the tool's result."""
    first = call("lookup", {"order": "A-1"}, usage=Usage(input_tokens=11, output_tokens=3))
    return _desk(first, _tool_answer)


async def _drain(stream: AsyncIterator[Any]) -> None:
    async for _ in stream:
        pass


async def test_models_are_the_agents(openai_for: Any) -> None:
    other = ChatModelAgent("helper", ScriptedModel([]), description="Helps.")
    with serve(_desk(), other) as url:
        page = await openai_for(url).models.list()
    assert [m.id for m in page.data] == ["desk", "helper"]
    assert all(m.object == "model" and m.owned_by == "plait" for m in page.data)
    assert all(isinstance(m.created, int) and m.created > 0 for m in page.data)


async def test_a_model_is_retrieved_by_its_agents_name(openai_for: Any) -> None:
    with serve(_desk()) as url:
        models = openai_for(url).models
        found = await models.retrieve("desk")
        listed = (await models.list()).data
        with pytest.raises(openai.NotFoundError) as missing:
            await models.retrieve("nobody")
        with pytest.raises(openai.AuthenticationError):
            await openai_for(url, key="wrong").models.retrieve("desk")
    assert (found.id, found.object, found.owned_by) == ("desk", "model", "plait")
    assert found == listed[0]
    assert missing.value.body == {
        "message": "no agent 'nobody'; GET /v1/models lists them",
        "type": "not_found_error",
        "param": "model",
        "code": "model_not_found",
    }


async def test_a_completion_sums_usage_over_every_model_call(openai_for: Any) -> None:
    agent = _two_calls()
    with serve(agent) as url:
        response = await openai_for(url).chat.completions.with_raw_response.create(
            model="desk",
            messages=[{"role": "user", "content": "Where is A-1?"}],
            temperature=0.2,  # OpenAI fields plait does not use are ignored
            user="someone",
            metadata={"k": "v"},
        )
        completion = response.parse()
        with client(url, "key-alice") as http:
            summary = http.get(f"/v1/runs/{response.headers[HEADER]}").json()
    assert completion.object == "chat.completion"
    assert completion.model == "desk"
    [choice] = completion.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == "Done: order A-1 ships today."
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 31
    assert completion.usage.completion_tokens == 10
    assert completion.usage.total_tokens == 41
    assert completion.id == f"chatcmpl-{response.headers[HEADER]}"
    # the run is an ordinary run of the server
    assert summary["status"] == "completed"
    assert summary["agent"] == "desk"
    assert summary["final_output"] == "Done: order A-1 ships today."
    assert summary["usage"] == {"input_tokens": 31, "output_tokens": 10}


async def test_messages_become_the_runs_input(openai_for: Any) -> None:
    model = ScriptedModel(["ok"])
    agent = ChatModelAgent("desk", model, description="Answers.")
    messages: list[Any] = [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "f done"},
        {"role": "assistant", "content": "f is done."},
        {"role": "user", "content": "Thanks", "name": "ann"},
    ]
    with serve(agent) as url:
        completion = await openai_for(url).chat.completions.create(model="desk", messages=messages)
    assert completion.choices[0].message.content == "ok"
    sent = [m for m in model.requests[0].messages if m.role != "system" or m.content == "Be brief."]
    assert [(m.role, m.content) for m in sent] == [
        ("system", "Be brief."),
        ("user", "Hi\nthere"),
        ("assistant", ""),
        ("tool", "f done"),
        ("assistant", "f is done."),
        ("user", "Thanks"),
    ]
    assert sent[2].tool_calls[0].id == "c1" and sent[2].tool_calls[0].name == "f"
    assert sent[3].tool_call_id == "c1" and sent[5].name == "ann"


async def test_a_streamed_completion_sends_only_the_final_answer(openai_for: Any) -> None:
    with serve(_two_calls()) as url:
        stream = await openai_for(url).chat.completions.create(
            model="desk", messages=[{"role": "user", "content": "Where is A-1?"}], stream=True
        )
        chunks = [chunk async for chunk in stream]
    assert all(c.object == "chat.completion.chunk" and c.model == "desk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == "Done: order A-1 ships today."  # no tool call, no tool result
    assert [c.choices[0].finish_reason for c in chunks][-1] == "stop"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    assert all(c.usage is None for c in chunks)


async def test_a_stream_ends_with_done_on_the_wire() -> None:
    with serve(_two_calls()) as url, client(url, "key-alice") as http:
        body = {"model": "desk", "messages": [{"role": "user", "content": "A-1?"}], "stream": True}
        with http.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            checkpoint_id = response.headers[HEADER]
            lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    assert all(line.startswith("data: ") for line in lines)
    chunks = [json.loads(line[len("data: ") :]) for line in lines[:-1]]
    assert chunks[0]["id"] == f"chatcmpl-{checkpoint_id}"
    assert "usage" not in chunks[0]


async def test_include_usage_adds_a_last_usage_chunk(openai_for: Any) -> None:
    with serve(_two_calls()) as url:
        stream = await openai_for(url).chat.completions.create(
            model="desk",
            messages=[{"role": "user", "content": "Where is A-1?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    *answer, last = chunks
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (31, 10)
    assert last.usage.total_tokens == 41
    assert all(c.usage is None for c in answer)
    assert answer[-1].choices[0].finish_reason == "stop"


async def test_a_paused_run_says_what_it_waits_for(openai_for: Any) -> None:
    agent = _desk(call("refund", {"order": "B-2"}), _tool_answer)
    with serve(agent) as url:
        response = await openai_for(url).chat.completions.with_raw_response.create(
            model="desk", messages=[{"role": "user", "content": "Refund B-2"}]
        )
        checkpoint_id = response.headers[HEADER]
        completion = response.parse()
        with client(url, "key-alice") as http:
            summary = http.get(f"/v1/runs/{checkpoint_id}").json()
            resumed = http.post(
                f"/v1/runs/{checkpoint_id}/resume", json={"value": "yes", "stream": False}
            ).json()
    [choice] = completion.choices
    assert choice.finish_reason == "stop"
    content = choice.message.content or ""
    assert summary["status"] == "paused"
    [pending] = summary["interrupts"]
    assert '{"question": "refund B-2?"}' in content
    assert pending["id"] in content
    assert f"POST /v1/runs/{summary['checkpoint_id']}/resume" in content
    assert resumed["status"] == "completed"
    assert resumed["final_output"] == "Done: refund B-2: yes."


async def test_a_streamed_pause_has_the_header_and_the_message(openai_for: Any) -> None:
    agent = _desk(call("refund", {"order": "B-2"}))
    with serve(agent) as url:
        response = await openai_for(url).chat.completions.with_raw_response.create(
            model="desk", messages=[{"role": "user", "content": "Refund B-2"}], stream=True
        )
        chunks = [chunk async for chunk in response.parse()]
    checkpoint_id = response.headers[HEADER]
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert f"POST /v1/runs/{checkpoint_id}/resume" in text
    assert "refund B-2?" in text
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_an_unknown_model_is_not_found(openai_for: Any) -> None:
    with serve(_desk()) as url:
        with pytest.raises(openai.NotFoundError) as raised:
            await openai_for(url).chat.completions.create(
                model="nobody", messages=[{"role": "user", "content": "hi"}]
            )
        with client(url, "key-alice") as http:
            streamed = http.post(
                "/v1/chat/completions",
                json={
                    "model": "nobody",
                    "messages": [{"role": "user", "content": "hi"}],
                    "stream": True,
                },
            )
    assert raised.value.status_code == 404
    assert raised.value.body == {
        "message": "no agent 'nobody'; GET /v1/models lists them",
        "type": "not_found_error",
        "param": "model",
        "code": "model_not_found",
    }
    assert streamed.status_code == 404  # checked before any stream starts
    assert streamed.json()["error"]["code"] == "model_not_found"


@pytest.mark.parametrize(
    ("body", "found", "param"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "body.model: Field required", "model"),
        ({"model": "desk"}, "body.messages: Field required", "messages"),
        (
            {"model": "desk", "messages": []},
            "body.messages: List should have at least 1 item",
            "messages",
        ),
        (
            {"model": "desk", "messages": [{"role": "robot", "content": "hi"}]},
            "role",
            "messages[0].role",
        ),
        (
            {
                "model": "desk",
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                ],
            },
            "only text parts are supported, got a 'image_url' part",
            "messages[0].content",
        ),
        ({"model": "desk", "messages": [{"role": "tool", "content": "r"}]}, "tool_call_id", None),
        ({"model": "desk", "messages": [{"role": "user"}]}, "a user message needs content", None),
        ({"model": "desk", "messages": "hi"}, "body.messages", "messages"),
        (
            {"model": "desk", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"},
            "stream",
            "stream",
        ),
    ],
)
def test_a_bad_body_is_a_400_invalid_request_error(
    body: dict[str, Any], found: str, param: str | None
) -> None:
    model = ScriptedModel([])
    with (
        serve(ChatModelAgent("desk", model, description="d")) as url,
        client(url, "key-alice") as http,
    ):
        response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and found in error["message"]
    if param is not None:
        assert error["param"] == param
    assert model.requests == []  # no run started


async def test_bad_bodies_raise_the_clients_errors(openai_for: Any) -> None:
    with serve(_desk()) as url:
        chat = openai_for(url).chat.completions
        with pytest.raises(openai.BadRequestError) as empty:
            await chat.create(model="desk", messages=[])
        with pytest.raises(openai.BadRequestError) as raised:
            await chat.create(
                model="desk",
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={"x-plait-session-id": "a/b"},
            )
    assert "x-plait-session-id" in raised.value.message
    assert (empty.value.type, empty.value.param) == ("invalid_request_error", "messages")


async def test_a_body_over_the_limit_is_413(openai_for: Any) -> None:
    model = ScriptedModel([])
    agent = ChatModelAgent("desk", model, description="d")
    with serve(agent, limit=2048) as url, pytest.raises(openai.APIStatusError) as raised:
        await openai_for(url).chat.completions.create(
            model="desk", messages=[{"role": "user", "content": "x" * 4096}]
        )
    assert raised.value.status_code == 413
    assert raised.value.type == "invalid_request_error"
    assert raised.value.code == "request_too_large"
    assert model.requests == []


async def test_a_failed_run_is_an_error_that_is_not_retried(openai_for: Any) -> None:
    def down(messages: list[Message], tools: list[ToolInfo]) -> Message:
        raise RuntimeError("the model is down")

    model = ScriptedModel([down, down, down])
    agent = ChatModelAgent("desk", model, description="d")
    with serve(agent) as url:
        chat = openai_for(url, max_retries=2).chat.completions
        with pytest.raises(openai.APIStatusError) as raised:
            await chat.create(model="desk", messages=[{"role": "user", "content": "hi"}])
        assert model.remaining == 2  # the run was not retried
        stream = await chat.create(
            model="desk", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with pytest.raises(openai.APIError) as streamed:
            await _drain(stream)
        checkpoint_id = raised.value.response.headers[HEADER]
        with client(url, "key-alice") as http:
            summary = http.get(f"/v1/runs/{checkpoint_id}").json()
    assert raised.value.status_code == 424
    assert raised.value.body == {
        "message": "ModelError: model call failed: RuntimeError: the model is down",
        "type": "server_error",
        "param": None,
        "code": "run_failed",
    }
    assert not isinstance(streamed.value, openai.APIStatusError)  # an error event in the stream
    assert isinstance(streamed.value.body, dict)
    assert streamed.value.body["message"].startswith("ModelError: ")
    assert streamed.value.code == "run_failed"
    assert summary["status"] == "failed" and summary["error"]["type"] == "ModelError"


async def test_api_keys_and_users(openai_for: Any) -> None:
    agent = _desk(reply("hello alice"))
    with serve(agent) as url:
        with pytest.raises(openai.AuthenticationError) as refused:
            await openai_for(url, key="wrong").models.list()
        with client(url) as anonymous:
            assert anonymous.get("/v1/models").status_code == 401
            no_key = anonymous.post(
                "/v1/chat/completions",
                json={"model": "desk", "messages": [{"role": "user", "content": "hi"}]},
            )
        response = await openai_for(url).chat.completions.with_raw_response.create(
            model="desk", messages=[{"role": "user", "content": "hi"}]
        )
        checkpoint_id = response.headers[HEADER]
        with client(url, "key-bob") as bob, client(url, "key-alice") as alice:
            seen_by_bob = bob.get(f"/v1/runs/{checkpoint_id}")
            seen_by_alice = alice.get(f"/v1/runs/{checkpoint_id}")
    assert (refused.value.type, refused.value.code) == ("authentication_error", "invalid_api_key")
    assert no_key.status_code == 401
    assert no_key.json()["error"]["type"] == "authentication_error"
    assert seen_by_bob.status_code == 404
    assert seen_by_alice.json()["final_output"] == "hello alice"


def test_errors_at_the_door_take_openais_shape_on_its_paths_only() -> None:
    with serve(_desk(), keys=None) as url, client(url) as http:
        rebound = {"host": "attacker.example"}
        refused = http.get("/v1/models", headers=rebound)
        own = http.get("/v1/agents", headers=rebound)
        unknown = http.get("/v1/responses/resp_x/input_items")
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "permission_error"
    assert set(refused.json()["error"]) == {"message", "type", "param", "code"}
    assert own.status_code == 403 and set(own.json()["error"]) == {"type", "message"}
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"


async def test_a_session_header_runs_in_that_session(openai_for: Any) -> None:
    model = ScriptedModel(["first answer", "second answer"])
    agent = ChatModelAgent("desk", model, description="d")
    with serve(agent, keys=None) as url:
        chat = openai_for(url, key="unused").chat.completions
        for text in ("one", "two"):
            await chat.create(
                model="desk",
                messages=[{"role": "user", "content": text}],
                extra_headers={"x-plait-session-id": "chat-1"},
            )
        with client(url) as http:
            session = http.get("/v1/sessions/chat-1").json()
    second = [(m.role, m.content) for m in model.requests[1].messages if m.role != "system"]
    assert second == [
        ("user", "one"),
        ("assistant", "first answer"),
        ("user", "two"),
    ]
    assert [m["content"] for m in session["messages"]][-1] == "second answer"


def test_the_openapi_schema_documents_the_routes() -> None:
    with serve(_desk(), keys=None) as url, client(url) as http:
        paths = http.get("/openapi.json").json()["paths"]
    assert set(paths["/v1/chat/completions"]) == {"post"}
    assert set(paths["/v1/responses"]) == {"post"}
    assert set(paths["/v1/models"]) == {"get"}
    assert set(paths["/v1/models/{model}"]) == {"get"}


def test_the_docs_example_runs() -> None:
    page = (ROOT / "docs" / "protocols.md").read_text()
    section = page.split("## OpenAI-compatible API", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    namespace: dict[str, Any] = {"__name__": "openai_api_example"}
    exec(compile(blocks[0], "docs/protocols.md", "exec", dont_inherit=True), namespace)
    assert namespace["answer"] == "A-1 ships today."
    assert namespace["streamed"] == "A-1 ships today."
    assert namespace["responded"] == "A-1 ships today."
    assert namespace["usage"] == (12, 5)


async def test_a_client_that_leaves_a_stream_does_not_stop_the_run() -> None:
    agent = _two_calls()
    with serve(agent) as url, client(url, "key-alice") as http:
        body = {"model": "desk", "messages": [{"role": "user", "content": "A-1?"}], "stream": True}
        with http.stream("POST", "/v1/chat/completions", json=body) as response:
            checkpoint_id = response.headers[HEADER]
            first = next(response.iter_lines())
        assert '"role": "assistant"' in first
        summary = wait_for_status(http, checkpoint_id, "completed", "failed")
    assert summary["status"] == "completed"
    assert summary["final_output"] == "Done: order A-1 ships today."
