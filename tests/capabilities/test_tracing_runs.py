"""The spans tracing keeps of the process's recent runs (`plait.tracing.run_spans`), and the
trace of the three-level project team in docs/capabilities/tracing.md."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace import TracerProvider, export
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from plait import ChatModelAgent, Message, Runner, interrupt, tool, tracing
from plait.capabilities import span_keeper as _span_keeper
from plait.errors import UsageError
from plait.stores import SqliteStore
from plait.testing import FunctionModel, ScriptedModel, call, reply

ROOT = Path(__file__).resolve().parents[2]


@tool
def add(a: int, b: int) -> int:
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


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    """A provider tracing is on with (off again after the test)."""
    provider = TracerProvider()
    tracing.instrument(provider)
    yield provider
    tracing.uninstrument()


def _calc() -> ChatModelAgent:
    return ChatModelAgent(
        "calc", ScriptedModel([call("add", {"a": 1, "b": 2}), reply("3")]), tools=[add]
    )


def _run(agent: Any, text: str = "go", checkpoint_id: str | None = None) -> Any:
    async def main() -> Any:
        return await Runner(agent).query(text, checkpoint_id=checkpoint_id).collect()

    return asyncio.run(main())


def _names(spans: list[dict[str, Any]] | None) -> list[str]:
    assert spans is not None
    return [span["name"] for span in spans]


def test_the_spans_of_a_run_are_kept_by_its_checkpoint_id(provider: TracerProvider) -> None:
    result = _run(_calc(), checkpoint_id="run-1")
    assert result.final_output == "3"
    spans = tracing.run_spans("run-1")
    assert _names(spans) == [
        "invoke_agent calc",
        "chat ScriptedModel",
        "execute_tool add",
        "chat ScriptedModel",
    ]
    assert spans is not None
    root = spans[0]
    assert root["parent_id"] is None and root["kind"] == "internal"
    assert all(s["parent_id"] == root["span_id"] for s in spans[1:])
    assert spans[1]["kind"] == "client"
    assert spans[1]["attributes"]["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert tracing.run_spans("no-such-run") == []


def test_a_run_given_no_id_is_known_by_the_id_it_pauses_under(
    provider: TracerProvider, tmp_path: Path
) -> None:
    def agent(*script: Message) -> ChatModelAgent:
        return ChatModelAgent("cashier", ScriptedModel(list(script)), tools=[approve])

    store = SqliteStore(tmp_path / "plait.db")
    paused = Runner(agent(call("approve", {"item": "x"})), store=store).query_sync("buy")
    assert paused.checkpoint_id is not None
    first = tracing.run_spans(paused.checkpoint_id)
    assert _names(first) == ["invoke_agent cashier", "chat ScriptedModel", "execute_tool approve"]
    assert first is not None
    [event] = first[0]["events"]
    assert event["name"] == "interrupt"
    assert event["attributes"]["plait.checkpoint.id"] == paused.checkpoint_id

    again = agent(call("approve", {"item": "y"}))  # the resumed run pauses again
    resumed = Runner(again, store=store).resume_sync(paused.checkpoint_id, value="yes")
    assert resumed.checkpoint_id not in (None, paused.checkpoint_id)
    by_old, by_new = (
        tracing.run_spans(paused.checkpoint_id),
        tracing.run_spans(resumed.checkpoint_id),
    )
    assert by_old == by_new  # the resume, under the id it resumes and the one it paused under
    assert by_new is not None
    assert by_new[0]["span_id"] != first[0]["span_id"]
    assert by_new[0]["links"][0]["span_id"] == first[0]["span_id"]


def test_only_the_runs_spans_are_kept_with_a_client_span_under_its_model_call() -> None:
    provider = TracerProvider()

    async def main() -> None:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        async def generate(messages: list[Message], tools: list[Any]) -> str:
            async with httpx.AsyncClient() as client:
                response = await client.get(f"http://127.0.0.1:{port}/complete")
            return response.text

        tracer = provider.get_tracer("app")
        async with server:
            with tracer.start_as_current_span("request"):
                agent = ChatModelAgent("a", FunctionModel(generate))
                await Runner(agent).query("hi", checkpoint_id="with-http").collect()
                with tracer.start_as_current_span("after the run"):
                    pass
            agent = ChatModelAgent("b", FunctionModel(lambda m, t: "other"))
            await Runner(agent).query("hi", checkpoint_id="other").collect()

    HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    tracing.instrument(provider)
    try:
        asyncio.run(main())
        spans = tracing.run_spans("with-http")
        other = tracing.run_spans("other")
    finally:
        tracing.uninstrument()
        HTTPXClientInstrumentor().uninstrument()
    assert spans is not None
    names = _names(spans)
    assert names[:2] == ["invoke_agent a", "chat FunctionModel"]
    assert "request" not in names and "after the run" not in names
    http = [s for s in spans[2:] if s["kind"] == "client"]
    assert http and all(s["parent_id"] == spans[1]["span_id"] for s in http)
    assert spans[0]["parent_id"] is not None  # under the request span, which is not the run's
    assert _names(other) == ["invoke_agent b", "chat FunctionModel"]


def test_the_last_keep_runs_runs_are_kept(provider: TracerProvider) -> None:
    tracing.uninstrument()
    tracing.instrument(provider, keep_runs=2)
    for index in range(3):
        _run(_calc(), checkpoint_id=f"run-{index}")
    assert tracing.run_spans("run-0") == []
    assert len(_names(tracing.run_spans("run-1"))) == 4
    assert len(_names(tracing.run_spans("run-2"))) == 4


def test_a_run_keeps_at_most_max_spans_the_first_to_finish(
    provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_span_keeper, "MAX_SPANS", 3)
    script = [call("add", {"a": i, "b": 1}) for i in range(3)] + [reply("done")]
    agent = ChatModelAgent("busy", ScriptedModel(script), tools=[add])
    assert _run(agent, checkpoint_id="busy").error is None
    spans = tracing.run_spans("busy")
    assert _names(spans) == ["chat ScriptedModel", "execute_tool add", "chat ScriptedModel"]


def test_no_spans_are_kept_without_tracing_an_sdk_provider_or_keep_runs() -> None:
    _run(_calc(), checkpoint_id="off")
    assert tracing.run_spans("off") is None
    for given, keep in ((NoOpTracerProvider(), 100), (TracerProvider(), 0)):
        tracing.instrument(given, keep_runs=keep)
        try:
            _run(_calc(), checkpoint_id="off")
            assert tracing.run_spans("off") is None
        finally:
            tracing.uninstrument()


def test_keep_runs_zero_adds_no_processor_and_exports_stay_as_they_were() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.instrument(provider, keep_runs=0)
    try:
        _run(_calc(), checkpoint_id="zero")
    finally:
        tracing.uninstrument()
    processors = provider._active_span_processor._span_processors
    assert len(processors) == 1
    assert len(exporter.get_finished_spans()) == 4


@pytest.mark.parametrize("keep", [-1, 1.5, True, "10"])
def test_a_bad_keep_runs_is_a_usage_error(keep: Any) -> None:
    with pytest.raises(UsageError, match="keep_runs"):
        tracing.instrument(TracerProvider(), keep_runs=keep)
    assert tracing.run_spans("x") is None  # tracing stayed off


def test_uninstrument_forgets_the_spans_and_the_same_provider_keeps_again() -> None:
    provider = TracerProvider()
    tracing.instrument(provider)
    try:
        _run(_calc(), checkpoint_id="before")
    finally:
        tracing.uninstrument()
    assert tracing.run_spans("before") is None
    _run(_calc(), checkpoint_id="untraced")
    tracing.instrument(provider)
    try:
        assert tracing.run_spans("before") == []
        _run(_calc(), checkpoint_id="after")
        assert len(_names(tracing.run_spans("after"))) == 4
        assert tracing.run_spans("untraced") == []
    finally:
        tracing.uninstrument()
    assert len(provider._active_span_processor._span_processors) == 1  # one keeper, reused
    assert trace.get_tracer_provider() is not provider


# --- docs/capabilities/tracing.md: the trace of a three-level team ------------------------

_SECTION = "## A trace of a three-level team"


def _team_section() -> str:
    page = (ROOT / "docs" / "capabilities" / "tracing.md").read_text()
    return page.split(_SECTION, 1)[1].split("\n## ", 1)[0]


def _team_example() -> tuple[str, str]:
    """Return the section's runnable example and the text it says the example prints."""
    section = _team_section()
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    printed = section.split("```text\n", 1)[1].split("```", 1)[0]
    return code, printed


def test_the_three_level_team_example_prints_the_tree_the_docs_show(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, printed = _team_example()
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(code, "docs/capabilities/tracing.md", "exec"), namespace)
    assert tracing.run_spans("x") is None  # the example turned tracing off again
    assert capsys.readouterr().out == printed
    assert printed.count("invoke_agent") == 12


def test_the_console_exporter_line_of_the_example_prints_every_span_as_json(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the exporter's default output is the sys.stdout of import time: point it at the test's
    monkeypatch.setattr(export, "ConsoleSpanExporter", lambda: ConsoleSpanExporter(out=sys.stdout))
    code, printed = _team_example()
    line = "# provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))"
    assert line in code
    console = code.replace(line, line[2:])
    exec(compile(console, "docs/capabilities/tracing.md", "exec"), {"__name__": "docs_example"})
    out = capsys.readouterr().out
    assert out.endswith(printed)
    assert out.count('"name": "invoke_agent') == printed.count("invoke_agent")
    assert '"name": "execute_tool transfer_to_agent"' in out
