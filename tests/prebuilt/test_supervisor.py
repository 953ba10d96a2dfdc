"""supervisor(): workers report back to the supervisor (Eino scenarios 42-43)."""

from __future__ import annotations

import pytest

from plait import ChatModelAgent, Message, Runner
from plait.errors import UsageError
from plait.prebuilt import supervisor
from plait.testing import ScriptedModel, call, reply


def _to(name: str) -> Message:
    return call("transfer_to_agent", {"agent_name": name})


def test_the_supervisor_regains_control_after_each_worker() -> None:
    s_model = ScriptedModel([_to("S1"), _to("S2"), reply("finish")])
    s1 = ChatModelAgent("S1", ScriptedModel([reply("S1 result")]), description="first worker")
    s2 = ChatModelAgent("S2", ScriptedModel([reply("S2 result")]), description="second worker")
    boss = supervisor(ChatModelAgent("S", s_model, instruction="delegate"), [s1, s2])
    assert boss.name == "S"
    result = Runner(boss).query_sync("do both")
    summary = [
        (e.agent_name, e.message.role, e.message.tool_name)  # type: ignore[union-attr]
        for e in result.events
    ]
    assert summary == [
        ("S", "assistant", None),
        ("S", "tool", "transfer_to_agent"),
        ("S1", "assistant", None),
        ("S1", "assistant", None),
        ("S1", "tool", "transfer_to_agent"),
        ("S", "assistant", None),
        ("S", "tool", "transfer_to_agent"),
        ("S2", "assistant", None),
        ("S2", "assistant", None),
        ("S2", "tool", "transfer_to_agent"),
        ("S", "assistant", None),
    ]
    assert result.final_output == "finish"
    # the second supervisor turn sees S1's work, rewritten for context
    second = [m.content for m in s_model.requests[1].messages]
    assert "For context: [S1] said: S1 result." in second
    assert s1.tools == ()  # workers get no transfer tool of their own


def test_a_worker_that_exits_does_not_hand_back() -> None:
    s_model = ScriptedModel([_to("W"), reply("never")])
    worker = ChatModelAgent(
        "W", ScriptedModel([call("exit", {"final_result": "all done"})]), exit_tool=True
    )
    boss = supervisor(ChatModelAgent("S", s_model), [worker])
    result = Runner(boss).query_sync("q")
    assert result.final_output == "all done"
    assert len(s_model.requests) == 1


def test_nested_supervisors_hand_back_level_by_level() -> None:
    top_model = ScriptedModel([_to("Lead"), reply("top done")])
    lead_model = ScriptedModel([_to("Coder"), reply("lead summary")])
    coder = ChatModelAgent("Coder", ScriptedModel([reply("code written")]))
    lead = supervisor(ChatModelAgent("Lead", lead_model), [coder])
    top = supervisor(ChatModelAgent("Top", top_model), [lead])
    result = Runner(top).query_sync("build it")
    assert result.final_output == "top done"
    order = [e.agent_name for e in result.events if e.message and e.message.role == "assistant"]
    assert order == ["Top", "Lead", "Coder", "Coder", "Lead", "Lead", "Top"]


def test_a_nested_worker_exit_stops_every_level() -> None:
    top_model = ScriptedModel([_to("Lead"), reply("never")])
    lead_model = ScriptedModel([_to("Coder"), reply("never")])
    coder = ChatModelAgent(
        "Coder", ScriptedModel([call("exit", {"final_result": "shipped"})]), exit_tool=True
    )
    lead = supervisor(ChatModelAgent("Lead", lead_model), [coder])
    top = supervisor(ChatModelAgent("Top", top_model), [lead])
    result = Runner(top).query_sync("build it")
    assert result.final_output == "shipped"
    assert (len(top_model.requests), len(lead_model.requests)) == (1, 1)


@pytest.mark.parametrize(
    ("boss", "workers", "expected"),
    [
        (None, [], "supervisor: the supervisor is None"),
        ("S", [], "supervisor: the supervisor is 'S'"),
        (ChatModelAgent("S", ScriptedModel([])), [None], "supervisor 'S': workers[0] is None"),
        (
            ChatModelAgent("S", ScriptedModel([])),
            [ChatModelAgent("W", ScriptedModel([])), ScriptedModel([])],
            "supervisor 'S': workers[1] is <plait.testing",
        ),
    ],
)
def test_what_is_not_an_agent_is_refused_when_a_supervisor_is_built(
    boss: object, workers: list[object], expected: str
) -> None:
    with pytest.raises(UsageError) as raised:
        supervisor(boss, workers)
    assert str(raised.value).startswith(expected)
    assert str(raised.value).endswith(", not an Agent (needs name, description and run)")
