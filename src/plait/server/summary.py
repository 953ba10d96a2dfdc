"""Turning a run into what the API sends: event JSON, run summaries, session documents."""

from __future__ import annotations

from plait._util.json import dump_plain
from plait.errors import PlaitError
from plait.events import HandoffLog, RunResult
from plait.messages import Message
from plait.run.sessions import SessionDocument
from plait.run.summary import event_json, run_summary
from plait.server.bodies import (
    ErrorInfo,
    HandoffOut,
    RunSummary,
    SessionDetail,
    SessionMessage,
)

__all__ = ["encode_event", "error_info", "session_detail", "summarize"]


#: Return the event as JSON text (`AgentEvent.to_json()`), a streaming message read whole
#: first; an event that cannot be encoded becomes one that reports why.
encode_event = event_json


def error_info(error: PlaitError) -> ErrorInfo:
    """Return the `{type, message}` of a plait error."""
    return ErrorInfo(type=type(error).__name__, message=error.message)


def summarize(result: RunResult, *, agent: str, session_id: str | None) -> RunSummary:
    """Return the summary of a finished (paused, cancelled, failed) run."""
    return RunSummary.model_validate(run_summary(result, agent=agent, session_id=session_id))


def session_detail(session_id: str, document: SessionDocument) -> SessionDetail:
    """Return a decoded session as the API shows it: each message with its `author`."""
    messages = [
        SessionMessage.model_validate({**dump_plain(message, Message), "author": author})
        for author, message in document.messages
    ]
    handoffs = [HandoffOut.model_validate(dump_plain(h, HandoffLog)) for h in document.handoffs]
    return SessionDetail(
        session_id=session_id, messages=messages, values=document.values, handoffs=handoffs
    )
