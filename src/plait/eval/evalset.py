"""The eval-set file: `{"cases": [...]}`, read and checked with pydantic.

A case has an `id`, an `input` (text) or a `conversation` (message objects: the run's input
messages), and optionally `expected_tools`, `expected_response`, `trajectory`, `response`,
`session_values` and `cassette`. A file that looks like Google ADK's (it has `eval_cases`)
is converted first (`plait.eval.adk`). Anything wrong is an `EvalSetError` naming the case
and the field. A file is read only if it is a regular file of at most `MAX_EVALSET_BYTES`,
and a value nested deeper than pydantic validates is refused as nested too deeply.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictStr,
    ValidationError,
    model_validator,
)

from plait._util.json import load_plain
from plait._util.words import counted
from plait.errors import EvalSetError
from plait.messages import Message

__all__ = [
    "MAX_EVALSET_BYTES",
    "EvalCase",
    "EvalMessage",
    "EvalSet",
    "ExpectedTool",
    "ResponseMode",
    "TrajectoryMode",
    "load_evalset",
]

TrajectoryMode = Literal["exact", "in_order", "any_order"]
ResponseMode = Literal["exact", "contains", "judge"]

#: The largest eval-set file read (16 MiB); a larger one is refused unread.
MAX_EVALSET_BYTES = 16 * 2**20
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # POSIX only


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExpectedTool(_Model):
    """A tool call the agent should make: its `name`, and `args` (None: any arguments)."""

    name: Annotated[StrictStr, Field(min_length=1)]
    args: dict[str, JsonValue] | None = None


class EvalToolCall(_Model):
    """A tool call of an assistant message in a conversation; `arguments` is JSON text."""

    id: StrictStr
    name: StrictStr
    arguments: StrictStr = ""


class EvalMessage(_Model):
    """A message of a case's conversation: `role` and `content`, optionally `tool_calls`,
    `tool_call_id` and `name` (the message objects of plait's HTTP API)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: StrictStr = ""
    tool_calls: list[EvalToolCall] = []
    tool_call_id: StrictStr | None = None
    name: StrictStr | None = None

    def to_message(self) -> Message:
        """Return the plait `Message` this object describes (read through `Message`'s schema)."""
        message: Message = load_plain(Message, self.model_dump())
        return message


class EvalCase(_Model):
    """One case: what the agent is given and what it should do."""

    id: Annotated[StrictStr, Field(min_length=1)]
    input: StrictStr | None = None
    conversation: Annotated[list[EvalMessage], Field(min_length=1)] | None = None
    expected_tools: list[ExpectedTool] | None = None
    expected_response: JsonValue = None
    trajectory: TrajectoryMode = "exact"
    response: ResponseMode = "exact"
    session_values: dict[str, JsonValue] | None = None
    cassette: StrictStr | None = None

    @model_validator(mode="after")
    def _one_input(self) -> EvalCase:
        if (self.input is None) == (self.conversation is None):
            raise ValueError("give exactly one of 'input' (a text) or 'conversation' (messages)")
        return self

    def messages(self) -> list[Message]:
        """Return the run's input messages."""
        if self.conversation is not None:
            return [m.to_message() for m in self.conversation]
        return [Message.user(self.input or "")]

    def input_text(self) -> str:
        """Return the input as text: the `input`, or the conversation one `role: content`
        line per message."""
        if self.conversation is None:
            return self.input or ""
        return "\n".join(f"{m.role}: {m.content}" for m in self.conversation)


class EvalSet(_Model):
    """An eval set: its `cases` (ids unique), optionally a `name` and a `description`.

    `base` is the folder a case's relative `cassette` path starts from (the file's folder).
    """

    cases: Annotated[list[EvalCase], Field(min_length=1)]
    name: StrictStr | None = None
    description: StrictStr | None = None
    base: Annotated[Path | None, Field(exclude=True)] = None


def load_evalset(source: str | Path | Mapping[str, Any] | EvalSet) -> EvalSet:
    """Return the eval set `source` holds: a path to a JSON file, or the parsed JSON.

    Raises:
        EvalSetError: The file cannot be read or is not JSON, or a case is invalid (the
            error names the case and the field).
    """
    if isinstance(source, EvalSet):
        return source
    base: Path | None = None
    if isinstance(source, str | Path):
        path = Path(source)
        data = _read(path)
        base = path.resolve().parent
    elif isinstance(source, Mapping):
        data = dict(source)
    else:
        raise EvalSetError(f"an eval set is a path or a dict, got {type(source).__name__}")
    if isinstance(data, dict) and ("eval_cases" in data or "evalCases" in data):
        from plait.eval.adk import from_adk

        data = from_adk(data)
    return _validate(data, base)


def _read(path: Path) -> Any:
    """Return the parsed JSON of the file at `path`: a regular file of at most
    `MAX_EVALSET_BYTES`, read no further than that."""
    text = _text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvalSetError(
            f"the eval set {path} is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise EvalSetError(f"the eval set {path} is nested too deeply to read") from None


def _text(path: Path) -> str:
    """Return the text of the eval-set file at `path` (see `_read`)."""
    try:
        # without blocking: opening a FIFO for reading would wait for a writer
        with os.fdopen(os.open(path, os.O_RDONLY | _NONBLOCK), "rb") as file:
            found = os.fstat(file.fileno())
            if not stat.S_ISREG(found.st_mode):
                raise EvalSetError(f"the eval set {path} is not a regular file")
            if found.st_size > MAX_EVALSET_BYTES:
                raise _too_big(path)
            data = file.read(MAX_EVALSET_BYTES + 1)
    except OSError as exc:
        raise EvalSetError(f"cannot read the eval set {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_EVALSET_BYTES:  # it grew, or its size was not told
        raise _too_big(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise EvalSetError(f"the eval set {path} is not UTF-8 text") from None


def _too_big(path: Path) -> EvalSetError:
    return EvalSetError(
        f"the eval set {path} is over the limit of {MAX_EVALSET_BYTES // 2**20} MiB"
    )


def _validate(data: Any, base: Path | None) -> EvalSet:
    if not isinstance(data, dict):
        raise EvalSetError(f'an eval set is a JSON object {{"cases": [...]}}, got {_kind(data)}')
    try:
        evalset = EvalSet.model_validate({**data, "base": base})
    except ValidationError as exc:
        raise _error(exc, data) from None
    seen: set[str] = set()
    for case in evalset.cases:
        if case.id in seen:
            raise EvalSetError(
                f"case {case.id!r}: id: two cases have this id", case=case.id, field="id"
            )
        seen.add(case.id)
    return evalset


#: pydantic's complaints about a value nested deeper than it validates.
_TOO_DEEP = ("recursion_loop", "recursion_depth_exceeded")


def _error(exc: ValidationError, data: dict[str, Any]) -> EvalSetError:
    """Return the `EvalSetError` of pydantic's first complaint: its case and field."""
    first = exc.errors()[0]
    loc = list(first["loc"])
    case: str | None = None
    if len(loc) >= 2 and loc[0] == "cases" and isinstance(loc[1], int):
        raw = data.get("cases")
        item = raw[loc[1]] if isinstance(raw, list) and loc[1] < len(raw) else None
        given = item.get("id") if isinstance(item, dict) else None
        case = given if isinstance(given, str) and given else f"#{loc[1] + 1}"
        loc = loc[2:] or (["input"] if first["type"] == "value_error" else [])
    problem = first["msg"]
    if first["type"] in _TOO_DEEP:  # named by the field that holds the nesting
        loc, problem = loc[:1], "nested too deeply"
    field = ".".join(str(part) for part in loc) or None
    where = " ".join(
        part for part in (f"case {case!r}:" if case else "", f"{field}:" if field else "") if part
    )
    others = exc.error_count() - 1
    more = f" (and {counted(others, 'more problem')})" if others else ""
    message = f"invalid eval set: {where} {problem}{more}".replace("  ", " ")
    return EvalSetError(message, case=case, field=field)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
