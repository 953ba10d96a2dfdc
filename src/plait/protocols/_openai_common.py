"""What the OpenAI-compatible routes share: their error shape, the answer of a run, and the
relay that streams the text of a run's top-level model turns as the model writes it.

Which text is streamed (`AnswerRelay`): the text of each model turn of the run's top level
(depth 0: the served agent, the agents it transfers to, a swarm's members, a workflow's
children) as the model writes it; never a nested agent's (an agent run as a tool, a
coordinator's member), a tool call or a tool result. A turn that ends up calling tools is not
the final answer, but its text (a preamble such as "Let me look that up.") has gone out by the
time the call shows: OpenAI's own models do the same (text, then tool calls, in one
message). The streamed answer then ends with the final answer: when the run's final answer is
not the text of its last turn (a return-directly tool's result, a structured answer, a graph's
state, what a paused run waits for), it is sent last. A relay that is not `live` streams no
turn and sends only the final answer (a structured answer, sent once it is valid).
"""

from __future__ import annotations

import json
import re
from typing import Any

from plait.events import AgentEvent
from plait.server.bodies import RunSummary
from plait.server.limits import Problem
from plait.server.runs import Relay
from plait.server.sse import encode

__all__ = [
    "OPENAI_PATHS",
    "AnswerRelay",
    "answer_text",
    "data",
    "openai_error",
    "run_error",
]

#: The paths whose errors take OpenAI's shape (each path and everything below it).
OPENAI_PATHS = ("/v1/models", "/v1/chat/completions", "/v1/responses")

_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}
_CODES = {401: "invalid_api_key", 413: "request_too_large"}
_WORD = re.compile(r"(?<!^)(?=[A-Z])")


def openai_error(problem: Problem) -> tuple[int, dict[str, Any]]:
    """Return an error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.

    `type` is OpenAI's for the status (`invalid_request_error` for a bad request, which is a
    `400` as OpenAI answers it, `authentication_error`, `permission_error`,
    `not_found_error`, `rate_limit_error`, `server_error`); `code` is the problem's, or a
    plait error's class in snake case (`checkpoint_not_found`).
    """
    status = 400 if problem.status == 422 else problem.status
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    code = problem.code or _CODES.get(status)
    if code is None and problem.type != "http":
        code = _WORD.sub("_", problem.type).lower()
    error = {"message": problem.message, "type": kind, "param": problem.param, "code": code}
    return status, {"error": {**error, **(problem.extra or {})}}


def answer_text(summary: RunSummary) -> str:
    """Return the assistant content of a run that did not fail: its final output (a text as
    it is, any other value as JSON), or what it waits for and how to resume it."""
    if summary.status == "completed":
        output = summary.final_output
        if output is None:
            return ""
        return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    checkpoint = summary.checkpoint_id
    if summary.status == "cancelled":
        if checkpoint is None:
            return "The run was cancelled before it ended."
        return (
            "The run was cancelled. Continue it with POST /v1/runs/"
            f"{checkpoint}/resume and the body {{}}."
        )
    lines = ["The run is paused until these interrupts are answered:"]
    for pending in summary.interrupts:
        info = json.dumps(pending.info, ensure_ascii=False, default=repr)
        lines.append(f"- {pending.id}: {info}")
    lines.append(
        f"Resume it with POST /v1/runs/{checkpoint}/resume and the body "
        '{"value": <answer>} for one interrupt, or {"targets": {"<interrupt id>": <answer>}}.'
    )
    return "\n".join(lines)


def plait_role_and_text(role: str, content: Any) -> tuple[Any, str]:
    """Return an OpenAI message's role and text as plait's: a "developer" message is a system
    one, a list of text parts is their texts (a line each), no content is no text."""
    if isinstance(content, list):
        content = "\n".join(part.text for part in content)
    return ("system" if role == "developer" else role), content or ""


def only_kinds(value: Any, kinds: tuple[str, ...], noun: str, default: str | None = None) -> Any:
    """Return `value`; when it is a list, each item's `type` (`default` when it has none) must
    be one of `kinds`, else a `ValueError` names the first that is not (`noun`: "part")."""
    if isinstance(value, list):
        for item in value:
            kind = item.get("type", default) if isinstance(item, dict) else None
            if kind not in kinds:
                raise ValueError(f"only {kinds[0]} {noun}s are supported, got a {kind!r} {noun}")
    return value


def run_error(summary: RunSummary) -> dict[str, Any]:
    """Return the error of a failed run in OpenAI's shape (`code`: "run_failed"; the message
    starts with the plait error's class)."""
    error = summary.error
    kind = error.type if error is not None else "PlaitError"
    message = error.message if error is not None else "the run failed"
    return {
        "error": {
            "message": f"{kind}: {message}",
            "type": "server_error",
            "param": None,
            "code": "run_failed",
        }
    }


def data(body: Any, event: bytes = b"") -> bytes:
    """Return one server-sent event whose data is `body` as JSON (with the `event:` name
    `event`, if any), written by the server's one SSE writer."""
    name = b"event: %b\r\n" % event if event else b""
    return encode(name, json.dumps(body, ensure_ascii=False))


class AnswerRelay(Relay):
    """Send the text of a run's top-level model turns as the model writes it (see the
    module's docstring); a subclass says how a turn opens, how text goes out and how a
    turn ends."""

    def __init__(self, *, live: bool) -> None:
        self.live = live
        self.last: str | None = None  # the text of the last turn that wrote any

    async def relay(self, event: AgentEvent) -> None:
        """Send the text of a top-level model turn as it comes."""
        variant = event.message
        if not self.live or event.depth != 0 or variant is None or variant.role != "assistant":
            return
        parts: list[str] = []
        whole = variant.message
        if variant.stream is not None:
            try:
                async for chunk in variant.stream:
                    if chunk.content:
                        if not parts:
                            self.open_turn()
                        parts.append(chunk.content)
                        self.text(chunk.content)
                whole = await variant.stream.collect()
            except Exception:  # the run reports the model's error itself
                whole = None
        elif whole is not None and whole.content:
            self.open_turn()
            parts.append(whole.content)
            self.text(whole.content)
        if parts:
            self.last = "".join(parts)
            self.close_turn(self.last, calls=whole is None or bool(whole.tool_calls))

    def open_turn(self) -> None:
        """A top-level turn starts writing text."""

    def text(self, delta: str) -> None:
        """Send a piece of a turn's text."""

    def close_turn(self, text: str, *, calls: bool) -> None:
        """A turn that wrote `text` has ended (`calls`: it called tools, or failed)."""

    def still_to_send(self, summary: RunSummary) -> str | None:
        """Return the final answer when it has not gone out as the last turn's text."""
        final = answer_text(summary)
        if final == self.last or (self.last is None and not final):
            return None
        return final
