"""OpenTelemetry spans (`plait.tracing`): names, attributes and nesting of agent, model and tool
spans across transfers, teams, agents as tools, graphs and parallel agents; handoff and
interrupt events, the resumed run's link, contents, errors, and turning tracing on and off."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from plait import (
    AgentTool,
    ChatModelAgent,
    Message,
    ParallelAgent,
    Runner,
    StateGraph,
    Team,
    Usage,
    interrupt,
    tool,
    tracing,
)
from plait.errors import UsageError
from plait.graph import END, START, append
from plait.hooks import HookChain, with_global
from plait.stores import SqliteStore
from plait.testing import FunctionModel, ScriptedModel, call, calls, reply

ROOT = Path(__file__).resolve().parents[2]


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool
def approve(item: str) -> str:
    """Ask a person to approve.

    Args:
        item: What to approve.
    """
    return f"{item}: {interrupt({'approve': item})}"


@tool
def broken(x: int) -> str:
    """Fail.

    Args:
        x: Anything.
    """
    raise ValueError("no such thing")


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    provider, exporter = _provider()
    tracing.instrument(provider)
    yield exporter
    tracing.uninstrument()


@pytest.fixture
def contents() -> Iterator[InMemorySpanExporter]:
    provider, exporter = _provider()
    tracing.instrument(provider, capture_content=True)
    yield exporter
    tracing.uninstrument()


class Tree:
    """The finished spans, by name, with their parents."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.spans = list(exporter.get_finished_spans())
        self._by_id = {s.context.span_id: s for s in self.spans if s.context is not None}

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, (name, [s.name for s in self.spans])
        return found[0]

    def parent(self, span: ReadableSpan) -> str | None:
        if span.parent is None:
            return None
        parent = self._by_id.get(span.parent.span_id)
        return None if parent is None else parent.name

    def edges(self) -> set[tuple[str | None, str]]:
        return {(self.parent(s), s.name) for s in self.spans}

    def names(self) -> list[str]:
        return [s.name for s in self.spans]


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_a_react_agent_with_a_tool_gives_agent_chat_and_tool_spans(
    spans: InMemorySpanExporter, streaming: bool
) -> None:
    model = ScriptedModel(
        [
            call("add", {"a": 1, "b": 2}, id="c1", usage=Usage(input_tokens=10, output_tokens=2)),
            reply("3", usage=Usage(input_tokens=20, output_tokens=3)),
        ]
    )
    agent = ChatModelAgent("calc", model, tools=[add])
    result = Runner(agent, enable_streaming=streaming).query_sync("1 + 2?")
    assert result.error is None and result.final_output == "3"
    tree = Tree(spans)
    assert sorted(tree.names()) == [
        "chat ScriptedModel",
        "chat ScriptedModel",
        "execute_tool add",
        "invoke_agent calc",
    ]
    root = tree.one("invoke_agent calc")
    assert root.parent is None
    assert tree.edges() == {
        (None, "invoke_agent calc"),
        ("invoke_agent calc", "chat ScriptedModel"),
        ("invoke_agent calc", "execute_tool add"),
    }
    assert _attrs(root) == {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "calc"}
    first, second = sorted(tree.named("chat ScriptedModel"), key=lambda s: s.start_time or 0)
    assert _attrs(first) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "ScriptedModel",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 2,
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    assert type(_attrs(first)["gen_ai.usage.input_tokens"]) is int
    assert _attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)
    assert _attrs(second)["gen_ai.usage.output_tokens"] == 3
    assert first.kind == trace.SpanKind.CLIENT
    assert _attrs(tree.one("execute_tool add")) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "c1",
    }
    assert all(s.status.status_code != StatusCode.ERROR for s in tree.spans)
    assert all(s.context.trace_id == root.context.trace_id for s in tree.spans)
    assert result.metadata == {}  # the run's metadata is the runner's alone


def test_a_model_without_usage_has_zero_tokens_and_a_model_attribute_names_it(
    spans: InMemorySpanExporter,
) -> None:
    class Named(FunctionModel):
        model = "gpt-test"

    Runner(ChatModelAgent("a", Named(lambda m, t: "hi"))).query_sync("hi")
    chat = Tree(spans).one("chat gpt-test")
    assert _attrs(chat)["gen_ai.request.model"] == "gpt-test"
    assert _attrs(chat)["gen_ai.usage.input_tokens"] == 0


def test_the_chat_span_is_current_during_the_model_call_and_an_http_call_nests_under_it() -> None:
    provider, exporter = _provider()
    seen: list[trace.Span] = []

    async def main() -> None:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        async def generate(messages: list[Message], tools: list[Any]) -> str:
            seen.append(trace.get_current_span())
            async with httpx.AsyncClient() as client:
                response = await client.get(f"http://127.0.0.1:{port}/complete")
            return response.text

        async with server:
            runner = Runner(ChatModelAgent("a", FunctionModel(generate)))
            result = await runner.query("hi").collect()
        assert result.final_output == "ok"
        assert trace.get_current_span() is trace.INVALID_SPAN  # detached again

    HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    tracing.instrument(provider)
    try:
        asyncio.run(main())
    finally:
        tracing.uninstrument()
        HTTPXClientInstrumentor().uninstrument()
    tree = Tree(exporter)
    chat = tree.one("chat FunctionModel")
    assert seen[0].get_span_context().span_id == chat.context.span_id
    http = [s for s in tree.spans if s.kind == trace.SpanKind.CLIENT and s is not chat]
    assert [tree.parent(s) for s in http] == ["chat FunctionModel"]


def test_a_transfer_target_nests_under_the_agent_that_transferred_with_a_handoff_event(
    spans: InMemorySpanExporter,
) -> None:
    billing = ChatModelAgent("billing", ScriptedModel([reply("paid")]))
    router = ChatModelAgent(
        "router",
        ScriptedModel([call("transfer_to_agent", {"agent_name": "billing"})]),
        sub_agents=[billing],
    )
    result = Runner(router).query_sync("pay")
    assert result.final_output == "paid"
    tree = Tree(spans)
    assert tree.edges() == {
        (None, "invoke_agent router"),
        ("invoke_agent router", "chat ScriptedModel"),
        ("invoke_agent router", "execute_tool transfer_to_agent"),
        ("invoke_agent router", "invoke_agent billing"),
        ("invoke_agent billing", "chat ScriptedModel"),
    }
    events = tree.one("invoke_agent router").events
    assert [(e.name, dict(e.attributes or {})) for e in events] == [
        (
            "handoff",
            {"plait.handoff.from_agent": "router", "plait.handoff.to_agent": "billing"},
        )
    ]


def test_a_swarm_handoff_nests_the_target_under_the_member_that_handed_off(
    spans: InMemorySpanExporter,
) -> None:
    a = ChatModelAgent("a", ScriptedModel([call("transfer_to_agent", {"agent_name": "b"})]))
    b = ChatModelAgent("b", ScriptedModel([reply("done by b")]))
    result = Runner(Team.swarm(a, [a, b], name="desk")).query_sync("go")
    assert result.error is None and result.final_output == "done by b"
    tree = Tree(spans)
    assert {
        (None, "invoke_agent desk"),
        ("invoke_agent desk", "invoke_agent a"),
        ("invoke_agent a", "invoke_agent b"),
    } <= tree.edges()
    assert [e.name for e in tree.one("invoke_agent a").events] == ["handoff"]


def test_a_coordinator_team_nests_members_under_the_tool_calls_that_run_them(
    spans: InMemorySpanExporter,
) -> None:
    researcher = ChatModelAgent("researcher", ScriptedModel([reply("facts")]), description="d")
    lead = ChatModelAgent(
        "lead", ScriptedModel([call("researcher", {"request": "look"}), reply("done")])
    )
    result = Runner(Team.coordinator(lead, [researcher], name="dev")).query_sync("go")
    assert result.final_output == "done"
    tree = Tree(spans)
    assert tree.edges() == {
        (None, "invoke_agent dev"),
        ("invoke_agent dev", "invoke_agent lead"),
        ("invoke_agent lead", "chat ScriptedModel"),
        ("invoke_agent lead", "execute_tool researcher"),
        ("execute_tool researcher", "invoke_agent researcher"),
        ("invoke_agent researcher", "chat ScriptedModel"),
    }


def test_a_coordinator_named_as_its_team_nests_under_the_team_span(
    spans: InMemorySpanExporter,
) -> None:
    researcher = ChatModelAgent("researcher", ScriptedModel([reply("facts")]), description="d")
    lead = ChatModelAgent("lead", ScriptedModel([reply("done")]))
    Runner(Team.coordinator(lead, [researcher])).query_sync("go")
    tree = Tree(spans)
    outer, inner = sorted(tree.named("invoke_agent lead"), key=lambda s: s.start_time or 0)
    assert outer.parent is None
    assert inner.parent is not None and inner.parent.span_id == outer.context.span_id


def test_two_concurrent_calls_of_one_agent_tool_nest_under_their_own_tool_spans(
    spans: InMemorySpanExporter,
) -> None:
    helper = ChatModelAgent("helper", FunctionModel(lambda m, t: f"re: {m[-1].content}"))
    boss = ChatModelAgent(
        "boss",
        ScriptedModel(
            [
                calls(
                    call("helper", {"request": "one"}, id="t1"),
                    call("helper", {"request": "two"}, id="t2"),
                ),
                reply("both done"),
            ]
        ),
        tools=[AgentTool(helper)],
    )
    assert Runner(boss).query_sync("go").final_output == "both done"
    tree = Tree(spans)
    tools = {_attrs(s)["gen_ai.tool.call.id"]: s for s in tree.named("execute_tool helper")}
    helpers = tree.named("invoke_agent helper")
    assert len(helpers) == 2
    under = {
        tools_id
        for s in helpers
        for tools_id, t in tools.items()
        if s.parent is not None and s.parent.span_id == t.context.span_id
    }
    assert under == {"t1", "t2"}
    assert {tree.parent(t) for t in tools.values()} == {"invoke_agent boss"}


class State(TypedDict, total=False):
    messages: Annotated[list[Any], append]


def test_a_graph_nodes_agent_nests_under_the_graph(spans: InMemorySpanExporter) -> None:
    writer = ChatModelAgent("writer", ScriptedModel([reply("the report")]))
    graph = StateGraph(State)
    graph.add_node("write", writer).add_edge(START, "write").add_edge("write", END)
    result = Runner(graph.compile(name="g")).query_sync("go")
    assert result.error is None
    assert Tree(spans).edges() == {
        (None, "invoke_agent g"),
        ("invoke_agent g", "invoke_agent writer"),
        ("invoke_agent writer", "chat ScriptedModel"),
    }


def test_a_parallel_agents_branches_nest_under_it_each_with_its_own_calls(
    spans: InMemorySpanExporter,
) -> None:
    left = ChatModelAgent(
        "left", ScriptedModel([call("add", {"a": 1, "b": 1}), reply("L")]), tools=[add]
    )
    right = ChatModelAgent(
        "right", ScriptedModel([call("add", {"a": 2, "b": 2}), reply("R")]), tools=[add]
    )
    result = Runner(ParallelAgent("both", [left, right])).query_sync("go")
    assert result.error is None
    tree = Tree(spans)
    assert tree.edges() == {
        (None, "invoke_agent both"),
        ("invoke_agent both", "invoke_agent left"),
        ("invoke_agent both", "invoke_agent right"),
        ("invoke_agent left", "chat ScriptedModel"),
        ("invoke_agent left", "execute_tool add"),
        ("invoke_agent right", "chat ScriptedModel"),
        ("invoke_agent right", "execute_tool add"),
    }
    assert len(tree.spans) == 9


def test_an_interrupt_is_an_event_and_the_resumed_run_links_to_the_paused_one(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    def agent(*script: Message) -> ChatModelAgent:
        return ChatModelAgent("cashier", ScriptedModel(list(script)), tools=[approve])

    paused = Runner(
        agent(call("approve", {"item": "x"})), store=SqliteStore(tmp_path / "plait.db")
    ).query_sync("buy")
    assert paused.checkpoint_id is not None and len(paused.interrupts) == 1
    first = Tree(spans).one("invoke_agent cashier")
    [event] = first.events
    assert event.name == "interrupt"
    assert dict(event.attributes or {}) == {
        "plait.interrupt.id": paused.interrupts[0].id,
        "plait.interrupt.address": paused.interrupts[0].address,
        "plait.checkpoint.id": paused.checkpoint_id,
    }
    spans.clear()
    # another runner, another store object: only the checkpoint carries the paused span
    resumed = Runner(
        agent(reply("approved")), store=SqliteStore(tmp_path / "plait.db")
    ).resume_sync(paused.checkpoint_id, value="yes")
    assert resumed.error is None and resumed.final_output == "approved"
    again = Tree(spans).one("invoke_agent cashier")
    assert again.parent is None
    assert again.context.trace_id != first.context.trace_id
    [link] = again.links
    assert link.context.trace_id == first.context.trace_id
    assert link.context.span_id == first.context.span_id
    assert dict(link.attributes or {}) == {"plait.checkpoint.id": paused.checkpoint_id}


def test_a_run_that_pauses_again_links_each_resume_to_the_run_before(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    model = ScriptedModel(
        [call("approve", {"item": "x"}), call("approve", {"item": "y"}), reply("both")]
    )
    runner = Runner(
        ChatModelAgent("cashier", model, tools=[approve]), store=SqliteStore(tmp_path / "db")
    )
    first = runner.query_sync("buy")
    second = runner.resume_sync(first.checkpoint_id or "", value="yes")
    assert second.checkpoint_id is not None and second.checkpoint_id != first.checkpoint_id
    third = runner.resume_sync(second.checkpoint_id, value="yes")
    assert third.final_output == "both"
    roots = sorted(Tree(spans).named("invoke_agent cashier"), key=lambda s: s.start_time or 0)
    assert len(roots) == 3
    assert roots[0].links == ()
    for before, after in itertools.pairwise(roots):
        [link] = after.links
        assert link.context.span_id == before.context.span_id


def test_an_interrupt_inside_an_agent_run_as_a_tool_is_an_event_of_that_agent(
    spans: InMemorySpanExporter,
) -> None:
    cashier = ChatModelAgent(
        "cashier", ScriptedModel([call("approve", {"item": "x"})]), tools=[approve]
    )
    boss = ChatModelAgent(
        "boss", ScriptedModel([call("cashier", {"request": "buy"})]), tools=[AgentTool(cashier)]
    )
    paused = Runner(boss).query_sync("go")
    assert len(paused.interrupts) == 1
    tree = Tree(spans)
    assert [e.name for e in tree.one("invoke_agent cashier").events] == ["interrupt"]
    assert tree.one("invoke_agent boss").events == ()
    assert ("execute_tool cashier", "invoke_agent cashier") in tree.edges()
    assert all(s.end_time is not None for s in tree.spans)
    assert len(tree.spans) == 6  # both agents, their model calls and tool calls


def test_contents_are_recorded_only_when_asked(contents: InMemorySpanExporter) -> None:
    model = ScriptedModel([call("add", {"a": 1, "b": 2}, id="c1"), reply("3")])
    agent = ChatModelAgent("calc", model, instruction="Add.", tools=[add])
    Runner(agent).query_sync("1 + 2?")
    tree = Tree(contents)
    first, second = sorted(tree.named("chat ScriptedModel"), key=lambda s: s.start_time or 0)
    assert json.loads(_attrs(first)["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": "Add."}]},
        {"role": "user", "parts": [{"type": "text", "content": "1 + 2?"}]},
    ]
    assert json.loads(_attrs(first)["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}
            ],
            "finish_reason": "tool_calls",
        }
    ]
    sent = json.loads(_attrs(second)["gen_ai.input.messages"])
    assert sent[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": "3"}],
        "name": "add",
    }
    tool_span = tree.one("execute_tool add")
    assert json.loads(_attrs(tool_span)["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2}
    assert _attrs(tool_span)["gen_ai.tool.call.result"] == "3"


def test_without_capture_content_no_contents_are_recorded(spans: InMemorySpanExporter) -> None:
    model = ScriptedModel([call("add", {"a": 1, "b": 2}), reply("a secret")])
    Runner(ChatModelAgent("calc", model, tools=[add])).query_sync("my secret")
    for span in Tree(spans).spans:
        attributes = _attrs(span)
        assert not any(k.endswith((".messages", ".arguments", ".result")) for k in attributes)
        assert "secret" not in json.dumps(attributes, default=str)


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_a_failing_model_call_ends_its_span_with_an_error_and_detaches_it(
    spans: InMemorySpanExporter, streaming: bool
) -> None:
    def fail(messages: list[Message], tools: list[Any]) -> str:
        raise RuntimeError("provider down")

    async def main() -> Any:
        agent = ChatModelAgent("a", ScriptedModel([fail]))
        result = await Runner(agent, enable_streaming=streaming).query("hi").collect()
        return result, trace.get_current_span()

    result, current = asyncio.run(main())
    assert result.error is not None
    assert current is trace.INVALID_SPAN  # the chat span is no longer current
    tree = Tree(spans)
    for name in ("chat ScriptedModel", "invoke_agent a"):
        span = tree.one(name)
        assert span.status.status_code == StatusCode.ERROR
        assert _attrs(span)["error.type"] == "ModelError"
    assert [e.name for e in tree.one("chat ScriptedModel").events] == ["exception"]


def test_a_run_left_during_a_streamed_reply_ends_its_spans_without_a_context_error(
    spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        agent = ChatModelAgent("a", ScriptedModel(["a long answer"]))
        async for event in Runner(agent, enable_streaming=True).query("hi"):
            assert event.message is not None and event.message.stream is not None
            break  # left unclosed: the event loop closes the run as it shuts down

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records] == []
    assert {"chat ScriptedModel", "invoke_agent a"} <= set(Tree(spans).names())


def test_a_failing_tool_told_to_the_model_is_an_error_span_in_a_run_that_goes_on(
    spans: InMemorySpanExporter,
) -> None:
    model = ScriptedModel([call("broken", {"x": 1}), reply("sorry")])
    result = Runner(ChatModelAgent("a", model, tools=[broken])).query_sync("hi")
    assert result.error is None
    tree = Tree(spans)
    failed = tree.one("execute_tool broken")
    assert failed.status.status_code == StatusCode.ERROR
    assert _attrs(failed)["error.type"] == "ValueError"
    assert tree.one("invoke_agent a").status.status_code != StatusCode.ERROR


def test_a_tool_failure_that_ends_the_run_fails_the_tool_and_agent_spans(
    spans: InMemorySpanExporter,
) -> None:
    model = ScriptedModel([call("broken", {"x": 1}), reply("never")])
    agent = ChatModelAgent("a", model, tools=[broken], tool_errors="raise")
    result = Runner(agent).query_sync("hi")
    assert result.error is not None
    tree = Tree(spans)
    for name in ("execute_tool broken", "invoke_agent a"):
        span = tree.one(name)
        assert span.status.status_code == StatusCode.ERROR
        assert _attrs(span)["error.type"] == "ToolError"


def test_tracing_is_process_wide_and_uninstrument_stops_it() -> None:
    provider, exporter = _provider()
    runner = Runner(ChatModelAgent("a", FunctionModel(lambda m, t: "hi")))  # made before
    runner.query_sync("untraced")
    tracing.instrument(provider)
    try:
        runner.query_sync("traced")
    finally:
        tracing.uninstrument()
    runner.query_sync("untraced again")
    assert Tree(exporter).names().count("invoke_agent a") == 1
    tracing.uninstrument()  # off already: nothing happens


def test_instrument_again_after_uninstrument_uses_the_new_provider() -> None:
    first, first_spans = _provider()
    second, second_spans = _provider()
    runner = Runner(ChatModelAgent("a", FunctionModel(lambda m, t: "hi")))
    tracing.instrument(first)
    try:
        with pytest.raises(UsageError, match="uninstrument"):
            tracing.instrument(second)
        runner.query_sync("one")
    finally:
        tracing.uninstrument()
    tracing.instrument(second)
    try:
        runner.query_sync("two")
    finally:
        tracing.uninstrument()
    assert len(first_spans.get_finished_spans()) == 2
    assert len(second_spans.get_finished_spans()) == 2


def test_none_takes_the_global_provider_without_replacing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider, exporter = _provider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    tracing.instrument()
    try:
        Runner(ChatModelAgent("a", FunctionModel(lambda m, t: "hi"))).query_sync("hi")
    finally:
        tracing.uninstrument()
    assert "invoke_agent a" in Tree(exporter).names()


def test_the_run_nests_under_the_span_current_where_it_starts(
    spans: InMemorySpanExporter,
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    runner = Runner(ChatModelAgent("a", FunctionModel(lambda m, t: "hi")))

    async def main() -> None:
        with provider.get_tracer("app").start_as_current_span("request"):
            await runner.query("hi").collect()

    asyncio.run(main())
    assert (("request", "invoke_agent a")) in Tree(spans).edges()


def test_tracing_wraps_the_runners_hooks(spans: InMemorySpanExporter) -> None:
    from plait import Hooks

    current: list[str] = []

    class Look(Hooks):
        async def before_model(self, ctx: Any, request: Any) -> None:
            current.append(getattr(trace.get_current_span(), "name", ""))

    agent = ChatModelAgent("a", FunctionModel(lambda m, t: "hi"))
    assert Runner(agent, hooks=[Look()]).query_sync("x").final_output == "hi"
    assert current == ["chat FunctionModel"]  # the chat span is open before the runner's hooks


def test_without_tracing_a_runner_uses_its_own_hook_chain() -> None:
    chain = HookChain()
    assert with_global(chain) is chain


def test_without_opentelemetry_instrument_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(UsageError, match=r"plait\[otel\]"):
        tracing.instrument()


def test_importing_plait_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, plait, plait.tracing; from plait import Runner, ChatModelAgent; "
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')]"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def _doc_example() -> str:
    page = (ROOT / "docs" / "capabilities" / "tracing.md").read_text()
    section = page.split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_docs_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    try:
        exec(compile(_doc_example(), "docs/capabilities/tracing.md", "exec"), namespace)
    finally:
        tracing.uninstrument()
    printed = capsys.readouterr().out
    assert "invoke_agent weather" in printed and "execute_tool forecast" in printed


def test_a_model_call_a_hook_refuses_ends_its_span_with_the_refusal(
    spans: InMemorySpanExporter,
) -> None:
    from plait import Hooks
    from plait.errors import PlaitError

    class Refused(PlaitError):
        """A policy said no."""

    class Policy(Hooks):
        async def before_model(self, ctx: Any, request: Any) -> None:
            raise Refused("not today")

    async def main() -> Any:
        agent = ChatModelAgent("a", FunctionModel(lambda m, t: "never"))
        result = await Runner(agent, hooks=[Policy()]).query("hi").collect()
        return result, trace.get_current_span()

    result, current = asyncio.run(main())
    assert isinstance(result.error, PlaitError)
    assert current is trace.INVALID_SPAN
    chat = Tree(spans).one("chat FunctionModel")
    assert chat.status.status_code == StatusCode.ERROR
    assert _attrs(chat)["error.type"] == "Refused"


def test_a_parallel_branch_that_pauses_has_the_interrupt_event(
    spans: InMemorySpanExporter,
) -> None:
    left = ChatModelAgent("left", ScriptedModel([call("approve", {"item": "x"})]), tools=[approve])
    right = ChatModelAgent("right", ScriptedModel([reply("R")]))
    paused = Runner(ParallelAgent("both", [left, right])).query_sync("go")
    assert len(paused.interrupts) == 1
    tree = Tree(spans)
    assert [e.name for e in tree.one("invoke_agent left").events] == ["interrupt"]
    assert tree.one("invoke_agent right").events == ()
    assert tree.one("invoke_agent both").events == ()
    left_span = tree.one("invoke_agent left")
    assert left_span.end_time is not None and left_span.start_time is not None
    assert all(s.end_time is not None for s in tree.spans)
