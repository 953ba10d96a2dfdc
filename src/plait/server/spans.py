"""The body of `GET /v1/runs/{checkpoint_id}/spans`: a run's OpenTelemetry spans, as
`plait.tracing` kept them in this process (the dev page draws them as a timeline)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from plait.capabilities import tracing

__all__ = ["LinkOut", "RunSpans", "SpanEventOut", "SpanOut", "SpanStatusOut", "run_spans"]


class SpanStatusOut(BaseModel):
    """A span's status: ERROR for a failing agent, model call or tool."""

    code: Literal["UNSET", "OK", "ERROR"]
    description: str | None = None


class SpanEventOut(BaseModel):
    """An event of a span (`handoff`, `interrupt`, `exception`)."""

    name: str
    time_ns: int
    attributes: dict[str, Any] = Field(default_factory=dict)


class LinkOut(BaseModel):
    """A link of a span (a resumed run's root span links to the paused run's)."""

    trace_id: str
    span_id: str
    attributes: dict[str, Any] = Field(default_factory=dict)


class SpanOut(BaseModel):
    """One finished span: ids as hex, times in nanoseconds since the epoch."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None = Field(
        description="The parent span's id; null, or an id not in the list, for a root."
    )
    kind: str
    start_ns: int
    end_ns: int
    duration_ms: float
    attributes: dict[str, Any] = Field(default_factory=dict)
    status: SpanStatusOut
    events: list[SpanEventOut] = Field(default_factory=list)
    links: list[LinkOut] = Field(default_factory=list)


class RunSpans(BaseModel):
    """A run's spans, in the order they started."""

    enabled: bool = Field(
        description=(
            "Whether this process keeps spans: tracing is on "
            "(`plait.tracing.instrument`) with an SDK TracerProvider."
        )
    )
    spans: list[SpanOut] = Field(
        default_factory=list,
        description=(
            "The run's spans, as the process serving this request kept them: empty for a run "
            "another process ran, one it has forgotten, or one it did not trace."
        ),
    )


def run_spans(checkpoint_id: str) -> RunSpans:
    """Return the spans this process kept of the run known by `checkpoint_id`."""
    found = tracing.run_spans(checkpoint_id)
    if found is None:
        return RunSpans(enabled=False)
    return RunSpans(enabled=True, spans=[SpanOut.model_validate(span) for span in found])
