"""`FallbackModel`: the next model answers when one fails, streams fall back only before
their first chunk, and a run sees one model."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import plait
from plait import ChatModelAgent, Message, Runner
from plait.errors import ModelError, UsageError
from plait.models import FallbackModel, OpenAIModel
from plait.testing import FunctionModel, ScriptedModel, call, reply
from plait.tools import ToolInfo

ROOT = Path(__file__).resolve().parents[2]


def failing(error: Exception) -> FunctionModel:
    """A model whose every call raises `error`."""

    def fail(messages: list[Message], tools: Any) -> str:
        raise error

    return FunctionModel(fail)


class BreaksMidStream:
    """A model that streams one chunk, then fails."""

    def __init__(self) -> None:
        self.closed = False

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        raise ModelError("not used")

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        try:
            yield Message.assistant("Hel")
            raise ModelError("connection reset")
        finally:
            self.closed = True


async def _text(stream: AsyncIterator[Message]) -> str:
    return "".join([chunk.content async for chunk in stream])


async def test_the_primary_answers_when_it_can() -> None:
    primary, backup = ScriptedModel([reply("from primary")]), ScriptedModel([reply("backup")])
    model = FallbackModel(primary, backup)
    answer = await model.generate([Message.user("hi")], temperature=0)
    assert answer.content == "from primary"
    assert primary.requests[0].options == {"temperature": 0}
    assert backup.requests == []


async def test_a_failing_primary_falls_back_to_the_next_model() -> None:
    backup = ScriptedModel([reply("from backup")])
    second = ScriptedModel([reply("not needed")])
    model = FallbackModel(failing(ModelError("rate limited", status_code=429)), backup, second)
    answer = await model.generate([Message.user("hi")])
    assert answer.content == "from backup"
    assert backup.requests[0].messages == (Message.user("hi"),) and second.requests == []


async def test_when_every_model_fails_the_error_names_each() -> None:
    model = FallbackModel(
        failing(ModelError("rate limited", status_code=429)),
        failing(ModelError("server error", status_code=500)),
    )
    with pytest.raises(ModelError) as info:
        await model.generate([Message.user("hi")])
    err = info.value
    assert str(err) == (
        "all 2 models failed: 1. FunctionModel: ModelError: rate limited; "
        "2. FunctionModel: ModelError: server error"
    )
    assert err.failures == [  # type: ignore[attr-defined]
        {"model": "FunctionModel", "error": "ModelError: rate limited"},
        {"model": "FunctionModel", "error": "ModelError: server error"},
    ]
    group = err.__cause__
    assert isinstance(group, ExceptionGroup)
    assert [e.status_code for e in group.exceptions] == [429, 500]  # type: ignore[attr-defined]


async def test_an_error_not_in_on_is_not_caught() -> None:
    backup = ScriptedModel([reply("from backup")])
    model = FallbackModel(failing(RuntimeError("a bug")), backup)
    with pytest.raises(RuntimeError, match="a bug"):
        await model.generate([Message.user("hi")])
    assert backup.requests == []
    broad = FallbackModel(failing(RuntimeError("a bug")), backup, on=RuntimeError)
    assert (await broad.generate([Message.user("hi")])).content == "from backup"


async def test_a_stream_that_fails_before_its_first_chunk_falls_back() -> None:
    backup = ScriptedModel([reply("from the backup")])
    model = FallbackModel(failing(ModelError("overloaded")), backup)
    assert await _text(model.stream([Message.user("hi")])) == "from the backup"
    assert len(backup.requests) == 1


async def test_a_stream_that_fails_after_its_first_chunk_keeps_its_error() -> None:
    broken, backup = BreaksMidStream(), ScriptedModel([reply("from the backup")])
    model = FallbackModel(broken, backup)
    seen: list[str] = []

    async def read() -> None:
        async for chunk in model.stream([Message.user("hi")]):
            seen.append(chunk.content)

    with pytest.raises(ModelError, match="connection reset"):
        await read()
    assert seen == ["Hel"] and broken.closed
    assert backup.requests == []


async def test_every_stream_failing_is_one_error() -> None:
    model = FallbackModel(failing(ModelError("a")), failing(ModelError("b")))
    with pytest.raises(ModelError, match=r"all 2 models failed: 1\. .*a; 2\. .*b"):
        await _text(model.stream([Message.user("hi")]))


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_an_agent_runs_on_the_fallback(streaming: bool) -> None:
    backup = ScriptedModel([reply("the backup answers")])
    agent = ChatModelAgent("A", FallbackModel(failing(ModelError("down")), backup))
    result = Runner(agent, enable_streaming=streaming).query_sync("hi")
    assert result.error is None
    assert result.final_output == "the backup answers"


def test_an_agent_whose_models_all_fail_ends_with_the_combined_error() -> None:
    agent = ChatModelAgent(
        "A", FallbackModel(failing(ModelError("down")), failing(ModelError("x")))
    )
    result = Runner(agent).query_sync("hi")
    assert isinstance(result.error, ModelError) and result.error.agent_name == "A"
    assert str(result.error).startswith("all 2 models failed")


def test_models_may_be_spec_strings_and_the_primary_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = FallbackModel("openai:gpt-4o-mini", ScriptedModel([]))
    assert isinstance(model.models[0], OpenAIModel)
    assert model.model_name == "gpt-4o-mini" and model.model == "gpt-4o-mini"
    assert "FallbackModel(OpenAIModel('gpt-4o-mini'" in repr(model)


def test_bad_models_and_bad_on_are_usage_errors() -> None:
    with pytest.raises(UsageError, match=r"FallbackModel \(model 2\) needs a model"):
        FallbackModel(ScriptedModel([]), 42)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="`on` takes exception classes"):
        FallbackModel(ScriptedModel([]), on=("ModelError",))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="`on` takes exception classes"):
        FallbackModel(ScriptedModel([]), on=())


def test_it_is_exported_and_is_a_chat_model() -> None:
    assert plait.models.FallbackModel is FallbackModel
    assert isinstance(FallbackModel(ScriptedModel([])), plait.models.ChatModel)


def test_the_documented_example_runs() -> None:
    page = (ROOT / "docs" / "capabilities" / "fallback.md").read_text()
    text = page.split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block is not None
    namespace: dict[str, Any] = {"__name__": "fallback_example"}
    exec(
        compile(block.group(1), "docs/capabilities/fallback.md", "exec", dont_inherit=True),
        namespace,
    )
    assert namespace["result"].final_output == "Paris."


async def test_a_structured_answer_goes_by_schema_only_when_every_model_takes_one() -> None:
    class Answer(BaseModel):
        city: str

    def schema_reply(messages: list[Message], tools: list[ToolInfo]) -> str:
        return '{"city": "Paris"}'

    both = FallbackModel(
        FunctionModel(schema_reply, supports_output_schema=True),
        FunctionModel(schema_reply, supports_output_schema=True),
    )
    assert both.supports_output_schema is True
    agent = ChatModelAgent("a", both, output_type=Answer)
    result = await Runner(agent).run([Message.user("where?")]).collect()
    assert result.final_output == Answer(city="Paris")
    assert "output_schema" in both.models[0].requests[0].options  # type: ignore[attr-defined]

    def down(messages: list[Message], tools: list[ToolInfo]) -> str:
        raise ModelError("down")

    mixed = FallbackModel(
        FunctionModel(down, supports_output_schema=True),
        ScriptedModel([call("final_result", {"city": "Rome"})]),
    )
    assert mixed.supports_output_schema is False
    result = (
        await Runner(ChatModelAgent("b", mixed, output_type=Answer))
        .run([Message.user("where?")])
        .collect()
    )
    assert result.final_output == Answer(city="Rome")
