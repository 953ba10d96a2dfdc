"""Google ADK's eval-set files (`.evalset.json`, `.test.json`), converted to plait's shape.

An ADK `EvalSet` holds `eval_cases`, each with an `eval_id` and a `conversation` of
invocations (`user_content`, `final_response`, `intermediate_data.tool_uses`). Each ADK case
becomes one plait case: a single invocation gives an `input`; with several, the earlier
invocations (their user content and final response) and the last one's user content are the
case's `conversation`, and the last invocation's tool uses and final response are what is
expected (`"exact"` trajectory and response: ADK's ROUGE score has no plait counterpart).
`session_input.state` becomes the case's `session_values`. Field names are read in ADK's
snake_case or camelCase. A case with a `conversation_scenario` (a simulated user) cannot
be converted.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel, to_snake

from plait.errors import EvalSetError

__all__ = ["from_adk"]


class _Adk(BaseModel):
    model_config = ConfigDict(extra="ignore", alias_generator=to_camel, populate_by_name=True)


class _FunctionCall(_Adk):
    name: str
    args: dict[str, Any] | None = None


class _Part(_Adk):
    text: str | None = None
    function_call: _FunctionCall | None = None


class _Content(_Adk):
    parts: list[_Part] | None = None
    role: str | None = None

    def text(self) -> str:
        return "\n".join(p.text for p in self.parts or () if p.text is not None)


class _Event(_Adk):
    author: str | None = None
    content: _Content | None = None


class _Intermediate(_Adk):
    tool_uses: list[_FunctionCall] | None = None
    invocation_events: list[_Event] | None = None

    def calls(self) -> list[_FunctionCall]:
        if self.tool_uses is not None:
            return self.tool_uses
        events = self.invocation_events or ()
        return [
            part.function_call
            for event in events
            for part in (event.content.parts or () if event.content else ())
            if part.function_call is not None
        ]


class _Invocation(_Adk):
    user_content: _Content
    final_response: _Content | None = None
    intermediate_data: _Intermediate | None = None


class _SessionInput(_Adk):
    state: dict[str, Any] | None = None


class _Case(_Adk):
    eval_id: str
    conversation: list[_Invocation] | None = None
    conversation_scenario: dict[str, Any] | None = None
    session_input: _SessionInput | None = None


class _EvalSet(_Adk):
    eval_set_id: str | None = None
    name: str | None = None
    description: str | None = None
    eval_cases: list[_Case]


def from_adk(data: dict[str, Any]) -> dict[str, Any]:
    """Return plait's eval set (`{"cases": [...]}`) for an ADK `EvalSet` document.

    Raises:
        EvalSetError: The document is not a valid ADK eval set, or a case cannot be
            converted (no conversation, or a simulated user).
    """
    try:
        adk = _EvalSet.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(
            to_snake(part) if isinstance(part, str) else str(part) for part in first["loc"]
        )
        raise EvalSetError(
            f"invalid ADK eval set: {field}: {first['msg']}", field=field or None
        ) from None
    out: dict[str, Any] = {"cases": [_case(case) for case in adk.eval_cases]}
    name = adk.name or adk.eval_set_id
    if name:
        out["name"] = name
    if adk.description:
        out["description"] = adk.description
    return out


def _case(case: _Case) -> dict[str, Any]:
    if not case.conversation:
        what = "a conversation_scenario (a simulated user)" if case.conversation_scenario else ""
        raise EvalSetError(
            f"ADK case {case.eval_id!r}: conversation: plait runs a fixed conversation; this "
            f"case has {what or 'none'}",
            case=case.eval_id,
            field="conversation",
        )
    *earlier, last = case.conversation
    out: dict[str, Any] = {"id": case.eval_id}
    if earlier:
        history: list[dict[str, Any]] = []
        for turn in earlier:
            history.append({"role": "user", "content": turn.user_content.text()})
            if turn.final_response is not None:
                history.append({"role": "assistant", "content": turn.final_response.text()})
        out["conversation"] = [*history, {"role": "user", "content": last.user_content.text()}]
    else:
        out["input"] = last.user_content.text()
    if last.intermediate_data is not None:
        out["expected_tools"] = [
            {"name": call.name, "args": call.args or {}} for call in last.intermediate_data.calls()
        ]
    if last.final_response is not None:
        out["expected_response"] = last.final_response.text()
    if case.session_input is not None and case.session_input.state:
        out["session_values"] = case.session_input.state
    return out
