from __future__ import annotations

import json

import pytest

from plait import errors
from plait.errors import (
    LimitExceeded,
    MaxIterationsExceeded,
    ModelError,
    NodeTimeout,
    PlaitError,
    SerializationError,
    SessionConflict,
    ToolError,
)


def test_every_error_is_a_plait_error_and_the_tree_is_documented() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, PlaitError)
        assert name in doc, f"{name} is missing from the tree in plait.errors' docstring"


def test_limit_errors_share_a_base_and_node_timeout_is_a_timeout() -> None:
    for cls in (
        errors.MaxHandoffsExceeded,
        errors.RepetitiveHandoffError,
        errors.MaxDepthExceeded,
        errors.MaxStepsExceeded,
        errors.TokenBudgetExceeded,
        NodeTimeout,
    ):
        assert issubclass(cls, LimitExceeded)
    assert issubclass(NodeTimeout, TimeoutError)
    assert not issubclass(MaxIterationsExceeded, LimitExceeded)


def test_errors_carry_what_a_user_needs() -> None:
    err = MaxIterationsExceeded(agent_name="a", limit=3)
    assert (err.agent_name, err.limit) == ("a", 3)
    assert "max_iterations=3" in str(err)
    tool_err = ToolError("boom", tool_name="t", call_id="c1", agent_name="a")
    assert tool_err.details() == {"tool_name": "t", "call_id": "c1", "agent_name": "a"}
    assert SerializationError("bad", path="session_values['x']").path == "session_values['x']"


@pytest.mark.parametrize(
    "err",
    [
        MaxIterationsExceeded(agent_name="a", limit=3),
        ModelError("down", agent_name="a", status_code=503),
        ToolError("boom", tool_name="t", call_id="c1", agent_name="a"),
        NodeTimeout("slow"),
        SessionConflict(session_id="s", version=4, expected_version=3),
    ],
)
def test_errors_round_trip_through_json(err: PlaitError) -> None:
    from plait.events import RunResult

    result = RunResult(error=err)
    back = RunResult.from_json(result.to_json())
    assert type(back.error) is type(err)
    assert back.error == err


def test_session_conflict_says_the_turn_was_not_saved() -> None:
    err = SessionConflict(session_id="chat-1", version=4, expected_version=3)
    assert (err.session_id, err.version, err.expected_version) == ("chat-1", 4, 3)
    assert str(err) == (
        "session 'chat-1' was changed by another turn (version 4, expected 3);"
        " this turn was not saved"
    )
    new = SessionConflict(session_id="chat-1", version=1, expected_version=0)
    assert "(version 1, expected none)" in str(new)
    gone = SessionConflict(session_id="chat-1", version=0, expected_version=2)
    assert "(no longer stored, expected 2)" in str(gone)


def test_decoded_details_cannot_shadow_the_message_methods_or_class_attributes() -> None:
    from plait.events import RunResult

    details = {
        "message": 5,
        "with_traceback": 5,
        "details": 5,
        "args": 5,
        "__class__": 5,
        "tool_name": "t",
        "call_id": None,
    }
    raw = json.dumps({"error": {"type": "ToolError", "message": "boom", "details": details}})
    err = RunResult.from_json(raw).error
    assert isinstance(err, ToolError)
    assert str(err) == "boom" and err.message == "boom" and err.args == ("boom",)
    assert callable(err.with_traceback) and type(err) is ToolError
    assert (err.tool_name, err.call_id) == ("t", None)  # details still read as attributes
    assert err.details() == details
    again = RunResult.from_json(RunResult(error=err).to_json()).error
    assert again == err and str(again) == "boom"
    with pytest.raises(AttributeError, match="no attribute 'agent_name'"):
        _ = err.agent_name


def test_constructor_details_cannot_shadow_methods_either() -> None:
    err = PlaitError("bad", details="a detail", with_traceback=1, limit=3)
    assert err.details() == {"details": "a detail", "with_traceback": 1, "limit": 3}
    assert err.limit == 3  # type: ignore[attr-defined]
    assert callable(err.with_traceback)


def test_an_attribute_set_later_counts_as_a_detail() -> None:
    err = ModelError("down")
    err.agent_name = "A"
    assert err.details() == {"agent_name": "A", "status_code": None, "fix": None}


def test_details_that_are_not_an_object_are_refused() -> None:
    from pydantic import ValidationError

    from plait.events import RunResult

    raw = json.dumps({"error": {"type": "ToolError", "message": "boom", "details": [1]}})
    with pytest.raises(ValidationError, match="details are encoded as an object"):
        RunResult.from_json(raw)
