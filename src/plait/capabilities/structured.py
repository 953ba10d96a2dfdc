"""Structured output of a `ChatModelAgent`: `output_type=T` makes the answer a validated `T`.

`T` is a pydantic model, a dataclass or a `TypedDict` (anything a `pydantic.TypeAdapter`
takes whose JSON schema is an object). How the model is asked for it depends on the model:

- a model that declares `supports_output_schema` gets the schema as the `output_schema`
  option of each call (OpenAI's `json_schema` response format, `LocalModel`'s grammar):
  its answer is the reply's text, JSON;
- any other model is offered one more tool, `final_result`, whose parameters are the
  schema: its call to it is the answer (and ends the run, like a return-directly tool).

The answer is validated (pydantic's lax JSON mode). An invalid one is told to the model
with the errors, as a user message (or as `final_result`'s tool result), up to
`output_retries` times; then the run ends with `OutputValidationError`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any

from plait._util.quote import QUOTE_CHARS, quote
from plait.core.agent_context import AgentContext
from plait.errors import OutputValidationError, UsageError
from plait.events import AgentEvent, AgentOutput
from plait.messages import Message
from plait.models.base import OutputSchema
from plait.tools.base import ToolInfo, ToolResult

__all__ = ["FINAL_RESULT", "FinalResultTool", "OutputCheck", "StructuredOutput"]

#: The name of the tool a model without schema support answers with.
FINAL_RESULT = "final_result"

_MAX_PROBLEMS = 10
_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n\s*```$", re.S)


@dataclasses.dataclass(frozen=True, slots=True)
class Checked:
    """One answer checked against the output type: its value, or what is wrong with it."""

    value: Any = None
    errors: list[dict[str, Any]] | None = None
    problem: str = ""  # the errors as the model is told them

    @property
    def ok(self) -> bool:
        return self.errors is None


class StructuredOutput:
    """An agent's `output_type`: its schema, and how an answer is validated and encoded."""

    def __init__(self, output_type: Any, retries: int, owner: str) -> None:
        from pydantic import PydanticSchemaGenerationError, PydanticUserError, TypeAdapter

        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise UsageError(f"{owner}: output_retries must be an int >= 0, got {retries!r}")
        try:
            self.adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            schema = self.adapter.json_schema()
        except (PydanticSchemaGenerationError, PydanticUserError, TypeError) as exc:
            raise UsageError(
                f"{owner}: output_type must be a pydantic model, a dataclass or a TypedDict; "
                f"{output_type!r} is not usable: {exc}"
            ) from exc
        schema = _hoisted(schema)
        if schema.get("type") != "object":
            raise UsageError(
                f"{owner}: output_type must be a pydantic model, a dataclass or a TypedDict "
                f"(its JSON schema an object), got {output_type!r}"
            )
        self.output_type = output_type
        self.retries = retries
        name = _NAME.sub("_", str(getattr(output_type, "__name__", "") or "output"))[:64]
        description = str(schema.pop("description", "") or "")
        self.schema = OutputSchema(
            name=name or "output",
            schema=schema,
            strict=_strict(schema),
            description=description,
        )
        tool_description = "Give the final answer: call this once you have it; its arguments"
        tool_description += " are the answer."
        if description:
            tool_description += f" The answer: {description}"
        self.tool_info = ToolInfo(
            name=FINAL_RESULT, description=tool_description, parameters=schema
        )

    @classmethod
    def of(cls, output_type: Any, retries: int, owner: str) -> StructuredOutput | None:
        """Return the structured output of `output_type` (None: the answer is text)."""
        return None if output_type is None else cls(output_type, retries, owner)

    def check(self, text: str) -> Checked:
        """Validate `text` (JSON, optionally in a ``` fence) as the output type."""
        from pydantic import ValidationError

        fenced = _FENCE.match(text.strip())
        try:
            value = self.adapter.validate_json(fenced.group(1) if fenced else text)
        except ValidationError as exc:
            errors = json.loads(exc.json(include_url=False, include_context=False))
            return Checked(errors=errors, problem=_describe(errors))
        return Checked(value=value)

    def dump_json(self, value: Any) -> str:
        """Return `value` (a valid answer) as JSON text."""
        return self.adapter.dump_json(value).decode()


class FinalResultTool:
    """The `final_result` tool: its arguments are the answer. A valid answer's result is the
    answer as JSON; an invalid one's tells the model what is wrong (the agent's loop then
    ends the run with the answer, or counts the failure)."""

    def __init__(self, output: StructuredOutput) -> None:
        self._output = output

    def info(self) -> ToolInfo:
        """Describe the tool: its parameters are the output type's schema."""
        return self._output.tool_info

    async def call(self, arguments_json: str, ctx: AgentContext) -> str | ToolResult:
        """Check the answer; return it as JSON, or the validation errors."""
        checked = self._output.check(arguments_json or "{}")
        if not checked.ok:
            return f"Error: {checked.problem}. Call {FINAL_RESULT} again with a corrected answer."
        return self._output.dump_json(checked.value)


class OutputCheck:
    """Where one run of a structured-output agent stands: how many invalid answers it gave.

    The count lives as long as the run's loop: a run resumed from a pause counts from zero.
    """

    __slots__ = ("failures", "name", "output", "use_tool")

    def __init__(self, output: StructuredOutput, name: str, use_tool: bool) -> None:
        self.output = output
        self.name = name
        self.use_tool = use_tool  # answer by `final_result` (the model has no schema support)
        self.failures = 0

    def answer(
        self, ctx: AgentContext, reply: Message, messages: list[Message]
    ) -> tuple[list[AgentEvent], Any | None, OutputValidationError | None]:
        """Check a text answer. Return the events that report a valid one and its value; or,
        for an invalid one, add the message that tells the model (retry) or return the error
        that ends the run."""
        checked = self.output.check(reply.content)
        if checked.ok:
            return [self.event(ctx, checked.value)], checked.value, None
        error = self._failed(checked, reply.content)
        if error is None:
            hint = (
                f"Answer by calling the {FINAL_RESULT} tool, its arguments the answer."
                if self.use_tool
                else "Answer again with only the JSON that matches the schema."
            )
            messages.append(Message.user(f"Your answer is not valid: {checked.problem}. {hint}"))
        return [], None, error

    def tool_answer(
        self, ctx: AgentContext, calls: Sequence[tuple[int, str]]
    ) -> tuple[list[AgentEvent], Any | None, int | None, OutputValidationError | None]:
        """Check the round's `final_result` calls (index, arguments): the last valid one
        is the answer (its event, value and call index); with none valid, the round counts
        as one failure (the error when retries are exhausted)."""
        last: Checked | None = None
        raw = ""
        for index, arguments in reversed(calls):
            checked = self.output.check(arguments or "{}")
            if checked.ok:
                return [self.event(ctx, checked.value)], checked.value, index, None
            if last is None:
                last, raw = checked, arguments
        assert last is not None
        return [], None, None, self._failed(last, raw)

    def _failed(self, checked: Checked, raw: str) -> OutputValidationError | None:
        self.failures += 1
        if self.failures <= self.output.retries:
            return None
        return OutputValidationError(
            f"agent '{self.name}': the answer is not a valid {self.output.schema.name} after "
            f"{self.output.retries} retries: {checked.problem}",
            agent_name=self.name,
            errors=checked.errors or [],
            output=raw,
        )

    @staticmethod
    def event(ctx: AgentContext, value: Any) -> AgentEvent:
        """The event that carries the validated answer (`output.custom`)."""
        return ctx.event(output=AgentOutput(custom=value))


def _hoisted(schema: dict[str, Any]) -> dict[str, Any]:
    """Return `schema` with a root `$ref` (a recursive model's) replaced by its definition,
    the definitions kept, so the root is the object itself."""
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and isinstance(defs, dict):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(target, dict):
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return {**target, **rest}
    return schema


def _describe(errors: list[dict[str, Any]]) -> str:
    """Say what is wrong with an answer: each error's place and message (at most 10)."""
    for err in errors:
        if err.get("type") == "json_invalid":
            return f"it is not valid JSON ({err.get('msg')})"
    problems = []
    for err in errors[:_MAX_PROBLEMS]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "the answer"
        if len(where) > QUOTE_CHARS:
            where = quote(where)
        problem = f"{where}: {err.get('msg')}"
        if err.get("type") != "missing" and "input" in err:
            problem += f" (got {quote(err['input'])})"
        problems.append(problem)
    if len(errors) > _MAX_PROBLEMS:
        problems.append(f"and {len(errors) - _MAX_PROBLEMS:,} more problems")
    return "; ".join(problems)


def _strict(schema: Any) -> bool:
    """Whether `schema` meets OpenAI's strict mode: every object lists all its properties as
    required and allows no others (checked recursively)."""
    if isinstance(schema, list):
        return all(_strict(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required", ())) != set(properties):
            return False
    return all(_strict(value) for value in schema.values())
