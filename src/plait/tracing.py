"""OpenTelemetry tracing (`plait.tracing.instrument()`, extra `plait[otel]`): the public face
of `plait.capabilities.tracing`, where the spans are made."""

from plait.capabilities.tracing import instrument, run_spans, uninstrument

__all__ = ["instrument", "run_spans", "uninstrument"]
