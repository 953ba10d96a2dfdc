"""The answer's format an OpenAI request asks for, as a structured output of the served agent.

A chat completion's `response_format` and a response's `text.format` are honoured or refused,
never ignored:

- `{"type": "text"}` (or none): the agent answers as it does;
- `{"type": "json_schema", ...}`: the run's root agent answers with a JSON object valid for
  the schema: it runs with `RunOption(agent=<its name>, output_type=<the schema>)`, plait's
  structured output (the model is given the schema, or a `final_result` tool when it takes
  none; an invalid answer is told to the model and retried; the answer is validated with the
  `jsonschema` package against the schema as sent);
- `{"type": "json_object"}`: the same with the schema `{"type": "object"}`.

What cannot be honoured is a `400` naming the field: another format type, a schema whose
root is not an object, a schema that is not valid JSON Schema, a recursive one (a `$ref` to
an enclosing definition) or one with a `$ref` outside itself; and a served agent that is not
a `ChatModelAgent`, or one that can transfer to other agents (its answer could then come from
an agent that was not asked for the format).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from plait.agents.chat_model import ChatModelAgent
from plait.agents.options import RunOption
from plait.core.agent import Agent
from plait.errors import UsageError
from plait.server.limits import ApiError

__all__ = ["Wanted", "chat_format", "format_options", "responses_format"]

_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_MAX_PROBLEMS = 5


@dataclasses.dataclass(frozen=True, slots=True)
class Wanted:
    """A JSON answer asked for: the schema's name and the schema; the request field that
    asked (`response_format`, `text.format`) and the schema's place in the request."""

    name: str
    schema: dict[str, Any]
    field: str
    param: str


def _refuse(param: str, message: str) -> ApiError:
    return ApiError(400, f"{param}: {message}", param=param, code="unsupported_response_format")


def chat_format(given: Any) -> Wanted | None:
    """Return the JSON answer a chat completion's `response_format` asks for (None: text)."""
    param = "response_format"
    if given is None:
        return None
    kind = _kind(given, param)
    if kind != "json_schema":
        return _simple(kind, param)
    spec = given.get("json_schema")
    if not isinstance(spec, Mapping):
        raise _refuse(param, "a json_schema format needs its json_schema object")
    return _wanted(spec, param, f"{param}.json_schema")


def responses_format(given: Any) -> Wanted | None:
    """Return the JSON answer a response's `text.format` asks for (None: text)."""
    param = "text.format"
    if given is None:
        return None
    kind = _kind(given, param)
    return _wanted(given, param, param) if kind == "json_schema" else _simple(kind, param)


def _kind(given: Any, param: str) -> str:
    if not isinstance(given, Mapping) or not isinstance(given.get("type"), str):
        raise _refuse(param, 'give an object with a "type": "text", "json_schema" or "json_object"')
    kind: str = given["type"]
    if kind not in ("text", "json_schema", "json_object"):
        raise _refuse(
            param,
            f"plait answers as text, json_schema or json_object, not {kind[:64]!r}",
        )
    return kind


def _simple(kind: str, param: str) -> Wanted | None:
    return None if kind == "text" else Wanted("json_object", {"type": "object"}, param, param)


def _wanted(spec: Mapping[str, Any], field: str, param: str) -> Wanted:
    name, schema = spec.get("name"), spec.get("schema")
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise _refuse(f"{param}.name", "a name of 1 to 64 letters, digits, '_' or '-'")
    if not isinstance(schema, Mapping):
        raise _refuse(f"{param}.schema", "the JSON schema the answer must match (an object)")
    schema = copy.deepcopy(dict(schema))
    description = spec.get("description")
    if isinstance(description, str) and description and "description" not in schema:
        schema["description"] = description
    return Wanted(name, schema, field, f"{param}.schema")


def format_options(agent: Agent, wanted: Wanted | None) -> list[RunOption]:
    """Return the run options that make `agent` answer as `wanted` ([] for text).

    Raises:
        ApiError: `400`: the agent or the schema cannot give such an answer.
    """
    if wanted is None:
        return []
    if not isinstance(agent, ChatModelAgent):
        raise _refuse(
            wanted.field,
            f"agent '{agent.name}' is not a ChatModelAgent: plait gives a structured answer "
            "only from a ChatModelAgent",
        )
    if agent.sub_agents or agent.parent is not None:
        raise _refuse(
            wanted.field,
            f"agent '{agent.name}' can transfer to other agents, whose answer would not be "
            "checked against the schema",
        )
    output_type = schema_type(wanted)
    try:
        return [RunOption(agent=agent.name, output_type=output_type)]
    except UsageError as exc:
        raise _refuse(wanted.param, exc.message) from None


def schema_type(wanted: Wanted) -> type:
    """Return a type whose JSON schema is `wanted.schema` (its `$ref`s written out) and whose
    values are the JSON objects the schema accepts."""
    from jsonschema import SchemaError  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]

    schema = wanted.schema
    try:
        checker_class = validator_for(schema)
        checker_class.check_schema(schema)
    except SchemaError as exc:
        raise _refuse(wanted.param, f"not a valid JSON schema: {exc.message}") from None
    inlined = _inline(schema, schema, (), wanted.param)
    for key in ("$defs", "definitions"):
        inlined.pop(key, None)
    if inlined.get("type") != "object":
        raise _refuse(wanted.param, 'the answer must be a JSON object: its root "type": "object"')
    return _json_type(wanted.name, inlined, checker_class(schema))


def _inline(node: Any, root: dict[str, Any], seen: tuple[str, ...], param: str) -> Any:
    """Return `node` with every `$ref` replaced by what it points to in `root`."""
    if isinstance(node, list):
        return [_inline(item, root, seen, param) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return {key: _inline(value, root, seen, param) for key, value in node.items()}
    if ref in seen:
        raise _refuse(param, f"a recursive schema ({ref!r} refers to itself) cannot be served")
    target = _inline(_pointer(root, ref, param), root, (*seen, ref), param)
    rest = {key: _inline(value, root, seen, param) for key, value in node.items() if key != "$ref"}
    return {**target, **rest} if isinstance(target, dict) else target


def _pointer(root: dict[str, Any], ref: str, param: str) -> Any:
    """Return what the local reference `ref` ("#/$defs/Step", "#") points to in `root`."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise _refuse(param, f"only references inside the schema are served, not {ref[:100]!r}")
    found: Any = root
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(found, dict) and part in found:
            found = found[part]
        elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
            found = found[int(part)]
        else:
            raise _refuse(param, f"the reference {ref[:100]!r} points to nothing")
    return found


def _json_type(name: str, schema: dict[str, Any], checker: Any) -> type:
    """Return a type named `name` whose JSON schema is `schema` and whose values are the
    JSON objects `checker` accepts."""
    from pydantic_core import PydanticCustomError, core_schema

    def check(value: dict[str, Any]) -> dict[str, Any]:
        found = sorted(checker.iter_errors(value), key=lambda e: list(e.absolute_path))
        if not found:
            return value
        problems = [f"{error.json_path}: {error.message}" for error in found[:_MAX_PROBLEMS]]
        if len(found) > _MAX_PROBLEMS:
            problems.append(f"and {len(found) - _MAX_PROBLEMS} more problems")
        raise PydanticCustomError("json_schema", "{problems}", {"problems": "; ".join(problems)})

    def core(cls: type, source: Any, handler: Any) -> Any:
        objects = core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
        return core_schema.no_info_after_validator_function(check, objects)

    def json_schema(cls: type, core: Any, handler: Any) -> dict[str, Any]:
        return copy.deepcopy(schema)

    namespace = {
        "__doc__": f"A JSON object valid for the schema {name!r}.",
        "__get_pydantic_core_schema__": classmethod(core),
        "__get_pydantic_json_schema__": classmethod(json_schema),
    }
    return type(name, (), namespace)
