"""What a client is shown of a run: each event's JSON, then the run summary.

The run summary (docs/server.md): `status`, `checkpoint_id`, `final_output`, `interrupts`,
`error`, `usage`, `handoffs`, `agent`, `session_id` and `metadata`, as plain JSON data. The
HTTP server validates it into its response model and `plait run --json` prints it, so both
show the same thing, and the command line needs neither FastAPI nor the `server` extra.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from plait.errors import RunCancelled, SerializationError
from plait.events import AgentEvent, HandoffLog, RunResult

__all__ = ["Status", "event_json", "run_status", "run_summary"]

Status = Literal["completed", "paused", "failed", "cancelled"]


async def event_json(event: AgentEvent) -> str:
    """Return the event as one line of JSON (`AgentEvent.to_json()`), a streamed message read
    whole first (a stream that broke is left out: the run's error event says why); an event
    that cannot be encoded becomes one that reports why."""
    variant = event.message
    if variant is not None and variant.stream is not None:
        try:
            await variant.get_message()
        except Exception:
            event = dataclasses.replace(event, output=None)
    try:
        return event.to_json()
    except SerializationError as exc:
        return json.dumps(
            {
                "agent_name": event.agent_name,
                "run_path": list(event.run_path),
                "depth": event.depth,
                "error": {"type": "SerializationError", "message": exc.message, "details": {}},
            }
        )


def run_status(result: RunResult) -> Status:
    """Return how a finished run ended."""
    if isinstance(result.error, RunCancelled):
        return "cancelled"
    if result.error is not None:
        return "failed"
    if result.checkpoint_id is not None or result.interrupts:
        return "paused"
    return "completed"


def run_summary(result: RunResult, *, agent: str, session_id: str | None) -> dict[str, Any]:
    """Return the summary of a finished (paused, cancelled, failed) run as JSON data, in the
    shape of the HTTP API's run summary."""
    error = result.error
    return {
        "status": run_status(result),
        "checkpoint_id": result.checkpoint_id,
        "final_output": to_jsonable_python(result.final_output, fallback=repr),
        "interrupts": [
            {"id": i.id, "info": to_jsonable_python(i.info, fallback=repr), "address": i.address}
            for i in result.interrupts
        ],
        "error": None
        if error is None
        else {"type": type(error).__name__, "message": error.message},
        "usage": {
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
        },
        "handoffs": [_handoff(h) for h in result.handoffs],
        "agent": agent,
        "session_id": session_id,
        "metadata": to_jsonable_python(result.metadata, fallback=repr),
    }


def _handoff(handoff: HandoffLog) -> dict[str, Any]:
    return {
        "timestamp": to_jsonable_python(handoff.timestamp),
        "from_agent": handoff.from_agent,
        "to_agent": handoff.to_agent,
        "message": handoff.message,
        "reason": handoff.reason,
        "step_count": handoff.step_count,
        "tokens_used": handoff.tokens_used,
    }
