"""Hooks that act: they replace model requests, replies, tool calls and results, refuse with a
`PlaitError`, and see every seam of a run, runner hooks around agent hooks."""

from __future__ import annotations

import contextvars
import dataclasses
from typing import Any

import pytest

import plait
from plait import (
    AgentInput,
    AgentTool,
    ChatModelAgent,
    Hooks,
    Message,
    ModelRequest,
    RunContext,
    Runner,
    RunResult,
    SequentialAgent,
    ToolCall,
    interrupt,
    tool,
)
from plait.errors import AgentError, HookError, PlaitError
from plait.testing import FunctionModel, ScriptedModel, call, reply


@tool
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return f"found {query}"


@tool
def approve(item: str) -> str:
    """Ask a person to approve.

    Args:
        item: What to approve.
    """
    return f"{item}: {interrupt({'approve': item})}"


class Refused(PlaitError):
    """A policy said no."""


@pytest.fixture(params=[False, True], ids=["generate", "stream"])
def streaming(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def test_the_module_and_names_are_public() -> None:
    assert plait.hooks.Hooks is Hooks
    assert plait.ModelRequest is ModelRequest
    assert issubclass(plait.Middleware, Hooks)
    assert issubclass(HookError, PlaitError) and not issubclass(HookError, AgentError)


def test_before_model_replaces_the_request_and_after_model_the_reply(streaming: bool) -> None:
    class Policy(Hooks):
        async def before_model(self, ctx: RunContext, request: ModelRequest) -> ModelRequest:
            system = Message.system("Be brief.")
            return dataclasses.replace(
                request, messages=(system, *request.messages), options={"temperature": 0}
            )

        async def after_model(
            self, ctx: RunContext, request: ModelRequest, reply: Message
        ) -> Message:
            assert request.messages[0].content == "Be brief."
            return Message.assistant(reply.content.upper())

    model = ScriptedModel([reply("hello")])
    runner = Runner(ChatModelAgent("A", model), hooks=[Policy()], enable_streaming=streaming)
    result = runner.query_sync("hi")
    assert result.error is None
    sent = model.requests[0]
    assert [m.content for m in sent.messages] == ["Be brief.", "hi"]
    assert sent.options == {"temperature": 0}
    assert result.final_output in ("HELLO", "hello")  # the event shows the raw output
    assert runner.agent.name == "A"


def test_after_model_replaces_what_the_agent_acts_on() -> None:
    class NoTools(Hooks):
        async def after_model(
            self, ctx: RunContext, request: ModelRequest, reply: Message
        ) -> Message:
            return Message.assistant("no tools today")

    model = ScriptedModel([call("lookup", {"query": "x"}), reply("never")])
    agent = ChatModelAgent("A", model, tools=[lookup], hooks=[NoTools()])
    Runner(agent).query_sync("hi")
    assert model.remaining == 1  # the call was dropped: no second model call


def test_a_guardrail_refuses_a_tool_call_and_the_run_ends_with_its_error(streaming: bool) -> None:
    ran: list[str] = []

    class Guard(Hooks):
        async def before_tool(self, ctx: RunContext, call: ToolCall) -> ToolCall | None:
            ran.append(call.name)
            raise Refused(f"tool {call.name} is not allowed")

    model = ScriptedModel([call("lookup", {"query": "x"}), reply("done")])
    agent = ChatModelAgent("A", model, tools=[lookup])
    result = Runner(agent, hooks=[Guard()], enable_streaming=streaming).query_sync("hi")
    assert isinstance(result.error, Refused)
    assert ran == ["lookup"]
    assert model.remaining == 1


def test_after_tool_replaces_the_result_the_model_sees(streaming: bool) -> None:
    class Redact(Hooks):
        async def after_tool(self, ctx: RunContext, call: ToolCall, result: str) -> str:
            return result.replace("found", "[redacted]")

    model = ScriptedModel([call("lookup", {"query": "x"}), reply("done")])
    agent = ChatModelAgent("A", model, tools=[lookup], hooks=[Redact()])
    result = Runner(agent, enable_streaming=streaming).query_sync("hi")
    assert result.error is None
    assert model.requests[1].messages[-1].content == "[redacted] x"


@pytest.mark.parametrize("seam", ["before_model", "after_tool", "before_agent", "before_run"])
def test_a_hook_that_raises_ends_the_run_with_a_hook_error(seam: str) -> None:
    async def broken(self: Hooks, *args: Any) -> None:
        raise RuntimeError("oops")

    Broken = type("Broken", (Hooks,), {seam: broken})
    model = ScriptedModel([call("lookup", {"query": "x"}), reply("done")])
    agent = ChatModelAgent("A", model, tools=[lookup])
    result = Runner(agent, hooks=[Broken()]).query_sync("hi")
    assert isinstance(result.error, HookError)
    assert not isinstance(result.error, AgentError)
    assert (result.error.hook, result.error.seam) == ("Broken", seam)
    assert "Broken" in str(result.error) and seam in str(result.error)


def test_runner_hooks_wrap_agent_hooks_like_an_onion() -> None:
    log: list[str] = []

    class Logged(Hooks):
        def __init__(self, name: str) -> None:
            self.name = name

        async def before_agent(self, ctx: RunContext, input: AgentInput) -> None:
            log.append(f"{self.name} before_agent")

        async def after_agent(self, ctx: RunContext, error: PlaitError | None) -> None:
            log.append(f"{self.name} after_agent")

        async def before_model(self, ctx: RunContext, request: ModelRequest) -> None:
            log.append(f"{self.name} before_model")

        async def after_model(self, ctx: RunContext, request: ModelRequest, reply: Message) -> None:
            log.append(f"{self.name} after_model")

        async def before_tool(self, ctx: RunContext, call: ToolCall) -> None:
            log.append(f"{self.name} before_tool")

        async def after_tool(self, ctx: RunContext, call: ToolCall, result: str) -> None:
            log.append(f"{self.name} after_tool")

    model = ScriptedModel([call("lookup", {"query": "x"}), reply("done")])
    agent = ChatModelAgent(
        "A", model, tools=[lookup], hooks=[Logged("a1")], middlewares=[Logged("a2")]
    )
    Runner(agent, hooks=[Logged("r1"), Logged("r2")]).query_sync("hi")
    inward = ["r1", "r2", "a1", "a2"]
    outward = inward[::-1]

    def seam(name: str, order: list[str]) -> list[str]:
        return [f"{who} {name}" for who in order]

    assert log == [
        *seam("before_agent", inward),
        *seam("before_model", inward),
        *seam("after_model", outward),
        *seam("before_tool", inward),
        *seam("after_tool", outward),
        *seam("before_model", inward),
        *seam("after_model", outward),
        *seam("after_agent", outward),
    ]


def test_nested_agents_are_seen_entering_and_leaving() -> None:
    log: list[str] = []

    class Agents(Hooks):
        async def before_agent(self, ctx: RunContext, input: AgentInput) -> None:
            log.append(f"enter {ctx.agent_name}")

        async def after_agent(self, ctx: RunContext, error: PlaitError | None) -> None:
            log.append(f"exit {ctx.agent_name}")

    helper = ChatModelAgent("helper", ScriptedModel([reply("helped")]), description="Helps.")
    main = ChatModelAgent(
        "main",
        ScriptedModel([call("helper", {"request": "help"}), reply("done")]),
        tools=[AgentTool(helper)],
    )
    after = ChatModelAgent("after", ScriptedModel([reply("bye")]))
    flow = SequentialAgent("flow", [main, after])
    result = Runner(flow, hooks=[Agents()]).query_sync("hi")
    assert result.error is None
    assert log == [
        "enter flow",
        "enter main",
        "enter helper",
        "exit helper",
        "exit main",
        "enter after",
        "exit after",
        "exit flow",
    ]


def test_pause_resume_and_step_saves_are_seen_with_their_checkpoint_ids() -> None:
    log: list[tuple[str, str]] = []

    class Saves(Hooks):
        async def on_pause(self, ctx: RunContext, interrupts: Any, checkpoint_id: str) -> None:
            assert interrupts and interrupts[0].info == {"approve": "x"}
            log.append(("pause", checkpoint_id))

        async def on_resume(self, ctx: RunContext, checkpoint_id: str) -> None:
            log.append(("resume", checkpoint_id))

        async def on_step_saved(self, ctx: RunContext, checkpoint_id: str) -> None:
            log.append(("step", checkpoint_id))

    model = ScriptedModel(
        [call("lookup", {"query": "x"}), call("approve", {"item": "x"}), reply("done")]
    )
    agent = ChatModelAgent("A", model, tools=[lookup, approve])
    runner = Runner(agent, hooks=[Saves()], durability="step")
    paused = runner.query_sync("go", checkpoint_id="job")
    assert paused.checkpoint_id == "job"
    assert log == [("step", "job"), ("pause", "job")]
    log.clear()
    done = runner.resume_sync("job", value="yes")
    assert done.error is None
    assert log[0] == ("resume", "job")
    assert ("step", "job") in log[1:]


def test_before_run_and_after_run_see_the_input_and_the_result() -> None:
    seen: list[Any] = []

    class Runs(Hooks):
        async def before_run(self, ctx: RunContext, input: AgentInput) -> None:
            seen.append([m.content for m in input.messages])

        async def after_run(self, ctx: RunContext, result: RunResult) -> None:
            seen.append(result)

    result = Runner(
        ChatModelAgent("A", ScriptedModel([reply("hello")])), hooks=[Runs()]
    ).query_sync("hi")
    assert seen[0] == ["hi"]
    assert isinstance(seen[1], RunResult) and seen[1].final_output == "hello"
    assert result.final_output == "hello"


def test_a_context_variable_set_before_the_model_is_current_during_its_call(
    streaming: bool,
) -> None:
    span: contextvars.ContextVar[str | None] = contextvars.ContextVar("span", default=None)
    during: list[str | None] = []
    after: list[str | None] = []

    class Tracing(Hooks):
        async def before_model(self, ctx: RunContext, request: ModelRequest) -> None:
            span.set(f"span of {ctx.agent_name}")

        async def after_model(self, ctx: RunContext, request: ModelRequest, reply: Message) -> None:
            after.append(span.get())

    def answer(messages: list[Message], tools: Any) -> str:
        during.append(span.get())
        return "hello"

    agent = ChatModelAgent("A", FunctionModel(answer))
    result = Runner(agent, hooks=[Tracing()], enable_streaming=streaming).query_sync("hi")
    assert result.error is None
    assert during == ["span of A"]
    assert after == ["span of A"]


def test_a_refusal_inside_an_agent_run_as_a_tool_ends_the_whole_run() -> None:
    class Guard(Hooks):
        async def before_model(self, ctx: RunContext, request: ModelRequest) -> None:
            raise Refused(f"{ctx.agent_name} may not call its model")

    helper = ChatModelAgent(
        "helper", ScriptedModel([reply("helped")]), description="Helps.", hooks=[Guard()]
    )
    model = ScriptedModel([call("helper", {"request": "help"}), reply("done")])
    main = ChatModelAgent("main", model, tools=[AgentTool(helper)])
    result = Runner(main).query_sync("hi")
    assert isinstance(result.error, Refused)
    assert str(result.error) == "helper may not call its model"
    assert model.remaining == 1  # the caller's model was not told and asked again
