"""The file of a cassette (`plait.cassette`): its steps as typed lines, reading them, and
comparing a new request with a recorded one."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from plait._util.json import dump_plain, load_plain
from plait.core.hooks import end_run
from plait.errors import CassetteCorrupt, CassetteDivergence, PlaitError, UsageError
from plait.events import AgentAction
from plait.messages import Message
from plait.tools.base import ToolInfo, ToolResult

__all__ = [
    "STEP",
    "ModelStep",
    "Raised",
    "Request",
    "Step",
    "ToolStep",
    "canonical",
    "compare",
    "expected_tool",
    "first_run",
    "make_request",
    "message_object",
    "parsed",
    "plain_messages",
    "plain_tools",
    "portable",
    "portable_action",
    "read_steps",
    "run_input",
    "show",
]

_SHOWN = 300  # characters of a value shown in a divergence message


class _Line(BaseModel):
    """One JSON value of a cassette line, checked strictly."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class Request(_Line):
    """What a recorded model call sent: messages, tools offered and options."""

    messages: list[Message]
    tools: list[ToolInfo] = []
    options: dict[str, Any] = {}


class Raised(_Line):
    """An exception a tool raised that is not a plait error: its class name and message."""

    type: str
    message: str


class ModelStep(_Line):
    """A recorded model call: its request and its reply (or the error it failed with)."""

    step: int
    kind: Literal["model"]
    agent: str
    address: str
    request: Request
    reply: Message | None = None
    error: PlaitError | None = None
    input: list[Message] | None = None

    def answer(self) -> Message:
        """Return the recorded reply, or raise the recorded error."""
        if self.error is not None:
            raise _copy(self.error)
        assert self.reply is not None
        return self.reply


class ToolStep(_Line):
    """A recorded tool call: its name and arguments, and its result and action (or the
    error it raised)."""

    step: int
    kind: Literal["tool"]
    agent: str
    address: str
    call_id: str | None = None
    name: str
    arguments: str
    result: str | None = None
    action: AgentAction | None = None
    error: PlaitError | None = None
    raised: Raised | None = None
    input: list[Message] | None = None

    def answer(self) -> str | ToolResult:
        """Return the recorded result, or raise the recorded error."""
        if self.error is not None:
            raise _copy(self.error)
        if self.raised is not None:
            raise _exception_class(self.raised.type)(self.raised.message)
        content = self.result or ""
        return content if self.action is None else ToolResult(content=content, action=self.action)


Step = ModelStep | ToolStep
STEP: TypeAdapter[Step] = TypeAdapter(Annotated[Step, Field(discriminator="kind")])


# --- reading --------------------------------------------------------------------------------


def read_steps(path: Path) -> list[Step]:
    """Return the steps of the cassette at `path`, each line checked."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read the cassette '{path}': {exc}") from exc
    steps: list[Step] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            step = STEP.validate_json(line)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(p) for p in problem["loc"]) or "the line"
            raise CassetteCorrupt(
                f"cassette '{path}' line {number} is not a recorded step: {where}: "
                f"{problem['msg']}",
                path=str(path),
                line=number,
            ) from None
        if step.step != len(steps) + 1:
            raise CassetteCorrupt(
                f"cassette '{path}' line {number} is step {step.step}, expected step "
                f"{len(steps) + 1} (steps are numbered from 1 in order)",
                path=str(path),
                line=number,
            )
        steps.append(step)
    return steps


def first_run(steps: list[Step]) -> list[Step]:
    """The steps of the first run of a cassette (the next run's first step holds its input)."""
    for at, step in enumerate(steps):
        if at and step.input is not None:
            return steps[:at]
    return steps


def run_input(steps: list[Step]) -> list[Message]:
    """The input of a run: as recorded with its first step, else its first model request
    without the system messages."""
    if steps[0].input is not None:
        return list(steps[0].input)
    first = next((s for s in steps if isinstance(s, ModelStep)), None)
    if first is None:
        return []
    return [m for m in first.request.messages if m.role != "system"]


def message_object(message: Message) -> dict[str, Any]:
    """A message as an eval set's conversation (and plait's HTTP API) writes it."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    return out


def expected_tool(name: str, arguments: str) -> dict[str, Any]:
    args = parsed(arguments)
    return {"name": name, "args": args} if isinstance(args, dict) else {"name": name}


# --- comparing ------------------------------------------------------------------------------


def make_request(
    messages: Sequence[Message], tools: Sequence[ToolInfo], options: Mapping[str, Any]
) -> Request:
    plain = json.loads(json.dumps(dict(options), default=repr)) if options else {}
    return Request(messages=list(messages), tools=list(tools), options=plain)


def plain_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as compared: what a model is sent (not the usage of earlier replies)."""
    return [
        {
            "role": m.role,
            "content": m.content,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
            ],
            "tool_call_id": m.tool_call_id,
            "name": m.name,
        }
        for m in messages
    ]


def plain_tools(tools: Sequence[ToolInfo]) -> list[dict[str, Any]]:
    """Tools as compared: what a model is told of them."""
    return [
        {"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools
    ]


def parsed(arguments: str) -> Any:
    """Tool arguments as data (the text itself when it is not JSON)."""
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return arguments


def canonical(arguments: str) -> str:
    return json.dumps(parsed(arguments), sort_keys=True, ensure_ascii=False)


_ABSENT: Any = object()


def compare(step: int, what: str, path: str, recorded: Any, new: Any) -> None:
    """Raise `CassetteDivergence` at the first difference between `recorded` and `new`."""
    found = _difference(path, recorded, new)
    if found is None:
        return
    where, old, now = found
    old = None if old is _ABSENT else old
    now = None if now is _ABSENT else now
    raise end_run(
        CassetteDivergence(
            f"cassette step {step} ({what}): {where} differs — recorded: {show(old)}, "
            f"new: {show(now)}",
            step=step,
            recorded=old,
            new=now,
        )
    )


def _difference(path: str, recorded: Any, new: Any) -> tuple[str, Any, Any] | None:
    """Return where `recorded` and `new` first differ, and the two values there."""
    if isinstance(recorded, dict) and isinstance(new, dict):
        for key in [*recorded, *(k for k in new if k not in recorded)]:
            step = f"{path}.{key}" if str(key).isidentifier() else f"{path}[{key!r}]"
            found = _difference(step, recorded.get(key, _ABSENT), new.get(key, _ABSENT))
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(new, list):
        for at in range(max(len(recorded), len(new))):
            old = recorded[at] if at < len(recorded) else _ABSENT
            now = new[at] if at < len(new) else _ABSENT
            found = _difference(f"{path}[{at}]", old, now)
            if found is not None:
                return found
        return None
    if recorded == new and type(recorded) is type(new):
        return None
    return path, recorded, new


def show(value: Any) -> str:
    if value is None or value is _ABSENT:
        return "(nothing)"
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


# --- values ---------------------------------------------------------------------------------


def portable(error: PlaitError) -> PlaitError:
    """The error as a cassette keeps it (its details dropped when they are not JSON)."""
    try:
        return load_plain(PlaitError, dump_plain(error, PlaitError))  # type: ignore[no-any-return]
    except Exception:
        data = {"type": type(error).__name__, "message": error.message, "details": {}}
        return load_plain(PlaitError, data)  # type: ignore[no-any-return]


def _copy(error: PlaitError) -> PlaitError:
    """A fresh copy of a recorded error, to raise."""
    return load_plain(PlaitError, dump_plain(error, PlaitError))  # type: ignore[no-any-return]


def portable_action(result: ToolResult) -> AgentAction | None:
    """A tool result's action as a cassette keeps it (None when it is not JSON)."""
    if result.action is None:
        return None
    try:
        return load_plain(AgentAction, dump_plain(result.action, AgentAction))  # type: ignore[no-any-return]
    except Exception:
        return None


_EXCEPTIONS: dict[str, type[Exception]] = {}


def _exception_class(name: str) -> type[Exception]:
    """An exception class named like the one a recorded tool raised."""
    cls = _EXCEPTIONS.get(name)
    if cls is None:
        cls = _EXCEPTIONS[name] = type(name, (Exception,), {"__module__": __name__})
    return cls
