"""What OpenTelemetry tracing costs per ReAct step: off, and on (`plait.tracing.instrument`).

    .venv/bin/python bench/tracing.py

The workload of `bench/hooks.py`: a zero-latency model calls the async tool `add` ten times,
then answers; the per-step figure is (ten-step run - one-turn run) / 10, the median of five
measurements, in microseconds. With tracing on, each step makes a `chat` and an
`execute_tool` span, through the SDK's `TracerProvider` and a `BatchSpanProcessor` whose
exporter drops the spans (what is measured is plait's and the SDK's work, not an export).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hooks import Scripted, add
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from plait import ChatModelAgent, Runner, tracing


class Drop(SpanExporter):
    """Takes every span and keeps none."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


async def _per_run(steps: int, runs: int) -> float:
    agent = ChatModelAgent("calc", Scripted(steps), instruction="Add.", tools=[add])
    runner = Runner(agent)
    for _ in range(min(runs, 50)):  # warm up
        await runner.query("add").collect()
    started = time.perf_counter()
    for _ in range(runs):
        await runner.query("add").collect()
    return (time.perf_counter() - started) / runs * 1e6


def _one_measurement() -> float:
    """Return one per-step figure in microseconds: (ten steps - one turn) / 10."""
    one = asyncio.run(_per_run(0, 1500))
    ten = asyncio.run(_per_run(10, 300))
    return (ten - one) / 10


def _sdk_step(provider: TracerProvider, runs: int = 2000) -> float:
    """Return what the SDK alone takes for a step's two spans (a `chat` span made current
    with five attributes, an `execute_tool` span with three), in microseconds."""
    from opentelemetry import context, trace

    tracer = provider.get_tracer("bench")
    parent = trace.set_span_in_context(tracer.start_span("invoke_agent calc"))
    started = time.perf_counter()
    for _ in range(runs):
        chat = tracer.start_span(
            "chat m", context=parent, attributes={"a": "chat", "b": "m"}, kind=trace.SpanKind.CLIENT
        )
        token = context.attach(trace.set_span_in_context(chat))
        chat.set_attributes({"c": 1, "d": 2, "e": ("tool_calls",)})
        context.detach(token)
        chat.end()
        tool = tracer.start_span(
            "execute_tool add", context=parent, attributes={"a": "t", "b": "add", "c": "c1"}
        )
        tool.end()
    return (time.perf_counter() - started) / runs * 1e6


def main() -> None:
    """Measure off and on in turn, five times (the load of a shared machine drifts), and
    print the medians."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    offs, ons, sdks = [], [], []
    try:
        for _ in range(5):
            offs.append(_one_measurement())
            tracing.instrument(provider)
            try:
                ons.append(_one_measurement())
            finally:
                tracing.uninstrument()
            sdks.append(_sdk_step(provider))
    finally:
        provider.shutdown()
    off, on, sdk = (statistics.median(x) for x in (offs, ons, sdks))
    print(f"per ReAct step, tracing off:          {off:6.1f} µs")
    print(f"per ReAct step, tracing on:           {on:6.1f} µs ({on / off:.2f} times)")
    print(f"  the SDK's two spans alone:          {sdk:6.1f} µs")
    print(f"  plait's own share (on - off - SDK): {on - off - sdk:6.1f} µs")


if __name__ == "__main__":
    main()
