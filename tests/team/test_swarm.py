"""Swarm members with sub-agents: one `transfer_to_agent` reaches the peers and the
member's own sub-agents."""

from __future__ import annotations

from typing import Any

import pytest

from plait import ChatModelAgent, Message, Runner, Team, interrupt, tool
from plait.errors import UsageError
from plait.stores import MemoryStore
from plait.testing import FunctionModel, ScriptedModel, call, reply


def _to(name: str, message: str = "") -> Any:
    return call("transfer_to_agent", {"agent_name": name, "message": message})


def _agent(name: str, *script: Any, **kw: Any) -> tuple[ChatModelAgent, ScriptedModel]:
    model = ScriptedModel(list(script))
    return ChatModelAgent(name, model, description=f"{name} work", **kw), model


def test_a_member_with_sub_agents_transfers_to_one_of_them() -> None:
    billing, billing_model = _agent("billing", reply("refund sent"), reply("it is on its way"))
    desk, desk_model = _agent("desk", _to("billing"), sub_agents=[billing])
    tech, tech_model = _agent("tech")
    runner = Runner(Team.swarm(desk, [desk, tech], name="support"))
    result = runner.query_sync("refund please", session_id="s")
    assert result.error is None
    assert result.final_output == "refund sent"
    (transfer,) = [t for t in desk_model.requests[0].tools if t.name == "transfer_to_agent"]
    assert transfer.parameters["properties"]["agent_name"]["enum"] == ["tech", "billing"]
    # a transfer to a sub-agent is not a handoff between peers: only the chain's end is logged
    assert [(h.from_agent, h.to_agent) for h in result.handoffs] == [("billing", "END")]
    assert result.events[-1].run_path == ("support", "desk", "billing")
    seen = [m.content for m in billing_model.requests[0].messages]
    assert seen[1] == "refund please" and "[desk] called tool: `transfer_to_agent`" in seen[2]
    assert tech_model.requests == []
    # the next turn starts with the agent that answered last
    assert runner.query_sync("where is it?", session_id="s").final_output == "it is on its way"
    assert len(desk_model.requests) == 1


def test_a_member_with_sub_agents_hands_off_to_a_peer_and_back_from_its_sub_agent() -> None:
    billing, _ = _agent("billing", _to("desk"))  # its own transfer tool: back to its parent
    desk, desk_model = _agent("desk", _to("billing"), _to("tech", "fix it"), sub_agents=[billing])
    tech, tech_model = _agent("tech", reply("fixed"))
    result = Runner(Team.swarm(desk, [desk, tech], name="support")).query_sync("help")
    assert result.final_output == "fixed"
    assert [(h.from_agent, h.to_agent) for h in result.handoffs] == [
        ("desk", "tech"),
        ("tech", "END"),
    ]
    assert len(desk_model.requests) == 2
    assert tech_model.requests[0].messages[-1].content == "fix it"
    assert result.events[-1].run_path == ("support", "desk", "billing", "desk", "tech")


def test_a_sub_agent_in_a_swarm_pauses_and_resumes_in_a_new_runner() -> None:
    @tool
    def refund() -> str:
        """Refund, once a person approves."""
        return f"refunded: {interrupt('refund?')}"

    def billing_turn(messages: list[Message], tools: list[Any]) -> Message:
        if messages[-1].role == "tool":
            return reply(f"done, {messages[-1].content}")
        return call("refund", {})

    def build() -> Team:
        billing = ChatModelAgent("billing", FunctionModel(billing_turn), tools=[refund])
        desk, _ = _agent("desk", _to("billing"), sub_agents=[billing])
        return Team.swarm(desk, [desk, _agent("tech")[0]], name="support")

    store = MemoryStore()
    paused = Runner(build(), store=store).query_sync("refund please")
    assert paused.interrupts[0].address.startswith("agent:support;agent:billing;tool:refund:")
    resumed = Runner(build(), store=store).resume_sync(paused.checkpoint_id, value="yes")  # type: ignore[arg-type]
    assert resumed.error is None
    assert resumed.final_output == "done, refunded: yes"
    assert resumed.events[-1].run_path == ("support", "desk", "billing")


def test_a_swarm_refuses_two_agents_of_one_name_below_its_members() -> None:
    desk, _ = _agent("desk", sub_agents=[_agent("tech")[0]])
    with pytest.raises(UsageError, match="two agents named 'tech'"):
        Team.swarm(desk, [desk, _agent("tech")[0]])
    left, _ = _agent("left", sub_agents=[_agent("clerk")[0]])
    right, _ = _agent("right", sub_agents=[_agent("clerk")[0]])
    with pytest.raises(UsageError, match="two agents named 'clerk'"):
        Team.swarm(left, [left, right])
