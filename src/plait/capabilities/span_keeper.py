"""The finished spans of the recent runs of this process, by checkpoint id (for the dev page's
timeline): a span processor that `plait.tracing.instrument` adds to an SDK `TracerProvider`.

Tracing marks the context every run's spans start in with the run's `RunSpans`; a span that
starts in a marked context, or under a span of a run, belongs to that run, so an instrumented
HTTP client's span under a `chat` span does too. A finished span goes to its run. Runs are
known by checkpoint id: the id a run was started under or resumes, and the id it paused under;
a resume's spans replace those of the run it resumes. At most `keep_runs` ids are kept (the
oldest are forgotten), and at most `MAX_SPANS` spans a run. Imported only with OpenTelemetry's
SDK.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import SpanProcessor

if TYPE_CHECKING:
    from collections.abc import Mapping

    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, Span

__all__ = ["MAX_SPANS", "RunSpans", "SpanKeeper", "span_json"]

#: The most spans kept of one run (the first ones to finish).
MAX_SPANS = 2000
#: The most spans open at once that the keeper follows (a guard against spans never ended).
_MAX_OPEN = 100_000


class RunSpans:
    """The finished spans of one run."""

    __slots__ = ("spans",)

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def add(self, span: ReadableSpan) -> None:
        """Keep a finished span (up to `MAX_SPANS`)."""
        if len(self.spans) < MAX_SPANS:
            self.spans.append(span)


class SpanKeeper(SpanProcessor):
    """Keep the finished spans of the last `keep_runs` runs (by checkpoint id)."""

    def __init__(self) -> None:
        self._key = otel_context.create_key("plait.tracing.run")
        self._lock = threading.Lock()
        self._open: dict[int, RunSpans] = {}  # span id -> its run, while the span is open
        self._runs: OrderedDict[str, RunSpans] = OrderedDict()
        self._keep = 0
        self.on = False

    def start(self, keep_runs: int) -> None:
        """Keep the spans of the runs that start from now on."""
        self._keep = keep_runs
        self.on = True

    def stop(self) -> None:
        """Keep nothing more and forget every run (the provider keeps the processor)."""
        self.on = False
        with self._lock:
            self._open.clear()
            self._runs.clear()

    def mark(self, context: Context) -> tuple[Context, RunSpans]:
        """Return `context` marked for a new run's spans, and where they are kept."""
        run = RunSpans()
        return otel_context.set_value(self._key, run, context), run

    def name(self, checkpoint_id: str, run: RunSpans) -> None:
        """Know `run` by `checkpoint_id` (in place of what that id named before)."""
        if not self.on:
            return
        with self._lock:
            self._runs[checkpoint_id] = run
            self._runs.move_to_end(checkpoint_id)
            while len(self._runs) > self._keep:
                self._runs.popitem(last=False)

    def spans(self, checkpoint_id: str) -> list[dict[str, Any]]:
        """Return the finished spans of the run known by `checkpoint_id`, in the order they
        started, as JSON data ([] when no run is known by it)."""
        with self._lock:
            run = self._runs.get(checkpoint_id)
            found = [] if run is None else list(run.spans)
        found.sort(key=lambda span: span.start_time or 0)
        return [span_json(span) for span in found]

    # --- SpanProcessor ---------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Follow `span` if it starts in a run's marked context or under a run's span."""
        if not self.on:
            return
        run: Any = None if parent_context is None else parent_context.get(self._key)
        if run is None:
            parent = span.parent
            if parent is None or not self._open:
                return
            run = self._open.get(parent.span_id)
            if run is None:
                return
        if len(self._open) < _MAX_OPEN:
            self._open[span.get_span_context().span_id] = run

    def on_end(self, span: ReadableSpan) -> None:
        """Keep `span` with its run."""
        if not self._open or span.context is None:
            return
        run = self._open.pop(span.context.span_id, None)
        if run is not None:
            run.add(span)


def span_json(span: ReadableSpan) -> dict[str, Any]:
    """Return a finished span as JSON data: ids as hex, times in ns since the epoch."""
    context = span.context
    parent = span.parent
    start = span.start_time or 0
    end = span.end_time if span.end_time is not None else start
    status = span.status
    return {
        "name": span.name,
        "trace_id": f"{context.trace_id:032x}" if context is not None else "",
        "span_id": f"{context.span_id:016x}" if context is not None else "",
        "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
        "kind": span.kind.name.lower(),
        "start_ns": start,
        "end_ns": end,
        "duration_ms": (end - start) / 1e6,
        "attributes": _plain(span.attributes),
        "status": {"code": status.status_code.name, "description": status.description},
        "events": [
            {"name": e.name, "time_ns": e.timestamp, "attributes": _plain(e.attributes)}
            for e in span.events
        ],
        "links": [
            {
                "trace_id": f"{link.context.trace_id:032x}",
                "span_id": f"{link.context.span_id:016x}",
                "attributes": _plain(link.attributes),
            }
            for link in span.links
        ],
    }


def _plain(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """Attribute values as JSON data (sequences as lists)."""
    if not attributes:
        return {}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attributes.items()}
