"""`save_turns`: remember each completed run's turn in the memories of its user."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plait._util.json import to_json
from plait.core.context import Frame
from plait.core.history import USER
from plait.errors import PlaitError, UsageError
from plait.memory.base import MemoryService
from plait.memory.limits import MAX_TEXT_LENGTH
from plait.memory.recall import user_id_of

if TYPE_CHECKING:
    from plait.core.agent_context import AgentContext
    from plait.events import RunResult
    from plait.messages import Message
    from plait.run.after_run import AfterRun

__all__ = ["caller_messages", "save_turns", "turn_text"]

_ANSWER = "assistant"


def caller_messages(ctx: AgentContext) -> list[Message]:
    """Return the messages the caller started the run of `ctx` (a root context) with.

    In a session these are the messages after the session's last message by an agent: the
    earlier turns are not part of this one.
    """
    if not isinstance(ctx, Frame):
        return []
    records = ctx.root_records
    start = len(records)
    while start > 0 and records[start - 1][0] == USER:
        start -= 1
    return [message for _, message in records[start:]]


def _answer_text(output: Any) -> str:
    """Return the final output as text (JSON for a structured one)."""
    if isinstance(output, str):
        return output
    try:
        return to_json(output)
    except PlaitError:
        return str(output)


def turn_text(messages: list[Message], final_output: Any) -> str | None:
    """Return the memory of one turn: each caller message with text as `<role>: <text>`,
    then `assistant: <final answer>`; None when there is no text at all. A turn longer than
    `MAX_TEXT_LENGTH` is cut there, ending with an ellipsis."""
    lines = [f"{m.role}: {m.content.strip()}" for m in messages if m.content.strip()]
    if final_output is not None:
        answer = _answer_text(final_output).strip()
        if answer:
            lines.append(f"{_ANSWER}: {answer}")
    if not lines:
        return None
    text = "\n".join(lines)
    if len(text) > MAX_TEXT_LENGTH:
        text = text[: MAX_TEXT_LENGTH - 1] + "\u2026"
    # a memory holds UTF-8 text without NUL characters
    return text.replace("\x00", "").encode("utf-8", "replace").decode()


def save_turns(service: MemoryService) -> AfterRun:
    """Return the `Runner(after_run=[...])` callable that adds each completed run's turn to
    the memories of the user `session_values["user_id"]`.

    The turn is the caller's messages and the final answer (see `turn_text`), with the
    metadata `{"agent": <root agent>, "session_id": <session or None>}`. A run without a
    `user_id` session value saves nothing; one whose `user_id` is not a valid id ends with a
    `UsageError`. Runs that fail, are cancelled or pause save nothing; a paused run saves its
    turn once, when a resume completes it.
    """
    if not isinstance(service, MemoryService):
        raise UsageError(f"save_turns needs a MemoryService (add, search, delete), got {service!r}")

    async def save_turn(ctx: AgentContext, result: RunResult) -> None:
        user_id = user_id_of(ctx)
        if user_id is None:
            return
        text = turn_text(caller_messages(ctx), result.final_output)
        if text is None:
            return
        metadata = {"agent": ctx.agent_name, "session_id": ctx.session_id}
        await service.add(user_id, text, metadata)  # type: ignore[arg-type]

    save_turn.__qualname__ = save_turn.__name__ = "save_turns"
    return save_turn
