"""Turning a run into what the API sends: event JSON, run summaries, session documents."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from plait._summary import event_json, run_summary
from plait.errors import CheckpointCorrupt, PlaitError
from plait.events import AgentEvent, RunResult
from plait.server.bodies import (
    ErrorInfo,
    HandoffOut,
    RunSummary,
    SessionDetail,
    SessionMessage,
)

__all__ = ["decode_session", "encode_event", "error_info", "summarize"]


async def encode_event(event: AgentEvent) -> str:
    """Return the event as JSON text (`AgentEvent.to_json()`), a streaming message read
    whole first; an event that cannot be encoded becomes one that reports why."""
    return await event_json(event)


def error_info(error: PlaitError) -> ErrorInfo:
    """Return the `{type, message}` of a plait error."""
    return ErrorInfo(type=type(error).__name__, message=error.message)


def summarize(result: RunResult, *, agent: str, session_id: str | None) -> RunSummary:
    """Return the summary of a finished (paused, cancelled, failed) run."""
    return RunSummary.model_validate(run_summary(result, agent=agent, session_id=session_id))


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
