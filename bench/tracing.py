"""What OpenTelemetry tracing costs per ReAct step: off, and on (`plait.tracing.instrument`).

    .venv/bin/python bench/tracing.py

The workload of `bench/hooks.py`: a zero-latency model calls the async tool `add` ten times,
then answers; the per-step figure is (ten-step run - one-turn run) / 10, the median of five
measurements, in microseconds. With tracing on, each step makes a `chat` and an
`execute_tool` span, through the SDK's `TracerProvider` and a `BatchSpanProcessor` whose
exporter drops the spans (what is measured is plait's and the SDK's work, not an export),
as `instrument()` sets it up by default (keeping the spans of the last 100 runs for the dev
page) and with `keep_runs=0`; and with the API's no-op tracer, which shows plait's own share
(the hook and its seams).
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


def _sdk_provider() -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    return provider


def main() -> None:
    """Measure off, on (keeping spans, and not), and on with a no-op tracer (plait's own
    work, no SDK) in turn, five times (the load of a shared machine drifts), and print the
    medians."""
    from opentelemetry.trace import NoOpTracerProvider

    keeping, keepless = _sdk_provider(), _sdk_provider()  # each its own processors
    offs, ons, bares, noops = [], [], [], []
    cases = ((keeping, 100, ons), (keepless, 0, bares), (NoOpTracerProvider(), 100, noops))
    try:
        for _ in range(5):
            offs.append(_one_measurement())
            for given, keep, figures in cases:
                tracing.instrument(given, keep_runs=keep)
                try:
                    figures.append(_one_measurement())
                finally:
                    tracing.uninstrument()
    finally:
        keeping.shutdown()
        keepless.shutdown()
    off, on, bare, noop = (statistics.median(x) for x in (offs, ons, bares, noops))
    print(f"per ReAct step, tracing off:             {off:6.1f} µs")
    print(f"per ReAct step, tracing on (SDK):        {on:6.1f} µs ({on / off:.2f} times)")
    print(f"per ReAct step, on with keep_runs=0:     {bare:6.1f} µs ({bare / off:.2f} times)")
    print(f"per ReAct step, on with a no-op tracer:  {noop:6.1f} µs ({noop / off:.2f} times)")


if __name__ == "__main__":
    main()
