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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hooks import Scripted, add  # noqa: E402  (the workload of bench/hooks.py)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from plait import ChatModelAgent, Runner, tracing  # noqa: E402


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


def per_step() -> float:
    """Return the median per-step cost in microseconds over five measurements."""
    figures = []
    for _ in range(5):
        one = asyncio.run(_per_run(0, 1500))
        ten = asyncio.run(_per_run(10, 300))
        figures.append((ten - one) / 10)
    return statistics.median(figures)


def main(*_: Any) -> None:
    off = per_step()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    tracing.instrument(provider)
    try:
        on = per_step()
    finally:
        tracing.uninstrument()
        provider.shutdown()
    print(f"per ReAct step, tracing off:          {off:6.1f} µs")
    print(f"per ReAct step, tracing on:           {on:6.1f} µs ({on / off:.2f} times)")


if __name__ == "__main__":
    main()
