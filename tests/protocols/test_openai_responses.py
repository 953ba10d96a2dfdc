"""`POST /v1/responses`, driven by the official `openai` client against a real server: a
response (streamed and not), its input, `previous_response_id` (the conversation as a plait
session), pauses, failures and what is refused."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from plait import ChatModelAgent, Message, Usage, interrupt, tool
from plait.testing import ScriptedModel, call, reply
from plait.tools.base import ToolInfo
from tests.protocols.openai_support import HEADER, OpenAIFor, serve
from tests.server.support import client


@tool
def refund(order: str) -> str:
    """Refund an order once a person approves.

    Args:
        order: The order id.
    """
    return f"refund {order}: {interrupt({'question': f'refund {order}?'})}"


def _chat(model: ScriptedModel) -> ChatModelAgent:
    return ChatModelAgent("desk", model, description="Answers.", instruction="Be kind.")


def _turns(model: ScriptedModel, request: int) -> list[tuple[str, str]]:
    """Return what the model was sent in request `request`, its own instruction left out."""
    return [
        (m.role, m.content) for m in model.requests[request].messages if m.content != "Be kind."
    ]


async def test_a_response_is_a_run_of_the_agent(openai_for: OpenAIFor) -> None:
    model = ScriptedModel([reply("Hi there.", usage=Usage(input_tokens=4, output_tokens=2))])
    with serve(_chat(model)) as url:
        raw = await openai_for(url).responses.with_raw_response.create(model="desk", input="Hi")
        response = raw.parse()
        checkpoint_id = raw.headers[HEADER]
        with client(url, "key-alice") as http:
            summary = http.get(f"/v1/runs/{checkpoint_id}").json()
    assert response.id == f"resp_{checkpoint_id}"
    assert (response.object, response.status, response.model) == ("response", "completed", "desk")
    assert response.output_text == "Hi there."
    [message] = response.output
    assert message.type == "message" and message.role == "assistant"
    assert message.phase == "final_answer"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (4, 2)
    assert response.usage.total_tokens == 6
    assert summary["status"] == "completed" and summary["final_output"] == "Hi there."
    assert summary["session_id"]  # a response runs in a conversation of its own


async def test_a_streamed_response_is_openais_events_in_order(openai_for: OpenAIFor) -> None:
    model = ScriptedModel([reply("Hello there friend.")])
    with serve(_chat(model)) as url:
        stream = await openai_for(url).responses.create(model="desk", input="Hi", stream=True)
        events = [event async for event in stream]
    kinds = [event.type for event in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert len(deltas) > 1 and "".join(deltas) == "Hello there friend."
    assert [event.sequence_number for event in events] == list(range(len(events)))
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == "Hello there friend."
    assert completed.response.id == events[0].response.id


async def test_input_items_and_instructions_become_the_runs_input(openai_for: OpenAIFor) -> None:
    model = ScriptedModel(["ok"])
    items: Any = [
        {"role": "developer", "content": "Use short words."},
        {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hello."}],
        },
        {"role": "user", "content": "Bye"},
    ]
    with serve(_chat(model)) as url:
        response = await openai_for(url).responses.create(
            model="desk", input=items, instructions="Answer in French."
        )
    assert response.output_text == "ok"
    assert _turns(model, 0) == [
        ("system", "Answer in French."),
        ("system", "Use short words."),
        ("user", "Hi"),
        ("assistant", "Hello."),
        ("user", "Bye"),
    ]


async def test_previous_response_id_continues_the_conversation(openai_for: OpenAIFor) -> None:
    model = ScriptedModel(["Hi Ann.", "You are Ann.", "Ann, still."])
    with serve(_chat(model)) as url:
        responses = openai_for(url).responses
        first = await responses.create(model="desk", input="I am Ann.")
        second = await responses.create(
            model="desk", input="Who am I?", previous_response_id=first.id
        )
        third = await responses.create(
            model="desk", input="And now?", previous_response_id=second.id
        )
        with pytest.raises(openai.BadRequestError) as older:  # not the conversation's latest
            await responses.create(model="desk", input="Again?", previous_response_id=first.id)
    assert second.output_text == "You are Ann."
    assert second.previous_response_id == first.id
    assert _turns(model, 1) == [
        ("user", "I am Ann."),
        ("assistant", "Hi Ann."),
        ("user", "Who am I?"),
    ]
    assert third.output_text == "Ann, still." and _turns(model, 2)[-1] == ("user", "And now?")
    assert older.value.param == "previous_response_id"
    assert third.id.removeprefix("resp_") in older.value.message  # it names the latest
    assert len(model.requests) == 3  # no run started


async def test_an_unknown_or_foreign_previous_response_is_refused(openai_for: OpenAIFor) -> None:
    model = ScriptedModel(["Hi Ann."])
    with serve(_chat(model)) as url:
        mine = await openai_for(url).responses.create(model="desk", input="I am Ann.")
        for key, previous in [("key-alice", "resp_nope"), ("key-alice", "x"), ("key-bob", mine.id)]:
            with pytest.raises(openai.BadRequestError) as refused:
                await openai_for(url, key=key).responses.create(
                    model="desk", input="Who am I?", previous_response_id=previous
                )
            assert refused.value.code == "previous_response_not_found"
            assert refused.value.type == "invalid_request_error"
    assert len(model.requests) == 1


def _pays(messages: list[Message], tools: list[ToolInfo]) -> Message:
    return reply(f"Done: {messages[-1].content}.")


async def test_a_paused_response_says_what_it_waits_for(openai_for: OpenAIFor) -> None:
    model = ScriptedModel([call("refund", {"order": "B-2"}), _pays])
    agent = ChatModelAgent("desk", model, description="Refunds.", tools=[refund])
    with serve(agent) as url:
        responses = openai_for(url).responses
        paused = await responses.create(model="desk", input="Refund B-2")
        with pytest.raises(openai.BadRequestError) as refused:
            await responses.create(model="desk", input="Well?", previous_response_id=paused.id)
        checkpoint_id = paused.id.removeprefix("resp_")
        with client(url, "key-alice") as http:
            resumed = http.post(
                f"/v1/runs/{checkpoint_id}/resume", json={"value": "yes", "stream": False}
            ).json()
    assert "refund B-2?" in paused.output_text
    assert f"POST /v1/runs/{checkpoint_id}/resume" in paused.output_text
    assert "paused" in refused.value.message
    assert resumed["final_output"] == "Done: refund B-2: yes."


def _down(messages: list[Message], tools: list[ToolInfo]) -> Message:
    raise RuntimeError("the model is down")


async def test_a_failed_run_is_an_error_or_a_failed_event(openai_for: OpenAIFor) -> None:
    model = ScriptedModel([_down, _down], per_run=True)
    with serve(_chat(model)) as url:
        responses = openai_for(url, max_retries=2).responses
        with pytest.raises(openai.APIStatusError) as raised:
            await responses.create(model="desk", input="Hi")
        stream = await responses.create(model="desk", input="Hi", stream=True)
        events = [event async for event in stream]
    assert raised.value.status_code == 424 and raised.value.code == "run_failed"
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["message"].startswith("ModelError: model call failed")
    failed = events[-1]
    assert failed.type == "response.failed"
    assert failed.response.status == "failed"
    assert failed.response.error is not None
    assert failed.response.error.code == "server_error"
    assert failed.response.error.message.startswith("ModelError: model call failed")
    assert len(model.requests) == 2  # not retried


@pytest.mark.parametrize(
    ("fields", "found"),
    [
        ({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}, "items"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "only text parts",
        ),
        ({"input": "hi", "conversation": "conv_1"}, "previous_response_id"),
        ({"input": "hi", "background": True}, "background"),
        ({"input": []}, "input"),
    ],
)
async def test_what_cannot_be_served_is_a_400(
    openai_for: OpenAIFor, fields: dict[str, Any], found: str
) -> None:
    model = ScriptedModel([])
    with serve(_chat(model)) as url, pytest.raises(openai.BadRequestError) as refused:
        await openai_for(url).responses.create(model="desk", **fields)
    assert found in refused.value.message
    assert refused.value.type == "invalid_request_error"
    assert model.requests == []


async def test_an_unknown_model_is_not_found(openai_for: OpenAIFor) -> None:
    with serve(_chat(ScriptedModel([]))) as url, pytest.raises(openai.NotFoundError) as raised:
        await openai_for(url).responses.create(model="nobody", input="Hi")
    assert (raised.value.code, raised.value.param) == ("model_not_found", "model")
