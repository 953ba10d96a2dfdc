"""`@tool`: turn a Python function into a `Tool` with a JSON schema and validated arguments."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from plait._util.quote import QUOTE_CHARS, quote
from plait._util.threads import run_in_thread
from plait.core.agent_context import AgentContext
from plait.core.context import Frame
from plait.errors import InvalidToolArguments, UsageError
from plait.tools.base import (
    Approval,
    Effect,
    ToolInfo,
    ToolResult,
    check_approval,
    check_effect,
    check_timeout,
)

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

__all__ = ["FunctionTool", "describe_invalid_arguments", "tool"]


class FunctionTool:
    """A tool backed by a sync or async function.

    The schema comes from the type hints (pydantic models allowed) and the Google-style
    docstring (`Args:` lines describe parameters). A parameter annotated `Frame` is
    injected and hidden from the model. Sync functions run in a worker thread with the
    context variables copied.

    The arguments must match the schema the model was shown, as JSON: they are validated in
    pydantic's strict mode, so an `"integer"` takes a JSON integer (not `"2"`, `true` or
    `2.0`), a `"number"` a JSON number, a `"string"` a JSON string, a `"boolean"` only
    `true`/`false`; formats sent as strings (dates, UUIDs, paths) are parsed. Anything else is
    an `InvalidToolArguments`, which quotes at most 200 characters of a bad value.

    A result that is not a `str` is JSON-encoded; a float NaN or infinity in it, which JSON
    cannot hold, is encoded as the string `"NaN"`, `"Infinity"` or `"-Infinity"`.

    `timeout` (seconds) bounds each call, overriding the agent's `tool_timeout`; a call that
    runs longer is stopped and reported as a `ToolTimeout`. A thread cannot be killed: a sync
    function that is stopped (timed out, or its run cancelled) runs on in its daemon thread,
    unwaited for, until it returns; it can check `ctx.cancelled` to return early.

    `effect` says what a call does to the world: "read" (nothing), "idempotent" (the
    default: a call stopped or paused may run again) or "once" (journaled in the run's
    store, so it never runs twice). `approval` (True or a `plait.Approval`) makes each call
    wait for a person's approval, bound to its exact arguments. See docs/approvals.md.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        effect: Effect = "idempotent",
        approval: bool | Approval | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.timeout = check_timeout(timeout, f"tool '{self.name}'")
        self.effect: Effect = check_effect(effect, f"tool '{self.name}'")
        self.approval: Approval | None = check_approval(approval, f"tool '{self.name}'")
        self._is_async = inspect.iscoroutinefunction(fn)
        self._ctx_params: tuple[str, ...] = ()
        from pydantic import ValidationError

        self._validation_error = ValidationError
        self._args_model = self._build_args_model(fn, description)
        # the model's validator, called directly: `model_validate_json` without its wrapper
        self._validate_json = self._args_model.__pydantic_validator__.validate_json
        import pydantic_core

        self._to_json = pydantic_core.to_json

    def _build_args_model(self, fn: Callable[..., Any], description: str | None) -> type[BaseModel]:
        import docstring_parser
        from pydantic import ConfigDict, Field, create_model

        doc = docstring_parser.parse(inspect.getdoc(fn) or "")
        if description is None:
            parts = [doc.short_description or "", doc.long_description or ""]
            description = "\n\n".join(p for p in parts if p)
        self.description = description
        param_docs = {p.arg_name: p.description for p in doc.params}
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except NameError as exc:
            raise UsageError(f"tool '{self.name}': cannot resolve a type hint: {exc}") from exc
        fields: dict[str, Any] = {}
        ctx_params: list[str] = []
        for pname, param in inspect.signature(fn).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise UsageError(
                    f"tool '{self.name}': parameter '{pname}' must be a named parameter "
                    "(no *args, **kwargs or positional-only parameters)"
                )
            annotation = hints.get(pname, Any)
            if annotation is Frame or annotation is AgentContext:
                ctx_params.append(pname)
                continue
            default = ... if param.default is param.empty else param.default
            fields[pname] = (annotation, Field(default, description=param_docs.get(pname)))
        self._ctx_params = tuple(ctx_params)
        model: type[BaseModel] = create_model(
            f"{self.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        self._parameters = _clean_schema(model.model_json_schema())
        return model

    def info(self) -> ToolInfo:
        """Describe the tool to the model."""
        return ToolInfo(
            name=self.name,
            description=self.description,
            parameters=self._parameters,
            effect=self.effect,
        )

    async def call(self, arguments_json: str, ctx: AgentContext) -> str | ToolResult:
        """Validate the arguments, run the function (`ctx` given to the parameters that ask
        for it) and encode its result."""
        try:
            args = self._validate_json(arguments_json or "{}", strict=True)
        except self._validation_error as exc:
            raise InvalidToolArguments(
                describe_invalid_arguments(exc, self.name),
                tool_name=self.name,
                call_id=getattr(ctx, "tool_call_id", None),
                agent_name=ctx.agent_name,
            ) from None
        kwargs = args.__dict__
        if self._ctx_params:
            kwargs = dict(kwargs)
            for pname in self._ctx_params:
                kwargs[pname] = ctx
        if self._is_async:
            result = await self.fn(**kwargs)
        else:
            result = await run_in_thread(self.fn, **kwargs)
        if isinstance(result, _TEXT_OR_RESULT):
            return result
        if type(result) is int and -_SHORT < result < _SHORT:  # its JSON: its decimal text
            return str(result)
        return self._to_json(result, inf_nan_mode="strings").decode()  # JSON, NaN as "NaN"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r})"


_TEXT_OR_RESULT = (str, ToolResult)  # what a tool's function returns as it is
_SHORT = 10**18  # an int within this is written by `str` (a longer one by the JSON encoder)


_MAX_PROBLEMS = 10  # the most schema mismatches one error message lists


def describe_invalid_arguments(exc: ValidationError, name: str) -> str:
    """Say what is wrong with the arguments sent to tool `name`, quoting each bad value
    cut to 200 characters and listing at most 10 problems."""
    errors = exc.errors(include_url=False)
    for err in errors:
        if err["type"] == "json_invalid":
            return f"the arguments for tool '{name}' are not valid JSON: {err['msg']}"
        if err["type"] == "model_type":
            return f"the arguments for tool '{name}' must be a JSON object"
    problems = []
    for err in errors[:_MAX_PROBLEMS]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        if len(where) > QUOTE_CHARS:  # a key the model made up
            where = quote(where)
        problem = f"{where}: {err['msg']}"
        if err["type"] not in ("missing",):
            problem += f" (got {quote(err.get('input'))})"
        problems.append(problem)
    if len(errors) > _MAX_PROBLEMS:
        problems.append(f"and {len(errors) - _MAX_PROBLEMS:,} more problems")
    return f"invalid arguments for tool '{name}': " + "; ".join(problems)


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated `title`s, which only add noise for the model."""

    def walk(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            return {
                k: walk(v, k == "properties")
                for k, v in node.items()
                if in_properties or k != "title"
            }
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    cleaned: dict[str, Any] = walk(schema)
    cleaned.setdefault("properties", {})
    return cleaned


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    effect: Effect = "idempotent",
    approval: bool | Approval | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    effect: Effect = "idempotent",
    approval: bool | Approval | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a sync or async function into a tool (`@tool`, or `@tool(name=...,
    description=..., timeout=..., effect=..., approval=...)` with `timeout` in seconds per
    call; `effect` and `approval` as in `FunctionTool`)."""
    options: dict[str, Any] = {
        "name": name,
        "description": description,
        "timeout": timeout,
        "effect": effect,
        "approval": approval,
    }
    if fn is not None:
        return FunctionTool(fn, **options)

    def decorate(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(f, **options)

    return decorate
