"""Guardrails: input guardrails run alongside an agent's first model call and cancel it when
they trip; output guardrails check the final answer; a trip ends the whole run."""

from __future__ import annotations

import asyncio
import contextvars
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import plait
from plait import (
    AgentContext,
    AgentTool,
    ChatModelAgent,
    GuardrailResult,
    Hooks,
    Message,
    ModelRequest,
    Runner,
    Team,
    interrupt,
    tool,
)
from plait.errors import GuardrailTripped, HookError, PlaitError, UsageError
from plait.stores import MemoryStore
from plait.testing import FunctionModel, ScriptedModel, call, reply
from plait.tools import ToolInfo

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=[False, True], ids=["generate", "stream"])
def streaming(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def no_homework(ctx: AgentContext, text: str) -> GuardrailResult:
    return GuardrailResult(tripwire="homework" in text, info={"topic": "homework"})


async def no_secrets(ctx: AgentContext, text: str) -> GuardrailResult:
    return GuardrailResult(tripwire="secret" in text, info="a secret")


class Ran:
    """A tool that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

        @tool
        def lookup(query: str) -> str:
            """Look something up.

            Args:
                query: What to look up.
            """
            self.calls += 1
            return f"found {query}"

        self.tool = lookup


def _messages(result: plait.RunResult) -> list[Message]:
    return [
        e.output.message.message
        for e in result.events
        if e.output is not None and e.output.message is not None and e.output.message.message
    ]


# --- input guardrails -----------------------------------------------------------------------


@pytest.mark.parametrize("guard", [no_homework, no_secrets], ids=["sync", "async"])
def test_a_tripped_input_guardrail_ends_the_run_naming_it(guard: Any, streaming: bool) -> None:
    ran = Ran()
    model = ScriptedModel([call("lookup", {"query": "x"}), reply("done")])
    agent = ChatModelAgent("Helper", model, tools=[ran.tool], input_guardrails=[guard])
    result = Runner(agent, enable_streaming=streaming).query_sync("my homework is a secret")
    err = result.error
    assert isinstance(err, GuardrailTripped) and isinstance(err, PlaitError)
    assert err.guardrail == guard.__name__
    assert err.kind == "input" and err.agent_name == "Helper"
    assert err.info == ({"topic": "homework"} if guard is no_homework else "a secret")
    assert f"input guardrail '{guard.__name__}' of agent 'Helper' tripped" == str(err)
    assert ran.calls == 0  # the model's tool call never ran
    assert len(result.events) == 1 and result.events[0].error is err  # nothing else emitted
    assert result.final_output is None


def test_passing_input_guardrails_see_the_last_user_text_once_per_run(streaming: bool) -> None:
    seen: list[str] = []

    async def record(ctx: AgentContext, text: str) -> GuardrailResult:
        seen.append(text)
        return GuardrailResult(tripwire=False)

    ran = Ran()
    model = ScriptedModel([call("lookup", {"query": "x"}), call("lookup", {"query": "y"}), "ok"])
    agent = ChatModelAgent(
        "Helper", model, tools=[ran.tool], input_guardrails=[record, no_homework, no_secrets]
    )
    history = [Message.user("earlier"), Message.assistant("yes"), Message.user("now this")]
    result = Runner(agent, enable_streaming=streaming).run_sync(history)
    assert result.error is None and result.final_output == "ok"
    assert seen == ["now this"]  # once, though the model was called three times
    assert ran.calls == 2


def test_a_tripped_input_guardrail_cancels_the_model_call(streaming: bool) -> None:
    started, never = asyncio.Event(), asyncio.Event()
    cancelled: list[str] = []

    class Hanging:
        async def generate(
            self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
        ) -> Message:
            started.set()
            try:
                await never.wait()
            except asyncio.CancelledError:
                cancelled.append("generate")
                raise
            return Message.assistant("never")

        async def stream(
            self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
        ) -> AsyncIterator[Message]:
            started.set()
            try:
                await never.wait()
            except asyncio.CancelledError:
                cancelled.append("stream")
                raise
            yield Message.assistant("never")

    async def slow_check(ctx: AgentContext, text: str) -> GuardrailResult:
        await started.wait()  # the model call is under way
        return GuardrailResult(tripwire=True, info="blocked")

    agent = ChatModelAgent("Helper", Hanging(), input_guardrails=[slow_check])

    async def main() -> plait.RunResult:
        run = Runner(agent, enable_streaming=streaming).query("hi")
        return await asyncio.wait_for(run.collect(), timeout=30)  # a safety net, not a wait

    result = asyncio.run(main())
    assert isinstance(result.error, GuardrailTripped)
    assert result.error.guardrail == "slow_check" and result.error.info == "blocked"
    assert cancelled == ["stream" if streaming else "generate"]


def test_a_reply_that_comes_first_is_held_until_the_guardrails_pass(streaming: bool) -> None:
    replied = asyncio.Event()
    ran = Ran()
    events_at_pass: list[int] = []
    emitted: list[plait.AgentEvent] = []

    def answer(messages: list[Message], tools: Any) -> Message:
        replied.set()
        if len(messages) == 1:
            return call("lookup", {"query": "x"})
        return reply("done")

    async def after_the_reply(ctx: AgentContext, text: str) -> GuardrailResult:
        await replied.wait()
        for _ in range(20):  # let everything that could run now run
            await asyncio.sleep(0)
        events_at_pass.append(len(emitted))
        return GuardrailResult(tripwire=ran.calls > 0)

    agent = ChatModelAgent(
        "Helper", FunctionModel(answer), tools=[ran.tool], input_guardrails=[after_the_reply]
    )

    async def main() -> plait.RunResult:
        run = Runner(agent, enable_streaming=streaming).query("hi")
        async for event in run:
            emitted.append(event)
        return await run.collect()

    result = asyncio.run(main())
    assert result.error is None and result.final_output == "done"
    assert events_at_pass == [0] and ran.calls == 1


def test_input_guardrails_run_concurrently_and_the_first_trip_cancels_the_others() -> None:
    cancelled: list[str] = []

    async def never_answers(ctx: AgentContext, text: str) -> GuardrailResult:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("never_answers")
            raise
        return GuardrailResult(tripwire=False)

    model = ScriptedModel([reply("hi")])
    agent = ChatModelAgent("A", model, input_guardrails=[never_answers, no_homework])
    result = Runner(agent).query_sync("homework")
    assert isinstance(result.error, GuardrailTripped) and result.error.guardrail == "no_homework"
    assert cancelled == ["never_answers"]


def test_input_guardrails_do_not_run_again_when_a_paused_run_resumes() -> None:
    seen: list[str] = []

    def record(ctx: AgentContext, text: str) -> GuardrailResult:
        seen.append(text)
        return GuardrailResult(tripwire=False)

    @tool
    def approve(item: str) -> str:
        """Ask a person.

        Args:
            item: What to approve.
        """
        return f"{item}: {interrupt('ok?')}"

    model = ScriptedModel([call("approve", {"item": "x"}), reply("approved")])
    agent = ChatModelAgent("A", model, tools=[approve], input_guardrails=[record])
    runner = Runner(agent)
    paused = runner.query_sync("please approve")
    assert paused.interrupts and seen == ["please approve"]
    result = runner.resume_sync(paused.checkpoint_id, value="yes")
    assert result.error is None and result.final_output == "approved"
    assert seen == ["please approve"]


# --- output guardrails ----------------------------------------------------------------------


def test_a_tripped_output_guardrail_ends_the_run(streaming: bool) -> None:
    def no_rudeness(ctx: AgentContext, answer: str) -> GuardrailResult:
        return GuardrailResult(tripwire="stupid" in answer, info={"answer": answer})

    model = ScriptedModel([reply("that is a stupid question")])
    agent = ChatModelAgent("A", model, output_key="answer", output_guardrails=[no_rudeness])
    result = Runner(agent, enable_streaming=streaming).query_sync("hi")
    err = result.error
    assert isinstance(err, GuardrailTripped)
    assert (err.guardrail, err.kind, err.agent_name) == ("no_rudeness", "output", "A")
    assert err.info == {"answer": "that is a stupid question"}
    assert result.final_output is None


def test_output_guardrails_check_only_the_final_answer(streaming: bool) -> None:
    seen: list[str] = []

    async def record(ctx: AgentContext, answer: str) -> GuardrailResult:
        seen.append(answer)
        return GuardrailResult(tripwire=False)

    ran = Ran()
    model = ScriptedModel([call("lookup", {"query": "x"}, text="let me look"), reply("the answer")])
    agent = ChatModelAgent("A", model, tools=[ran.tool], output_guardrails=[record])
    result = Runner(agent, enable_streaming=streaming).query_sync("hi")
    assert result.error is None and result.final_output == "the answer"
    assert seen == ["the answer"]  # not the tool-call turn "let me look"
    assert ran.calls == 1


def no_rudeness(ctx: AgentContext, answer: str) -> GuardrailResult:
    return GuardrailResult(tripwire="stupid" in answer, info="rude")


async def carried(events: Sequence[plait.AgentEvent]) -> str:
    """Return all that `events` carry as text: messages (a stream read whole), their tool
    calls' arguments and custom outputs."""
    parts: list[str] = []
    for event in events:
        if event.output is None:
            continue
        if event.output.message is not None:
            message = await event.output.message.get_message()
            parts += [message.content, *(c.arguments for c in message.tool_calls)]
        if event.output.custom is not None:
            parts.append(repr(event.output.custom))
    return "\n".join(parts)


async def test_a_blocked_answer_is_not_emitted_kept_in_the_session_or_sent_back(
    streaming: bool,
) -> None:
    model = ScriptedModel([reply("that is a stupid question"), reply("a kind answer")])
    agent = ChatModelAgent("A", model, output_key="answer", output_guardrails=[no_rudeness])
    runner = Runner(agent, store=MemoryStore(), enable_streaming=streaming)
    run = runner.query("hi", session_id="s")
    events = [event async for event in run]
    blocked = await run.collect()
    assert isinstance(blocked.error, GuardrailTripped) and blocked.error.info == "rude"
    assert events[-1].error is blocked.error
    assert "stupid" not in await carried(events)
    view = await runner.sessions.get("s")
    assert view is not None
    assert [(m.role, m.content) for m in view.messages] == [("user", "hi")]  # the turn is kept
    assert "answer" not in view.values
    answered = await runner.query("again", session_id="s").collect()
    assert answered.error is None and answered.final_output == "a kind answer"
    sent = model.requests[-1].messages
    assert [(m.role, m.content) for m in sent] == [("user", "hi"), ("user", "again")]
    view = await runner.sessions.get("s")
    assert view is not None and view.values["answer"] == "a kind answer"


async def test_with_output_guardrails_a_tool_call_turn_streams_and_the_answer_waits() -> None:
    model_may_end = asyncio.Event()
    checked: list[str] = []

    class Stepwise:
        """Streams a tool-call turn that ends only once the test has its event, then the
        answer."""

        async def generate(
            self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
        ) -> Message:
            raise AssertionError("a streaming run streams")

        async def stream(
            self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
        ) -> AsyncIterator[Message]:
            if messages[-1].role == "tool":
                for word in ("all ", "good"):
                    yield Message.assistant(word)
                return
            yield Message.assistant("let me look")
            yield call("lookup", {"query": "x"})
            await model_may_end.wait()

    async def record(ctx: AgentContext, answer: str) -> GuardrailResult:
        checked.append(answer)
        return GuardrailResult(tripwire=False)

    ran = Ran()
    agent = ChatModelAgent("A", Stepwise(), tools=[ran.tool], output_guardrails=[record])
    streamed: list[tuple[bool, list[str]]] = []  # per stream: whole when seen, answers checked

    async def main() -> plait.RunResult:
        run = Runner(agent, enable_streaming=True).query("hi")
        async for event in run:
            variant = event.message
            if variant is not None and variant.stream is not None:
                streamed.append((variant.stream.done, list(checked)))
                model_may_end.set()
        return await run.collect()

    result = await asyncio.wait_for(main(), timeout=30)  # a safety net, not a wait
    assert result.error is None and result.final_output == "all good"
    assert streamed == [(False, []), (True, ["all good"])]
    assert ran.calls == 1


# --- errors of guardrails themselves ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["input", "output"])
def test_a_guardrail_that_raises_ends_the_run_with_a_hook_error_naming_it(kind: str) -> None:
    def broken(ctx: AgentContext, value: str) -> GuardrailResult:
        raise ValueError("bad regex")

    agent = ChatModelAgent("A", ScriptedModel([reply("hi")]), **{f"{kind}_guardrails": [broken]})
    result = Runner(agent).query_sync("hi")
    err = result.error
    assert isinstance(err, HookError)
    assert (err.hook, err.seam) == ("broken", f"{kind}_guardrail")
    assert "ValueError: bad regex" in str(err) and "'A'" in str(err)


def test_a_guardrail_that_returns_something_else_is_a_hook_error() -> None:
    async def says_yes(ctx: AgentContext, value: str) -> bool:
        return True

    agent = ChatModelAgent("A", ScriptedModel([reply("hi")]), input_guardrails=[says_yes])  # type: ignore[list-item]
    result = Runner(agent).query_sync("hi")
    assert isinstance(result.error, HookError)
    assert "returned bool, expected a plait.GuardrailResult" in str(result.error)


def test_a_guardrail_object_is_named_by_its_name_attribute() -> None:
    class Blocklist:
        name = "blocklist"

        def __init__(self, *words: str) -> None:
            self.words = words

        async def __call__(self, ctx: AgentContext, text: str) -> GuardrailResult:
            return GuardrailResult(tripwire=any(w in text for w in self.words))

    agent = ChatModelAgent("A", ScriptedModel([reply("hi")]), input_guardrails=[Blocklist("x")])
    result = Runner(agent).query_sync("an x")
    assert isinstance(result.error, GuardrailTripped) and result.error.guardrail == "blocklist"


def test_guardrails_that_are_not_functions_are_refused_at_construction() -> None:
    with pytest.raises(UsageError, match="agent 'A': a guardrail is a function"):
        ChatModelAgent("A", ScriptedModel([]), input_guardrails=["no_homework"])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="agent 'A': guardrails are given as a list"):
        ChatModelAgent("A", ScriptedModel([]), output_guardrails=no_homework)  # type: ignore[arg-type]


# --- nesting ----------------------------------------------------------------------------------


def test_a_guardrail_of_an_agent_run_as_a_tool_ends_the_whole_run(streaming: bool) -> None:
    helper = ChatModelAgent(
        "helper",
        ScriptedModel([reply("helped")]),
        description="Helps.",
        input_guardrails=[no_homework],
    )
    model = ScriptedModel([call("helper", {"request": "do my homework"}), reply("done")])
    main = ChatModelAgent("main", model, tools=[AgentTool(helper)])
    result = Runner(main, enable_streaming=streaming).query_sync("hi")
    assert isinstance(result.error, GuardrailTripped)
    assert (result.error.guardrail, result.error.agent_name) == ("no_homework", "helper")
    assert model.remaining == 1  # the caller's model was not told and asked again


def test_an_output_guardrail_of_a_team_member_ends_the_whole_run(streaming: bool) -> None:
    def no_numbers(ctx: AgentContext, answer: str) -> GuardrailResult:
        return GuardrailResult(tripwire=any(c.isdigit() for c in answer), info=answer)

    member = ChatModelAgent(
        "clerk",
        ScriptedModel([reply("it costs 42")]),
        description="Knows prices.",
        output_guardrails=[no_numbers],
    )
    lead_model = ScriptedModel([call("clerk", {"request": "price?"}), reply("done")])
    team = Team.coordinator(ChatModelAgent("lead", lead_model), [member])
    result = Runner(team, enable_streaming=streaming).query_sync("what does it cost?")
    assert isinstance(result.error, GuardrailTripped)
    assert (result.error.guardrail, result.error.kind) == ("no_numbers", "output")
    assert result.error.info == "it costs 42"
    assert lead_model.remaining == 1


# --- the seam ---------------------------------------------------------------------------------


def test_during_model_is_a_hook_seam_that_runs_alongside_every_call(streaming: bool) -> None:
    calls: list[int] = []

    class Count(Hooks):
        async def during_model(self, ctx: AgentContext, request: ModelRequest) -> None:
            calls.append(len(request.messages))

    ran = Ran()
    model = ScriptedModel([call("lookup", {"query": "x"}), reply("done")])
    agent = ChatModelAgent("A", model, tools=[ran.tool])
    result = Runner(agent, hooks=[Count()], enable_streaming=streaming).query_sync("hi")
    assert result.error is None and calls == [1, 3]


def test_a_during_model_hook_that_raises_ends_the_run_with_a_hook_error() -> None:
    class Broken(Hooks):
        async def during_model(self, ctx: AgentContext, request: ModelRequest) -> None:
            raise RuntimeError("oops")

    agent = ChatModelAgent("A", ScriptedModel([reply("hi")]), hooks=[Broken()])
    result = Runner(agent).query_sync("hi")
    assert isinstance(result.error, HookError)
    assert (result.error.hook, result.error.seam) == ("Broken", "during_model")


def test_a_model_failure_waits_for_the_guardrails_verdict() -> None:
    def failing(messages: list[Message], tools: Any) -> str:
        raise RuntimeError("provider down")

    agent = ChatModelAgent("A", FunctionModel(failing), input_guardrails=[no_secrets])
    tripped = Runner(agent).query_sync("a secret")
    assert isinstance(tripped.error, GuardrailTripped)
    failed = Runner(agent).query_sync("fine")
    assert isinstance(failed.error, plait.errors.ModelError)
    assert "provider down" in str(failed.error)


# --- the docs ---------------------------------------------------------------------------------


def _example(name: str) -> dict[str, Any]:
    """Run the first example of docs/capabilities/`name`.md; return what it defines."""
    page = (ROOT / "docs" / "capabilities" / f"{name}.md").read_text()
    text = page.split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block is not None
    namespace: dict[str, Any] = {"__name__": "guardrails_example"}
    exec(
        compile(block.group(1), f"docs/capabilities/{name}.md", "exec", dont_inherit=True),
        namespace,
    )
    return namespace


def test_the_documented_example_runs() -> None:
    namespace = _example("guardrails")
    assert isinstance(namespace["blocked"].error, GuardrailTripped)
    assert namespace["answered"].final_output is not None


def test_a_context_variable_set_before_the_model_is_current_during_a_guarded_call(
    streaming: bool,
) -> None:
    span: contextvars.ContextVar[str | None] = contextvars.ContextVar("span", default=None)
    during: list[str | None] = []

    class Tracing(Hooks):
        async def before_model(self, ctx: AgentContext, request: ModelRequest) -> None:
            span.set(f"span of {ctx.agent_name}")

    def answer(messages: list[Message], tools: Any) -> str:
        during.append(span.get())
        return "hello"

    agent = ChatModelAgent("A", FunctionModel(answer), input_guardrails=[no_homework])
    result = Runner(agent, hooks=[Tracing()], enable_streaming=streaming).query_sync("hi")
    assert result.error is None and during == ["span of A"]
