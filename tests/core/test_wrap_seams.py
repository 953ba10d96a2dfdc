"""The wrap seams: `wrap_model` and `wrap_tool` surround the call itself, runner hooks
outside agent hooks; one may change what goes in and out, or answer without calling on,
which replaces the call (streamed calls included); what one raises is the call's failure."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from plait import (
    AgentAction,
    AgentTool,
    Approval,
    ChatModelAgent,
    HookContext,
    Hooks,
    Message,
    ModelRequest,
    Runner,
    ToolCall,
    ToolResult,
    run_context,
    tool,
)
from plait.errors import HookError, ModelError
from plait.stores import MemoryStore
from plait.testing import FunctionModel, ScriptedModel, call, reply

CallModel = Callable[[ModelRequest], Awaitable[Message]]
CallTool = Callable[[ToolCall], Awaitable[Any]]


@tool
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return f"found {query}"


@pytest.fixture(params=[False, True], ids=["generate", "stream"])
def streaming(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


class Logged(Hooks):
    """Notes each wrap seam on the way in and out."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def wrap_model(
        self, ctx: HookContext, request: ModelRequest, call_next: CallModel
    ) -> Message:
        self.log.append(f"{self.name} model in")
        reply = await call_next(request)
        self.log.append(f"{self.name} model out")
        return reply

    async def wrap_tool(self, ctx: HookContext, call: ToolCall, call_next: CallTool) -> Any:
        self.log.append(f"{self.name} tool in")
        result = await call_next(call)
        self.log.append(f"{self.name} tool out")
        return result

    async def after_model(self, ctx: HookContext, request: ModelRequest, reply: Message) -> None:
        self.log.append(f"{self.name} after_model")


def test_runner_wrap_hooks_surround_agent_wrap_hooks_like_an_onion(streaming: bool) -> None:
    log: list[str] = []
    model = ScriptedModel([call("lookup", {"query": "x"}), reply("done")])
    agent = ChatModelAgent(
        "A", model, tools=[lookup], hooks=[Logged("a1", log)], middlewares=[Logged("a2", log)]
    )
    runner = Runner(agent, hooks=[Logged("r1", log)], enable_streaming=streaming)
    assert runner.query_sync("hi").final_output == "done"
    inward, outward = ["r1", "a1", "a2"], ["a2", "a1", "r1"]
    model_call = [
        *(f"{n} model in" for n in inward),
        *(f"{n} model out" for n in outward),
        *(f"{n} after_model" for n in outward),
    ]
    tool_call = [*(f"{n} tool in" for n in inward), *(f"{n} tool out" for n in outward)]
    assert log == [*model_call, *tool_call, *model_call]


def test_a_wrap_model_hook_that_answers_itself_replaces_the_call(streaming: bool) -> None:
    seen: list[Message] = []

    class Canned(Hooks):
        async def wrap_model(
            self, ctx: HookContext, request: ModelRequest, call_next: CallModel
        ) -> Message:
            return Message.assistant(f"canned for {request.messages[-1].content}")

        async def after_model(
            self, ctx: HookContext, request: ModelRequest, reply: Message
        ) -> None:
            seen.append(reply)

    model = ScriptedModel([reply("live")])
    runner = Runner(ChatModelAgent("A", model, hooks=[Canned()]), enable_streaming=streaming)
    result = runner.query_sync("hi")
    assert result.final_output == "canned for hi"
    assert model.requests == []  # the model was never called
    assert [m.content for m in seen] == ["canned for hi"]
    if streaming:
        (event,) = [e for e in result.events if e.message is not None]
        assert event.message.stream is not None
        assert [c.content for c in event.message.stream.chunks] == ["canned for hi"]


async def test_a_streamed_call_passes_the_models_chunks_on_as_they_come() -> None:
    got: list[Message] = []

    class Keep(Hooks):
        async def wrap_model(
            self, ctx: HookContext, request: ModelRequest, call_next: CallModel
        ) -> Message:
            whole = await call_next(request)
            got.append(whole)
            return whole

    model = ScriptedModel(["one two three four five six"])
    runner = Runner(ChatModelAgent("A", model, hooks=[Keep()]), enable_streaming=True)
    chunks: list[str] = []
    async for event in runner.query("hi"):
        if event.message is not None and event.message.stream is not None:
            chunks += [chunk.content async for chunk in event.message.stream]
    assert len(chunks) > 1  # one to one, not merged
    assert "".join(chunks) == "one two three four five six"
    assert [m.content for m in got] == ["one two three four five six"]  # the whole reply


def test_a_wrap_model_hook_changes_the_request_and_the_reply(streaming: bool) -> None:
    acted_on: list[str] = []

    class Brief(Hooks):
        async def wrap_model(
            self, ctx: HookContext, request: ModelRequest, call_next: CallModel
        ) -> Message:
            system = Message.system("Be brief.")
            answer = await call_next(
                dataclasses.replace(request, messages=(system, *request.messages))
            )
            return Message.assistant(answer.content.upper())

        async def after_model(
            self, ctx: HookContext, request: ModelRequest, reply: Message
        ) -> None:
            acted_on.append(reply.content)

    model = ScriptedModel([reply("fine")])
    agent = ChatModelAgent("A", model, hooks=[Brief()])
    result = Runner(agent, enable_streaming=streaming).query_sync("hi")
    assert model.requests[0].messages[0].content == "Be brief."
    assert acted_on == ["FINE"]  # what the agent acts on, after a stream too
    if not streaming:  # a stream's readers saw the model's own chunks
        assert result.final_output == "FINE"


def test_what_a_wrap_model_hook_raises_is_the_model_calls_failure() -> None:
    class Down(Hooks):
        async def wrap_model(
            self, ctx: HookContext, request: ModelRequest, call_next: CallModel
        ) -> Message:
            raise ModelError("the provider is down")

    helper = ChatModelAgent("helper", ScriptedModel([reply("x")]), hooks=[Down()])
    model = ScriptedModel([call("helper", {"request": "go"}), reply("went without it")])
    result = Runner(ChatModelAgent("main", model, tools=[AgentTool(helper)])).query_sync("hi")
    assert result.error is None and result.final_output == "went without it"
    told = model.requests[1].messages[-1]
    assert told.role == "tool" and "the provider is down" in told.content


def test_a_wrap_hook_that_returns_the_wrong_kind_ends_the_run_with_a_hook_error() -> None:
    class Wrong(Hooks):
        async def wrap_model(self, ctx: HookContext, request: ModelRequest, call_next: Any) -> Any:
            return "not a message"

    result = Runner(ChatModelAgent("A", ScriptedModel([reply("x")]), hooks=[Wrong()])).query_sync(
        "hi"
    )
    assert isinstance(result.error, HookError)
    assert (result.error.hook, result.error.seam) == ("Wrong", "wrap_model")
    assert "expected Message" in str(result.error)


def test_a_wrap_tool_hook_sees_the_tool_and_may_answer_for_it() -> None:
    seen: list[Any] = []

    class Mock(Hooks):
        async def wrap_tool(self, ctx: HookContext, call: ToolCall, call_next: CallTool) -> Any:
            seen.append(ctx.tool)
            return f"mocked {call.name}"

    model = ScriptedModel([call("lookup", {"query": "x"}), reply("done")])
    result = Runner(ChatModelAgent("A", model, tools=[lookup]), hooks=[Mock()]).query_sync("hi")
    assert result.error is None
    assert seen == [lookup]
    assert model.requests[1].messages[-1].content == "mocked lookup"


def test_call_next_gives_the_tools_result_with_the_actions_it_sent() -> None:
    @tool
    def finish() -> str:
        """Finish."""
        run_context().send_action(AgentAction(exit=True))
        return "bye"

    results: list[Any] = []

    class Look(Hooks):
        async def wrap_tool(self, ctx: HookContext, call: ToolCall, call_next: CallTool) -> Any:
            result = await call_next(call)
            results.append(result)
            return result

    model = ScriptedModel([call("finish", {}), reply("never")])
    result = Runner(ChatModelAgent("A", model, tools=[finish], hooks=[Look()])).query_sync("hi")
    assert results == [ToolResult(content="bye", action=AgentAction(exit=True))]
    assert result.events[-1].action is not None and result.events[-1].action.exit


def test_what_a_wrap_tool_hook_raises_is_the_tools_failure_told_to_the_model() -> None:
    class Broken(Hooks):
        async def wrap_tool(self, ctx: HookContext, call: ToolCall, call_next: CallTool) -> Any:
            raise LookupError("no index")

    model = ScriptedModel([call("lookup", {"query": "x"}), reply("sorry")])
    result = Runner(ChatModelAgent("A", model, tools=[lookup], hooks=[Broken()])).query_sync("hi")
    assert result.final_output == "sorry"
    told = model.requests[1].messages[-1].content
    assert told.startswith("Error: tool 'lookup' raised LookupError: no index")


def test_a_gated_tools_approval_is_asked_inside_the_wrap_hooks() -> None:
    @tool(approval=Approval())
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        return f"paid {amount}"

    class Deny(Hooks):
        def __init__(self, answer: bool) -> None:
            self.answer = answer

        async def wrap_tool(self, ctx: HookContext, call: ToolCall, call_next: CallTool) -> Any:
            return await call_next(call) if self.answer else "not today"

    def run(hook: Hooks) -> tuple[Any, ScriptedModel]:
        model = ScriptedModel([call("pay", {"amount": 5}), reply("ok")])
        agent = ChatModelAgent("A", model, tools=[pay])
        return Runner(agent, store=MemoryStore(), hooks=[hook]).query_sync("pay"), model

    answered, model = run(Deny(False))  # answered by the hook: no approval is asked
    assert answered.interrupts == () and model.requests[1].messages[-1].content == "not today"
    passed, _ = run(Deny(True))  # let through: the gate inside it asks
    assert [i.info["approval"]["tool"] for i in passed.interrupts] == ["pay"]


def test_a_hooks_own_model_call_goes_through_the_runners_wrap_model_hooks() -> None:
    log: list[str] = []

    class Summarize(Hooks):
        async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
            side = ctx.side_model(FunctionModel(lambda messages, tools: "a summary"))
            summary = await side.generate([Message.user("summarize")])
            log.append(summary.content)

    model = ScriptedModel([reply("done")])
    agent = ChatModelAgent("A", model, hooks=[Summarize()])
    Runner(agent, hooks=[Logged("r", log)]).query_sync("hi")
    assert log == [
        "r model in",
        "r model out",
        "a summary",
        "r model in",
        "r model out",
        "r after_model",
    ]
