"""ChatModelAgent: the ReAct loop, its options, and Eino's scenarios 1-14 as plait decides them."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator

import pytest

from plait import (
    AgentAction,
    AgentEvent,
    AgentInput,
    ChatModelAgent,
    Message,
    Middleware,
    ModelRequest,
    RunContext,
    Runner,
    ToolCall,
    ToolResult,
    TransferToAgentAction,
    run_context,
    tool,
)
from plait.errors import (
    InvalidToolArguments,
    MaxIterationsExceeded,
    ModelError,
    ToolError,
    UsageError,
)
from plait.testing import ScriptedModel, call, calls, reply
from tests.conftest import kinds, messages_of


@tool
async def lookup(query: str = "") -> str:
    """A tool used by the scenarios.

    Args:
        query: Anything.
    """
    return f"result for {query}"


def _agent(model: ScriptedModel, **options: object) -> ChatModelAgent:
    return ChatModelAgent("A", model, **options)  # type: ignore[arg-type]


# --- scenario 1-3: one turn, streaming, model error ------------------------------------------


def test_one_turn_without_tools_yields_one_assistant_event() -> None:
    model = ScriptedModel([reply("hi")])
    result = Runner(_agent(model, instruction="sys")).query_sync("q")
    assert len(result.events) == 1
    event = result.events[0]
    assert (event.agent_name, event.run_path, event.depth) == ("A", ("A",), 0)
    assert event.message is not None and event.message.role == "assistant"
    assert not event.message.is_streaming
    assert result.final_output == "hi"
    assert model.requests[0].messages == (Message.system("sys"), Message.user("q"))


async def test_streaming_yields_the_models_chunks_one_to_one() -> None:
    model = ScriptedModel([reply("one two three")])
    runner = Runner(_agent(model), enable_streaming=True)
    events = [e async for e in runner.query("q")]
    assert len(events) == 1
    variant = events[0].message
    assert variant is not None and variant.is_streaming and variant.role == "assistant"
    assert variant.stream is not None
    chunks = [c.content async for c in variant.stream]
    assert chunks == ["one ", "two ", "three"]
    assert (await variant.get_message()).content == "one two three"


def test_model_failure_is_one_model_error_event_that_ends_the_stream() -> None:
    def broken(messages: list[Message], tools: object) -> Message:
        raise ConnectionError("provider down")

    result = Runner(_agent(ScriptedModel([broken]))).query_sync("q")
    assert kinds(result.events) == ["error:ModelError"]
    assert isinstance(result.error, ModelError)
    assert "provider down" in str(result.error)
    assert result.error.agent_name == "A"
    assert result.final_output is None


def test_running_past_the_script_is_a_model_error_naming_the_script() -> None:
    model = ScriptedModel([call("lookup", {})])
    result = Runner(_agent(model, tools=[lookup])).query_sync("q")
    assert kinds(result.events) == ["assistant", "tool:lookup", "error:ModelError"]
    assert "script has 1 replies" in str(result.error)


async def test_streaming_model_failure_reaches_reader_and_run() -> None:
    class FailingStream:
        async def generate(self, messages: object, **kw: object) -> Message:
            raise AssertionError("not used")

        async def stream(self, messages: object, **kw: object):  # type: ignore[no-untyped-def]
            yield Message.assistant("partial ")
            raise ConnectionResetError("stream cut")

    runner = Runner(ChatModelAgent("A", FailingStream()), enable_streaming=True)
    result = await runner.query("q").collect()
    assert kinds(result.events) == ["assistant", "error:ModelError"]
    assert "stream cut" in str(result.error)
    variant = result.events[0].message
    assert variant is not None and variant.stream is not None
    with pytest.raises(ModelError):
        await variant.get_message()


# --- scenario 4-5: the ReAct loop and max_iterations --------------------------------------------


def test_tool_round_then_answer() -> None:
    model = ScriptedModel(
        [
            call("lookup", {"query": "x"}, id="tc1", text="Using tool"),
            reply("Task completed"),
        ]
    )
    result = Runner(_agent(model, tools=[lookup])).query_sync("q")
    assert kinds(result.events) == ["assistant", "tool:lookup", "assistant"]
    tool_message = result.events[1].message.message  # type: ignore[union-attr]
    assert tool_message == Message.tool("result for x", "tc1", name="lookup")
    assert result.final_output == "Task completed"
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool"]
    assert [t.name for t in model.requests[0].tools] == ["lookup"]


def test_max_iterations_counts_model_calls() -> None:
    rounds = [call("lookup", {}) for _ in range(5)]
    failing = ScriptedModel([*rounds, reply("never")])
    result = Runner(_agent(failing, tools=[lookup], max_iterations=5)).query_sync("q")
    assert isinstance(result.error, MaxIterationsExceeded)
    assert (result.error.agent_name, result.error.limit) == ("A", 5)
    assert len(failing.requests) == 5
    passing = ScriptedModel([*(call("lookup", {}) for _ in range(5)), reply("done")])
    ok = Runner(_agent(passing, tools=[lookup], max_iterations=6)).query_sync("q")
    assert ok.error is None and ok.final_output == "done"


def test_default_max_iterations_is_twenty() -> None:
    model = ScriptedModel([call("lookup", {}) for _ in range(25)])
    result = Runner(_agent(model, tools=[lookup])).query_sync("q")
    assert isinstance(result.error, MaxIterationsExceeded)
    assert len(model.requests) == 20


# --- scenario 6: parallel tools and return_directly -----------------------------------------------


def test_parallel_tools_run_concurrently_and_return_directly_is_emitted_last() -> None:
    started: set[str] = set()
    all_started = asyncio.Event()

    def make(name: str, delay: float) -> object:
        async def body() -> str:
            started.add(name)
            if len(started) == 3:
                all_started.set()
            # each tool waits until all three are running: sequential execution would hang
            await asyncio.wait_for(all_started.wait(), timeout=5)
            await asyncio.sleep(delay)
            return f"{name} done"

        return tool(name=name, description=name)(body)

    tools = [make("t1", 0.001), make("t2", 0.01), make("t3", 0.05)]
    model = ScriptedModel([calls(call("t1", {}), call("t2", {}), call("t3", {}))])
    agent = _agent(model, tools=tools, return_directly=["t1"])
    result = Runner(agent).query_sync("q")
    assert kinds(result.events) == ["assistant", "tool:t2", "tool:t3", "tool:t1"]
    assert result.final_output == "t1 done"
    assert len(model.requests) == 1


def test_tool_messages_reach_the_model_in_call_order() -> None:
    @tool
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(0.02)
        return "slow"

    @tool
    async def fast() -> str:
        """Fast."""
        return "fast"

    model = ScriptedModel([calls(call("slow", {}, id="a"), call("fast", {}, id="b")), reply("ok")])
    result = Runner(_agent(model, tools=[slow, fast])).query_sync("q")
    assert kinds(result.events) == ["assistant", "tool:fast", "tool:slow", "assistant"]
    tool_ids = [m.tool_call_id for m in model.requests[1].messages if m.role == "tool"]
    assert tool_ids == ["a", "b"]


def test_several_return_directly_calls_the_last_in_the_message_wins() -> None:
    @tool
    def first() -> str:
        """First."""
        return "first"

    @tool
    def second() -> str:
        """Second."""
        return "second"

    model = ScriptedModel([calls(call("second", {}), call("first", {}))])
    agent = _agent(model, tools=[first, second], return_directly=["first", "second"])
    result = Runner(agent).query_sync("q")
    assert kinds(result.events) == ["assistant", "tool:second", "tool:first"]
    assert result.final_output == "first"


# --- scenario 7: exit --------------------------------------------------------------------------


def test_exit_tool_ends_the_run_with_an_exit_action() -> None:
    model = ScriptedModel([call("exit", {"final_result": "F"})])
    result = Runner(_agent(model, exit_tool=True)).query_sync("q")
    assert kinds(result.events) == ["assistant", "tool:exit"]
    assert result.events[1].action == AgentAction(exit=True)
    assert result.final_output == "F"
    assert [t.name for t in model.requests[0].tools] == ["exit"]


# --- scenario 8-9 (plait decision): tool failures go back to the model -------------------------


@tool
def explode(x: int) -> str:
    """Always fails.

    Args:
        x: Ignored.
    """
    raise ValueError(f"bad input {x}")


def test_a_tool_exception_is_told_to_the_model_by_default() -> None:
    model = ScriptedModel([call("explode", {"x": 1}), reply("recovered")])
    result = Runner(_agent(model, tools=[explode])).query_sync("q")
    assert kinds(result.events) == ["assistant", "tool:explode", "assistant"]
    content = result.events[1].message.message.content  # type: ignore[union-attr]
    assert content == "Error: tool 'explode' raised ValueError: bad input 1"
    assert result.final_output == "recovered"


def test_tool_errors_raise_makes_a_tool_exception_fatal() -> None:
    model = ScriptedModel([call("explode", {"x": 1}, id="c9"), reply("never")])
    result = Runner(_agent(model, tools=[explode], tool_errors="raise")).query_sync("q")
    assert kinds(result.events) == ["assistant", "error:ToolError"]
    err = result.error
    assert isinstance(err, ToolError)
    assert (err.tool_name, err.call_id, err.agent_name) == ("explode", "c9", "A")
    assert isinstance(err.__cause__, ValueError)
    assert len(model.requests) == 1


def test_an_unknown_tool_is_told_to_the_model_with_the_valid_names() -> None:
    model = ScriptedModel([call("nope", {}), reply("sorry")])
    result = Runner(_agent(model, tools=[lookup, explode])).query_sync("q")
    content = result.events[1].message.message.content  # type: ignore[union-attr]
    assert content == (
        "Error: there is no tool named 'nope'; the available tools are: lookup, explode."
    )
    assert result.final_output == "sorry"
    fatal = Runner(_agent(ScriptedModel([call("nope", {})]), tool_errors="raise")).query_sync("q")
    assert isinstance(fatal.error, ToolError) and fatal.error.tool_name == "nope"


def test_malformed_json_arguments_are_told_to_the_model() -> None:
    model = ScriptedModel([call("lookup", '{"query": '), reply("fixed")])
    result = Runner(_agent(model, tools=[lookup])).query_sync("q")
    content = result.events[1].message.message.content  # type: ignore[union-attr]
    assert content.startswith("Error: the arguments for tool 'lookup' are not valid JSON")
    fatal = Runner(
        _agent(ScriptedModel([call("lookup", "[1")]), tools=[lookup], tool_errors="raise")
    ).query_sync("q")
    assert isinstance(fatal.error, InvalidToolArguments)


def test_invalid_arguments_name_the_problem() -> None:
    model = ScriptedModel([call("explode", {"x": "many", "y": 1}), reply("ok")])
    result = Runner(_agent(model, tools=[explode])).query_sync("q")
    content = result.events[1].message.message.content  # type: ignore[union-attr]
    assert content.startswith("Error: invalid arguments for tool 'explode': x: Input should be")
    assert "(got 'many')" in content
    assert "y: Extra inputs are not permitted" in content


# --- scenario 10: actions sent from tools ------------------------------------------------------


def test_each_parallel_call_carries_the_action_it_sent() -> None:
    @tool
    async def tag(label: str) -> str:
        """Tag.

        Args:
            label: The label.
        """
        await asyncio.sleep(0.01 if label == "A" else 0)
        run_context().send_action(AgentAction(custom=label))
        return label

    model = ScriptedModel([calls(call("tag", {"label": "A"}), call("tag", {"label": "B"})), "ok"])
    result = Runner(_agent(model, tools=[tag])).query_sync("q")
    tool_events = [e for e in result.events if e.message and e.message.role == "tool"]
    assert {e.message.message.content: e.action.custom for e in tool_events} == {  # type: ignore[union-attr]
        "A": "A",
        "B": "B",
    }


def test_send_action_outside_a_tool_is_a_usage_error() -> None:
    class Acting:
        name, description = "A", ""

        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            ctx.send_action(AgentAction(exit=True))
            yield ctx.event(message=Message.assistant("never"))

    result = Runner(Acting()).query_sync("q")
    assert isinstance(result.error, UsageError)
    assert "inside a tool" in result.error.message


def test_a_tool_result_with_an_exit_action_ends_the_turn() -> None:
    @tool
    def finish(answer: str) -> ToolResult:
        """Finish.

        Args:
            answer: The answer.
        """
        return ToolResult(content=answer, action=AgentAction(exit=True))

    model = ScriptedModel([call("finish", {"answer": "42"}), reply("never")])
    result = Runner(_agent(model, tools=[finish])).query_sync("q")
    assert result.final_output == "42"
    assert result.events[-1].action == AgentAction(exit=True)
    assert len(model.requests) == 1


# --- scenario 11: output_key -------------------------------------------------------------------


async def test_output_key_stores_the_final_text_also_when_streamed() -> None:
    for streaming in (False, True):
        runner = Runner(_agent(ScriptedModel([reply("Final")]), output_key="out"))
        runner.enable_streaming = streaming
        stream = runner.query("q")
        await stream.collect()
        assert stream.context.session_values["out"] == "Final"


async def test_output_key_takes_the_return_directly_result() -> None:
    model = ScriptedModel([call("lookup", {"query": "z"})])
    agent = _agent(model, tools=[lookup], return_directly=["lookup"], output_key="out")
    stream = Runner(agent).query("q")
    result = await stream.collect()
    assert result.final_output == "result for z"
    assert stream.context.session_values == {"out": "result for z"}


# --- scenario 12: instruction placeholders -------------------------------------------------------


def _system_prompt(instruction: str, values: dict[str, object] | None) -> str | Exception:
    model = ScriptedModel([reply("ok")])
    result = Runner(_agent(model, instruction=instruction)).query_sync("q", session_values=values)
    if result.error is not None:
        return result.error
    return model.requests[0].messages[0].content


def test_placeholders_are_filled_from_session_values() -> None:
    assert _system_prompt("Hi {User}", {"User": "bob"}) == "Hi bob"
    assert _system_prompt("Hi {User}{title?}!", {"User": "bob"}) == "Hi bob!"
    assert _system_prompt('Reply as {"name": "x"} to {User}', {"User": "bob"}) == (
        'Reply as {"name": "x"} to bob'
    )
    assert _system_prompt("Literal {{User}} and {User}", {"User": "bob"}) == (
        "Literal {User} and bob"
    )


def test_a_missing_placeholder_is_a_usage_error_naming_it() -> None:
    err = _system_prompt("Hi {User}", None)
    assert isinstance(err, UsageError)
    assert "'User'" in str(err) and "'A'" in str(err)


def test_no_instruction_means_no_system_message() -> None:
    model = ScriptedModel([reply("ok")])
    Runner(_agent(model)).query_sync("q")
    assert model.requests[0].messages == (Message.user("q"),)


def test_gen_model_input_builds_the_first_model_input() -> None:
    model = ScriptedModel([reply("ok")])

    def gen(instruction: str, agent_input: object, ctx: RunContext) -> list[Message]:
        return [Message.system(instruction.upper()), Message.user("rewritten")]

    Runner(_agent(model, instruction="be brief", gen_model_input=gen)).query_sync("q")
    assert model.requests[0].messages == (Message.system("BE BRIEF"), Message.user("rewritten"))


def test_model_options_reach_every_call() -> None:
    model = ScriptedModel([call("lookup", {}), reply("ok")])
    agent = _agent(model, tools=[lookup], model_options={"temperature": 0.1})
    Runner(agent).query_sync("q")
    assert [r.options for r in model.requests] == [{"temperature": 0.1}] * 2


# --- scenario 13-14: middlewares ---------------------------------------------------------------


def test_after_model_changes_routing_but_the_event_shows_the_raw_output() -> None:
    class StripCalls(Middleware):
        async def after_model(
            self, ctx: RunContext, request: ModelRequest, message: Message
        ) -> Message:
            return Message.assistant("stripped")

    model = ScriptedModel([call("lookup", {}, text="calling")])
    result = Runner(_agent(model, tools=[lookup], middlewares=[StripCalls()])).query_sync("q")
    assert len(result.events) == 1
    assert result.events[0].message.message.tool_calls  # type: ignore[union-attr]
    assert len(model.requests) == 1


def test_before_model_rewrites_are_kept_in_the_history() -> None:
    class AddNote(Middleware):
        async def before_model(self, ctx: RunContext, request: ModelRequest) -> ModelRequest:
            messages = request.messages
            note = Message.user(f"note {len(messages)}")
            return dataclasses.replace(request, messages=(*messages, note))

    model = ScriptedModel([call("lookup", {}), reply("ok")])
    Runner(_agent(model, tools=[lookup], middlewares=[AddNote()])).query_sync("q")
    first, second = (r.messages for r in model.requests)
    assert [m.content for m in first] == ["q", "note 1"]
    assert [m.role for m in second] == ["user", "user", "assistant", "tool", "user"]
    assert second[-1].content == "note 4"


def test_tool_middlewares_rewrite_calls_and_results_outermost_first() -> None:
    order: list[str] = []

    class Named(Middleware):
        def __init__(self, name: str) -> None:
            self.name = name

        async def before_tool(self, ctx: RunContext, call: ToolCall) -> ToolCall:
            order.append(f"before {self.name}")
            return ToolCall(id=call.id, name=call.name, arguments='{"query": "rewritten"}')

        async def after_tool(self, ctx: RunContext, call: ToolCall, result: str) -> str:
            order.append(f"after {self.name}")
            return f"{result} via {self.name}"

    model = ScriptedModel([call("lookup", {"query": "orig"}), reply("ok")])
    agent = _agent(model, tools=[lookup], middlewares=[Named("outer"), Named("inner")])
    result = Runner(agent).query_sync("q")
    content = result.events[1].message.message.content  # type: ignore[union-attr]
    assert content == "result for rewritten via inner via outer"
    assert order == ["before outer", "before inner", "after inner", "after outer"]


# --- streaming mode with tools ------------------------------------------------------------------


async def test_streaming_mode_streams_model_output_and_gives_tool_results_whole() -> None:
    model = ScriptedModel([call("lookup", {"query": "s"}, text="let me look"), reply("done")])
    runner = Runner(_agent(model, tools=[lookup]), enable_streaming=True)
    events = [e async for e in runner.query("q")]
    assert [(e.message.role, e.message.is_streaming) for e in events] == [  # type: ignore[union-attr]
        ("assistant", True),
        ("tool", False),
        ("assistant", True),
    ]
    first = await events[0].message.get_message()  # type: ignore[union-attr]
    assert first.tool_calls[0].arguments == json.dumps({"query": "s"})
    assert (await messages_of(events))[1].content == "result for s"


# --- construction ---------------------------------------------------------------------------------


def test_bad_configuration_is_a_usage_error() -> None:
    model = ScriptedModel([])
    with pytest.raises(UsageError, match="two tools named"):
        _agent(model, tools=[lookup, lookup])
    with pytest.raises(UsageError, match="unknown tools"):
        _agent(model, return_directly=["ghost"])
    with pytest.raises(UsageError, match="max_iterations"):
        _agent(model, max_iterations=0)
    with pytest.raises(UsageError, match="tool_errors"):
        _agent(model, tool_errors="ignore")
    with pytest.raises(UsageError, match="name"):
        ChatModelAgent("", model)


def test_a_spec_string_is_built_into_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from plait.models import OpenAIModel

    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")
    agent = ChatModelAgent("a", "openai:gpt-4o-mini")
    assert isinstance(agent.model, OpenAIModel)
    assert agent.model.model == "gpt-4o-mini"


def test_a_spec_that_cannot_be_built_names_the_agent_and_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(UsageError, match=r"^agent 'a': .*set OPENAI_API_KEY"):
        ChatModelAgent("a", "openai:gpt-4o-mini")


@pytest.mark.parametrize(("model", "shown"), [(42, "int 42"), (object(), "object <object")])
def test_what_is_not_a_model_is_rejected_at_construction(model: object, shown: str) -> None:
    with pytest.raises(UsageError, match=r"^agent 'a' needs a model") as info:
        ChatModelAgent("a", model)  # type: ignore[arg-type]
    assert f"not {shown}" in str(info.value)


def test_plain_functions_are_accepted_as_tools() -> None:
    def double(n: int) -> int:
        """Double a number.

        Args:
            n: The number.
        """
        return n * 2

    model = ScriptedModel([call("double", {"n": 21}), reply("42")])
    result = Runner(_agent(model, tools=[double])).query_sync("q")
    assert result.events[1].message.message.content == "42"  # type: ignore[union-attr]
    assert model.requests[0].tools[0].description == "Double a number."


def test_a_limit_reached_before_a_call_ends_the_run_without_reusing_the_last_reply() -> None:
    @tool
    def again() -> str:
        """Go again."""
        return "again"

    model = ScriptedModel([call("again", {}), call("again", {}), reply("never")])
    agent = ChatModelAgent("A", model, tools=[again], max_iterations=2)
    result = Runner(agent).query_sync("q")
    assert isinstance(result.error, MaxIterationsExceeded)
    assert len(model.requests) == 2
    tools = [e for e in result.events if e.message and e.message.role == "tool"]
    assert len(tools) == 2  # the last reply's tool call ran once, not again


# --- what the model sends and is told -----------------------------------------------------------


def test_an_unknown_tool_name_is_quoted_cut_to_200_characters() -> None:
    name = "n" * 1_000_000
    model = ScriptedModel([call(name, {}), reply("sorry")])
    result = Runner(_agent(model, tools=[lookup])).query_sync("q")
    content = result.events[1].message.message.content  # type: ignore[union-attr]
    assert content == (
        f"Error: there is no tool named '{'n' * 200}'…(1,000,000 characters); "
        "the available tools are: lookup."
    )


class _WrongModel:
    """A custom model whose generate returns, and whose stream gives, what it is told."""

    def __init__(self, generated: object, streamed: object) -> None:
        self.generated = generated
        self.streamed = streamed

    async def generate(self, messages: object, *, tools: object = (), **options: object) -> object:
        return self.generated

    def stream(self, messages: object, *, tools: object = (), **options: object) -> object:
        return self.streamed


async def _yielding(*chunks: object) -> object:
    for chunk in chunks:
        yield chunk


@pytest.mark.parametrize(
    ("value", "shown"), [(None, "NoneType"), ({"role": "assistant"}, "dict"), ("hi", "str")]
)
def test_a_model_that_returns_no_message_ends_the_run_with_a_model_error(
    value: object, shown: str
) -> None:
    agent = ChatModelAgent("A", _WrongModel(value, None))  # type: ignore[arg-type]
    result = Runner(agent).query_sync("q")
    assert kinds(result.events) == ["error:ModelError"]
    assert isinstance(result.error, ModelError) and result.error.agent_name == "A"
    assert str(result.error) == (
        f"model _WrongModel: generate() returned {shown}, expected a Message "
        "(see the plait.models.ChatModel protocol)"
    )


@pytest.mark.parametrize(
    ("streamed", "said"),
    [
        (None, "stream() returned NoneType, expected an async iterator of Messages"),
        ("hi", "stream() returned str, expected an async iterator of Messages"),
        ({"role": "assistant"}, "stream() returned dict, expected an async iterator of Messages"),
        (_yielding(Message.assistant("a"), {"x": 1}), "stream() yielded dict, expected Message"),
        (_yielding(None), "stream() yielded NoneType, expected Message chunks"),
    ],
)
async def test_a_model_that_streams_no_messages_ends_the_run_with_a_model_error(
    streamed: object, said: str
) -> None:
    agent = ChatModelAgent("A", _WrongModel(None, streamed))  # type: ignore[arg-type]
    result = await Runner(agent, enable_streaming=True).query("q").collect()
    assert isinstance(result.error, ModelError) and result.error.agent_name == "A"
    assert str(result.error).startswith(f"model _WrongModel: {said}")
    assert result.final_output is None


def test_an_async_def_stream_is_named_as_the_mistake_it_is() -> None:
    class Coroutine(_WrongModel):
        async def stream(  # type: ignore[override]
            self, messages: object, *, tools: object = (), **options: object
        ) -> object:
            return Message.assistant("not streamed")

    agent = ChatModelAgent("A", Coroutine(None, None))  # type: ignore[arg-type]
    result = Runner(agent, enable_streaming=True).query_sync("q")
    assert isinstance(result.error, ModelError)
    assert "stream() returned coroutine, expected an async iterator" in str(result.error)


@tool
def go_elsewhere() -> ToolResult:
    """Hand the conversation to agent X."""
    return ToolResult(
        content="handing over",
        action=AgentAction(transfer_to_agent=TransferToAgentAction(dest_agent_name="X")),
    )


def test_a_transfer_from_an_agent_with_no_targets_is_told_to_the_model() -> None:
    model = ScriptedModel([call("go_elsewhere", {}), reply("I'll answer myself")])
    result = Runner(_agent(model, tools=[go_elsewhere])).query_sync("q")
    assert kinds(result.events) == ["assistant", "tool:go_elsewhere", "assistant"]
    tool_event = result.events[1]
    assert tool_event.action is None
    assert tool_event.message.message.content == (  # type: ignore[union-attr]
        "Error: tool 'go_elsewhere' asked to transfer to agent 'X', but agent 'A' has no "
        "agents to transfer to."
    )
    assert result.final_output == "I'll answer myself"
    fatal_model = ScriptedModel([call("go_elsewhere", {}, id="c1"), reply("never")])
    fatal = Runner(_agent(fatal_model, tools=[go_elsewhere], tool_errors="raise")).query_sync("q")
    assert kinds(fatal.events) == ["assistant", "error:ToolError"]
    assert isinstance(fatal.error, ToolError)
    assert (fatal.error.tool_name, fatal.error.call_id) == ("go_elsewhere", "c1")
