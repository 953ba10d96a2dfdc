"""Turning a run into what the API sends: event JSON, run summaries, session documents."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from plait.errors import CheckpointCorrupt, PlaitError, RunCancelled, SerializationError
from plait.events import AgentEvent, RunResult
from plait.server.bodies import (
    ErrorInfo,
    HandoffOut,
    InterruptOut,
    RunStatus,
    RunSummary,
    SessionDetail,
    SessionMessage,
    UsageOut,
)

__all__ = ["decode_session", "encode_event", "error_info", "summarize"]


async def encode_event(event: AgentEvent) -> str:
    """Return the event as JSON text (`AgentEvent.to_json()`), a streaming message read
    whole first; an event that cannot be encoded becomes one that reports why."""
    variant = event.message
    if variant is not None and variant.stream is not None:
        with contextlib.suppress(Exception):  # the stream's own error is reported by the run
            await variant.get_message()
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


def error_info(error: PlaitError) -> ErrorInfo:
    """Return the `{type, message}` of a plait error."""
    return ErrorInfo(type=type(error).__name__, message=error.message)


def status_of(result: RunResult) -> RunStatus:
    """Return how a finished run ended."""
    if isinstance(result.error, RunCancelled):
        return "cancelled"
    if result.error is not None:
        return "failed"
    if result.checkpoint_id is not None or result.interrupts:
        return "paused"
    return "completed"


def summarize(result: RunResult, *, agent: str, session_id: str | None) -> RunSummary:
    """Return the summary of a finished (paused, cancelled, failed) run."""
    return RunSummary(
        status=status_of(result),
        checkpoint_id=result.checkpoint_id,
        final_output=to_jsonable_python(result.final_output, fallback=repr),
        interrupts=[
            InterruptOut(id=i.id, info=to_jsonable_python(i.info, fallback=repr), address=i.address)
            for i in result.interrupts
        ],
        error=None if result.error is None else error_info(result.error),
        usage=UsageOut(
            input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens
        ),
        handoffs=[HandoffOut.model_validate(h, from_attributes=True) for h in result.handoffs],
        agent=agent,
        session_id=session_id,
    )


def decode_session(session_id: str, data: bytes) -> SessionDetail:
    """Return a stored session (plait's session JSON) as the API shows it.

    Raises:
        CheckpointCorrupt: The bytes are not a plait session.
    """
    try:
        document: Any = json.loads(data)
        if not isinstance(document, dict) or document.get("format") != "plait.session":
            raise ValueError("not a plait.session document")
        messages = [
            SessionMessage.model_validate({**message, "author": author})
            for author, message in document.get("messages", [])
        ]
        handoffs = [HandoffOut.model_validate(h) for h in document.get("handoffs", [])]
        return SessionDetail(
            session_id=session_id,
            messages=messages,
            values=dict(document.get("values") or {}),
            handoffs=handoffs,
        )
    except (ValueError, TypeError, ValidationError) as exc:
        raise CheckpointCorrupt(
            f"session '{session_id}' is not a plait session: {type(exc).__name__}: {exc}"
        ) from None
