"""Streamed answers of the OpenAI-compatible routes, read with the official `openai` client:
the text goes out as the model writes it (chat completions and responses alike), only the
run's top-level turns are streamed and the answer ends with the final answer, and the
characters some clients take for line ends are escaped on the wire."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from plait import ChatModelAgent, Message, Team, tool
from plait.testing import ScriptedModel, call, reply
from plait.tools.base import ToolInfo
from tests.protocols.openai_support import OpenAIFor, serve
from tests.server.support import WAIT, client

QUESTION = [{"role": "user", "content": "Where is A-1?"}]


@tool
def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: The order id.
    """
    return f"order {order} ships today"


class GatedModel:
    """A model that writes its first words, then waits until the test has received them
    (`release`) before it writes the rest."""

    def __init__(self, first: str, rest: str) -> None:
        self.first, self.rest = first, rest
        self.release = threading.Event()
        self.finished = threading.Event()

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Answer at once (a run whose models do not stream)."""
        self.finished.set()
        return Message.assistant(self.first + self.rest)

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Write the first words; the rest once the test has them."""
        yield Message.assistant(self.first)
        await asyncio.to_thread(self.release.wait, WAIT)
        self.finished.set()
        yield Message.assistant(self.rest)


def _gated() -> tuple[GatedModel, ChatModelAgent]:
    model = GatedModel("Hello", " world")
    return model, ChatModelAgent("desk", model, description="Greets.")


async def test_a_completion_streams_the_first_words_before_the_model_has_finished(
    openai_for: OpenAIFor,
) -> None:
    model, agent = _gated()
    texts: list[str] = []
    with serve(agent) as url:
        stream = await openai_for(url).chat.completions.create(
            model="desk", messages=QUESTION, stream=True
        )
        async for chunk in stream:
            delta = chunk.choices[0].delta.content if chunk.choices else None
            if not delta:
                continue
            if not texts:
                assert not model.finished.is_set(), "the first words came after the model ended"
                model.release.set()
            texts.append(delta)
    assert texts == ["Hello", " world"]


async def test_a_response_streams_the_first_words_before_the_model_has_finished(
    openai_for: OpenAIFor,
) -> None:
    model, agent = _gated()
    texts: list[str] = []
    with serve(agent) as url:
        async with openai_for(url).responses.stream(model="desk", input="Hi") as stream:
            async for event in stream:
                if event.type != "response.output_text.delta":
                    continue
                if not texts:
                    assert not model.finished.is_set(), "the first words came after the model ended"
                    model.release.set()
                texts.append(event.delta)
            final = await stream.get_final_response()
    assert texts == ["Hello", " world"]
    assert final.output_text == "Hello world"
    assert final.status == "completed"


def _preamble_then_answer() -> ChatModelAgent:
    """A run whose first turn writes a preamble and calls a tool; the second answers."""
    script = [call("lookup", {"order": "A-1"}, text="Let me look."), reply("A-1 ships today.")]
    return ChatModelAgent(
        "desk", ScriptedModel(script, per_run=True), description="Answers.", tools=[lookup]
    )


async def test_a_preamble_before_a_tool_call_is_streamed_and_the_answer_follows(
    openai_for: OpenAIFor,
) -> None:
    with serve(_preamble_then_answer()) as url:
        chat = openai_for(url).chat.completions
        stream = await chat.create(model="desk", messages=QUESTION, stream=True)
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream])
        whole = await chat.create(model="desk", messages=QUESTION)
    assert streamed == "Let me look.\n\nA-1 ships today."
    assert whole.choices[0].message.content == "A-1 ships today."  # the final answer only


async def test_a_streamed_response_marks_the_preamble_as_commentary(
    openai_for: OpenAIFor,
) -> None:
    with serve(_preamble_then_answer()) as url:
        responses = openai_for(url).responses
        async with responses.stream(model="desk", input="Where is A-1?") as stream:
            kinds = [event.type async for event in stream]
            final = await stream.get_final_response()
        whole = await responses.create(model="desk", input="Where is A-1?")
    messages = [(item.phase, item.content[0].text) for item in final.output]
    assert messages == [("commentary", "Let me look."), ("final_answer", "A-1 ships today.")]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.added") == kinds.count("response.output_item.done")
    assert [(i.phase, i.content[0].text) for i in whole.output] == [
        ("final_answer", "A-1 ships today.")
    ]


async def test_a_nested_agents_words_are_not_streamed(openai_for: OpenAIFor) -> None:
    researcher = ChatModelAgent(
        "researcher", ScriptedModel(["internal notes"]), description="Researches."
    )
    lead = ChatModelAgent(
        "lead",
        ScriptedModel([call("researcher", {"request": "look"}), reply("The answer.")]),
        description="Leads.",
    )
    team = Team.coordinator(lead, [researcher])
    with serve(team) as url:
        stream = await openai_for(url).chat.completions.create(
            model="lead", messages=QUESTION, stream=True
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream])
    assert streamed == "The answer."


async def test_a_final_answer_that_no_turn_wrote_comes_last(openai_for: OpenAIFor) -> None:
    agent = ChatModelAgent(
        "desk",
        ScriptedModel([call("lookup", {"order": "A-1"}, text="Looking.")]),
        description="Answers.",
        tools=[lookup],
        return_directly=["lookup"],
    )
    with serve(agent) as url:
        stream = await openai_for(url).chat.completions.create(
            model="desk", messages=QUESTION, stream=True
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == "Looking.\n\norder A-1 ships today"
    assert chunks[-1].choices[0].finish_reason == "stop"


SEPARATORS = "one\u2028two\u2029three\x85four"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"model": "desk", "messages": QUESTION, "stream": True}),
        ("/v1/responses", {"model": "desk", "input": "Hi", "stream": True}),
    ],
)
def test_line_separators_are_escaped_on_the_wire(path: str, body: dict[str, Any]) -> None:
    agent = ChatModelAgent("desk", ScriptedModel([reply(SEPARATORS)]), description="d")
    with (
        serve(agent) as url,
        client(url, "key-alice") as http,
        http.stream("POST", path, json=body) as response,
    ):
        raw = response.read()
    assert response.status_code == 200
    for char in ("\u2028", "\u2029", "\x85"):
        assert char.encode() not in raw
    assert b"\\u2028" in raw and b"\\u2029" in raw and b"\\u0085" in raw
    lines = [line for line in raw.decode().splitlines() if line.startswith("data: {")]
    texts = []
    for line in lines:
        event = json.loads(line[len("data: ") :])
        if event.get("object") == "chat.completion.chunk" and event["choices"]:
            texts.append(event["choices"][0]["delta"].get("content") or "")
        elif event.get("type") == "response.output_text.delta":
            texts.append(event["delta"])
    assert "".join(texts) == SEPARATORS


async def test_the_client_reads_escaped_separators_back_as_text(openai_for: OpenAIFor) -> None:
    agent = ChatModelAgent(
        "desk", ScriptedModel([reply(SEPARATORS)], per_run=True), description="d"
    )
    with serve(agent) as url:
        stream = await openai_for(url).chat.completions.create(
            model="desk", messages=QUESTION, stream=True
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream])
        async with openai_for(url).responses.stream(model="desk", input="Hi") as events:
            final = await events.get_final_response()
    assert streamed == SEPARATORS
    assert final.output_text == SEPARATORS
