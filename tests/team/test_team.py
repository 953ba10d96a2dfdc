"""Teams: coordinator and swarm modes, guards, inheritance, state, handoff log, budgets."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from plait import (
    AgentTool,
    ChatModelAgent,
    Inherit,
    Message,
    Runner,
    Team,
    interrupt,
    run_context,
    tool,
)
from plait.errors import (
    InvalidToolArguments,
    MaxDepthExceeded,
    MaxHandoffsExceeded,
    MaxStepsExceeded,
    NodeTimeout,
    RepetitiveHandoffError,
    ResumeError,
    TokenBudgetExceeded,
    UsageError,
)
from plait.messages import Usage
from plait.stores import MemoryStore
from plait.team import History
from plait.testing import ScriptedModel, call, reply
from tests.conftest import kinds


def _to(name: str, message: str = "", reason: str = "", **kw: Any) -> Message:
    return call(
        "transfer_to_agent", {"agent_name": name, "message": message, "reason": reason}, **kw
    )


def _agent(name: str, *script: Any, **kw: Any) -> tuple[ChatModelAgent, ScriptedModel]:
    model = ScriptedModel(list(script))
    return ChatModelAgent(name, model, description=f"{name} work", **kw), model


# --- coordinator -------------------------------------------------------------------------------


def test_members_become_the_coordinators_tools() -> None:
    coder, coder_model = _agent("coder", reply("def f(): ..."))
    reviewer, _ = _agent("reviewer", reply("looks good"))
    lead, lead_model = _agent(
        "lead",
        call("coder", {"request": "write f"}),
        call("reviewer", {"request": "review"}),
        "done",
    )
    team = Team.coordinator(lead, [coder, reviewer], name="dev")
    result = Runner(team).query_sync("build f")
    assert [t.name for t in lead_model.requests[0].tools] == ["coder", "reviewer"]
    assert lead_model.requests[0].tools[0].description == "coder work"
    assert result.final_output == "done"
    assert coder_model.requests[0].messages == (Message.user("write f"),)
    depths = {(e.agent_name, e.depth) for e in result.events}
    assert ("coder", 1) in depths and ("lead", 0) in depths
    assert lead_model.requests[2].messages[-1].content == "looks good"


def test_teams_are_validated_when_built() -> None:
    a, _ = _agent("a")
    with pytest.raises(UsageError, match="several agents named 'a'"):
        Team.coordinator(_agent("lead")[0], [a, _agent("a")[0]])
    with pytest.raises(UsageError, match="named like the coordinator"):
        Team.coordinator(_agent("team")[0], [_agent("team")[0]])
    with pytest.raises(UsageError, match="at least one member"):
        Team.coordinator(_agent("lead")[0], [])
    with pytest.raises(UsageError, match="not a member"):
        Team.swarm("ghost", [_agent("x")[0]])


def test_a_swarm_refuses_two_members_with_one_name_but_takes_its_entry_in_the_list() -> None:
    a, b = _agent("a")[0], _agent("b")[0]
    with pytest.raises(UsageError, match="several agents named 'a'"):
        Team.swarm(a, [a, b, a])
    with pytest.raises(UsageError, match="several agents named 'b'"):
        Team.swarm(a, [a, b, _agent("b")[0]])
    assert [m.name for m in Team.swarm(a, [a, b]).members] == ["a", "b"]


# --- swarm -------------------------------------------------------------------------------------


def test_a_swarm_hands_off_with_a_message_and_logs_it() -> None:
    triage, _ = _agent(
        "triage", _to("security", "check the login", "auth", usage=Usage(input_tokens=40))
    )
    security, sec_model = _agent("security", reply("fixed"))
    team = Team.swarm("triage", [triage, security], name="support")
    result = Runner(team).query_sync("my login fails")
    assert result.final_output == "fixed"
    log, end = result.handoffs
    assert (log.from_agent, log.to_agent, log.message, log.reason) == (
        "triage",
        "security",
        "check the login",
        "auth",
    )
    assert (log.step_count, log.tokens_used) == (1, 40)
    assert log.timestamp.tzinfo is not None
    assert (end.from_agent, end.to_agent, end.message, end.step_count) == (
        "security",
        "END",
        "fixed",
        1,
    )
    handoff_events = [e for e in result.events if e.handoff is not None]
    assert [e.handoff for e in handoff_events] == [log, end]
    assert handoff_events[-1] is result.events[-1]  # the chain is closed last
    seen = [m.content for m in sec_model.requests[0].messages]
    assert seen[-1] == "check the login"
    assert seen[1] == "my login fails"
    assert "The other members:\n- triage: triage work" in seen[0]
    assert [e.run_path for e in result.events][-1] == ("support", "triage", "security")
    assert all(e.depth == 0 for e in result.events)


def test_an_exit_closes_the_chain_and_a_pause_leaves_it_open_until_the_answer() -> None:
    @tool
    def confirm() -> str:
        """Ask a person to confirm."""
        return str(interrupt("confirm?"))

    a, _ = _agent("a", _to("b", "wrap up"))
    b, _ = _agent("b", call("exit", {"final_result": " all done "}), exit_tool=True)
    result = Runner(Team.swarm("a", [a, b])).query_sync("go")
    assert [(h.from_agent, h.to_agent, h.message) for h in result.handoffs] == [
        ("a", "b", "wrap up"),
        ("b", "END", "all done"),
    ]
    c, _ = _agent("c", _to("d"))
    d, _ = _agent("d", call("confirm", {}), reply("confirmed"), tools=[confirm])
    runner = Runner(Team.swarm("c", [c, d]))
    paused = runner.query_sync("go")
    assert [(h.from_agent, h.to_agent) for h in paused.handoffs] == [("c", "d")]
    done = runner.resume_sync(paused.checkpoint_id, value="yes")  # type: ignore[arg-type]
    earlier, end = done.handoffs  # the whole run's: the one before the pause too
    assert earlier == paused.handoffs[0]
    assert (end.from_agent, end.to_agent, end.message, end.step_count) == (
        "d",
        "END",
        "confirmed",
        1,
    )


def test_the_handoff_after_max_handoffs_is_rejected() -> None:
    a, _ = _agent("a", _to("b"))
    b, _ = _agent("b", _to("c"))
    c, _ = _agent("c", _to("a"))
    result = Runner(Team.swarm("a", [a, b, c], max_handoffs=2)).query_sync("go")
    assert isinstance(result.error, MaxHandoffsExceeded)
    assert "max handoffs exceeded: 2" in str(result.error)
    assert len(result.handoffs) == 2


def test_ping_pong_is_rejected_by_the_repetition_guard() -> None:
    a, _ = _agent("a", *[_to("b")] * 10)
    b, _ = _agent("b", *[_to("a")] * 10)
    result = Runner(Team.swarm("a", [a, b])).query_sync("go")
    assert isinstance(result.error, RepetitiveHandoffError)
    assert len(result.handoffs) == 7  # the 8th handoff fills the window with 2 names


def test_a_member_running_past_node_timeout_is_stopped() -> None:
    @tool
    async def slow() -> str:
        """Take a long time."""
        await asyncio.sleep(5)
        return "late"

    a, _ = _agent("a", _to("b"))
    b, _ = _agent("b", call("slow", {}), "never", tools=[slow])
    result = Runner(Team.swarm("a", [a, b], node_timeout=0.2)).query_sync("go")
    assert isinstance(result.error, NodeTimeout)
    assert isinstance(result.error, TimeoutError)
    assert "member 'b'" in str(result.error)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (Inherit.ALL, ["q", "For context: [a] called tool", "For context: [a] `transfer", "do it"]),
        (Inherit.NONE, ["do it"]),
        (Inherit.last_n(1), ["For context: [a] `transfer", "do it"]),
        (lambda msgs, src, dst: [Message.user(f"{src}->{dst}: {len(msgs)}")], ["a->b: 3", "do it"]),
    ],
)
def test_inheritance_policies(policy: Any, expected: list[str]) -> None:
    a, _ = _agent("a", _to("b", "do it"))
    b, b_model = _agent("b", reply("ok"))
    Runner(Team.swarm("a", [a, b], inherit=policy)).query_sync("q")
    seen = [m.content for m in b_model.requests[0].messages[1:]]  # after the system message
    assert len(seen) == len(expected)
    for got, want in zip(seen, expected, strict=True):
        assert got.startswith(want), (got, want)


def test_summary_inheritance_makes_one_model_call() -> None:
    summarizer = ScriptedModel([reply("user wants X", usage=Usage(output_tokens=7))])
    a, _ = _agent("a", _to("b", "continue"))
    b, b_model = _agent("b", reply("ok"))
    result = Runner(Team.swarm("a", [a, b], inherit=Inherit.summary(summarizer))).query_sync("q")
    assert [m.content for m in b_model.requests[0].messages[1:]] == [
        "Summary of the conversation so far: user wants X",
        "continue",
    ]
    assert result.usage.output_tokens == 7


def test_the_summary_model_may_be_a_spec_string(monkeypatch: pytest.MonkeyPatch) -> None:
    from plait.models import OpenAIModel

    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")
    assert isinstance(Inherit.summary("openai:gpt-4o-mini").model, OpenAIModel)
    with pytest.raises(UsageError, match=r"^Inherit\.summary needs a model"):
        Inherit.summary(3)  # type: ignore[arg-type]


def test_an_unknown_member_name_is_told_to_the_model() -> None:
    a, _ = _agent("a", _to("nobody"), reply("I'll do it myself"))
    b, _ = _agent("b")
    result = Runner(Team.swarm("a", [a, b])).query_sync("q")
    assert result.final_output == "I'll do it myself"
    text = result.events[1].message.message.content  # type: ignore[union-attr]
    assert text == "Error: agent 'nobody' not found. Available agents: b."


def test_an_unknown_member_under_tool_errors_raise_ends_the_run() -> None:
    a, _ = _agent("a", _to("n" * 1_000_000, id="h1"), reply("never"), tool_errors="raise")
    b, b_model = _agent("b", reply("never either"))
    result = Runner(Team.swarm("a", [a, b])).query_sync("q")
    err = result.error
    assert isinstance(err, InvalidToolArguments)
    assert (err.tool_name, err.call_id, err.agent_name) == ("transfer_to_agent", "h1", "a")
    assert str(err) == f"agent '{'n' * 200}'…(1,000,000 characters) not found. Available agents: b."
    assert b_model.remaining == 1


async def test_cross_request_continues_at_the_active_member() -> None:
    store = MemoryStore()
    a, a_model = _agent("a", _to("b"), reply("a again"))
    b, _ = _agent("b", reply("b first"), reply("b second"))
    runner = Runner(Team.swarm("a", [a, b], name="desk"), store=store)
    await runner.query("one", session_id="s").collect()
    second = await runner.query("two", session_id="s").collect()
    assert second.final_output == "b second"
    assert len(a_model.requests) == 1
    # without cross_request the next request starts at the entry again
    a2, _ = _agent("a", reply("entry again"))
    b2, _ = _agent("b", reply("b"))
    plain = Runner(Team.swarm("a", [a2, b2], name="desk", cross_request=False), store=store)
    assert (await plain.query("three", session_id="s").collect()).final_output == "entry again"
    # a member that no longer exists falls back to the entry
    solo, _ = _agent("a", reply("only a"))
    other, _ = _agent("c", reply("c"))
    fallback = Runner(Team.swarm("a", [solo, other], name="desk"), store=store)
    assert (await fallback.query("four", session_id="s").collect()).final_output == "only a"


def test_shared_state_and_local_state() -> None:
    seen: dict[str, Any] = {}

    @tool
    def note(text: str) -> str:
        """Write a note.

        Args:
            text: The note.
        """
        ctx = run_context()
        ctx.state.setdefault("notes", []).append(f"{ctx.agent_name}:{text}")
        ctx.local_state["mine"] = text
        seen[ctx.agent_name] = (list(ctx.state["notes"]), dict(ctx.local_state))
        return "noted"

    a, _ = _agent("a", call("note", {"text": "x"}), _to("b"), tools=[note])
    b, _ = _agent("b", call("note", {"text": "y"}), reply("done"), tools=[note])
    Runner(Team.swarm("a", [a, b])).query_sync("q")
    assert seen["a"] == (["a:x"], {"mine": "x"})
    assert seen["b"] == (["a:x", "b:y"], {"mine": "y"})


# --- nesting, depth and budgets ------------------------------------------------------------------


def _project(**common: Any) -> tuple[Team, dict[str, ScriptedModel]]:
    """The seed's three-level project team: top coordinator, dev lead, backend coder."""
    backend, m_backend = _agent("backend", reply("api built", usage=Usage(output_tokens=10)))
    dev_lead, m_lead = _agent(
        "dev_lead",
        call("backend", {"request": "build the api"}, usage=Usage(output_tokens=10)),
        reply("dev done", usage=Usage(output_tokens=10)),
    )
    dev = Team.coordinator(dev_lead, [backend], name="dev_team", description="builds")
    top, m_top = _agent(
        "top",
        call("dev_team", {"request": "build it"}, usage=Usage(output_tokens=10)),
        reply("project done", usage=Usage(output_tokens=10)),
    )
    team = Team.coordinator(top, [dev], name="project", **common)
    return team, {"top": m_top, "lead": m_lead, "backend": m_backend}


def test_depth_counts_levels_and_a_depth_filter_drops_deep_events() -> None:
    team, _ = _project(max_depth=3)
    result = Runner(team).query_sync("ship it")
    assert result.final_output == "project done"
    depth = {e.agent_name: e.depth for e in result.events}
    assert (depth["top"], depth["dev_lead"], depth["backend"]) == (0, 1, 2)
    shallow, _ = _project(max_depth=3, event_filter=lambda e: e.depth <= 1)
    names = {e.agent_name for e in Runner(shallow).query_sync("ship it").events}
    assert names == {"top", "dev_lead"}


def _dev_team(**common: Any) -> Team:
    backend, _ = _agent("backend", reply("api built"))
    lead, _ = _agent("dev_lead", call("backend", {"request": "the api"}), reply("dev done"))
    return Team.coordinator(lead, [backend], name="dev_team", description="builds", **common)


def test_an_event_filter_never_drops_the_teams_answer() -> None:
    deeper_only = _dev_team(event_filter=lambda e: e.depth > 0)
    result = Runner(deeper_only).query_sync("build it")
    assert result.final_output == "dev done"
    assert [(e.agent_name, e.depth) for e in result.events] == [("backend", 1), ("dev_lead", 0)]
    # the filter still drops what it drops: the lead's call to the backend and its result
    assert kinds(result.events) == ["assistant", "assistant"]


def test_a_filtered_team_answers_the_coordinator_that_calls_it() -> None:
    dev = _dev_team(event_filter=lambda e: e.depth > 1)
    top, top_model = _agent("top", call("dev_team", {"request": "build it"}), reply("shipped"))
    result = Runner(Team.coordinator(top, [dev], name="project")).query_sync("go")
    assert result.final_output == "shipped"
    told = top_model.requests[1].messages[-1]
    assert (told.role, told.content) == ("tool", "dev done")
    swarm_member = _dev_team(event_filter=lambda e: False)
    assert Runner(Team.swarm(swarm_member, [swarm_member])).query_sync("go").final_output == (
        "dev done"
    )


def test_max_depth_is_checked_at_construction_and_at_run_time() -> None:
    with pytest.raises(MaxDepthExceeded, match="nests 2 levels"):
        _project(max_depth=1)
    # a team hidden inside an agent's tool cannot be seen when building: the run checks it
    inner, _ = _agent("inner", reply("x"))
    deep = Team.coordinator(
        _agent("l2", call("inner", {"request": "x"}), "ok")[0], [inner], name="deep"
    )
    helper, _ = _agent("helper", call("deep", {"request": "x"}), "ok", tools=[AgentTool(deep)])
    outer = Team.coordinator(
        _agent("l1", call("helper", {"request": "x"}), "ok")[0],
        [helper],
        max_depth=1,
        name="outer_team",
    )
    result = Runner(outer).query_sync("go")
    assert isinstance(result.error, MaxDepthExceeded)
    assert "max_depth=1" in str(result.error)


def test_total_max_steps_counts_model_calls_across_levels() -> None:
    team, models = _project(total_max_steps=3)
    result = Runner(team).query_sync("ship it")
    assert isinstance(result.error, MaxStepsExceeded)
    assert "total_max_steps=3" in str(result.error)
    calls = sum(len(m.requests) for m in models.values())
    assert calls == 3


def test_total_token_budget_is_checked_after_each_call_across_levels() -> None:
    team, models = _project(total_token_budget=25)
    result = Runner(team).query_sync("ship it")
    assert isinstance(result.error, TokenBudgetExceeded)
    assert sum(len(m.requests) for m in models.values()) == 3  # 10 + 10 + 10 > 25


def test_an_interrupt_in_a_swarm_member_resumes_from_a_new_runner() -> None:
    @tool
    def approve() -> str:
        """Ask a person."""
        return f"approved: {interrupt('ok?')}"

    store = MemoryStore()

    def build() -> tuple[Team, ScriptedModel]:
        a, _ = _agent("a", _to("b", "get approval"))
        b, b_model = _agent("b", call("approve", {}), reply("approved and done"), tools=[approve])
        return Team.swarm("a", [a, b], name="ops"), b_model

    team, _ = build()
    paused = Runner(team, store=store).query_sync("please")
    assert (
        paused.interrupts[0].address
        == "agent:ops;agent:b;tool:approve:" + (paused.interrupts[0].address.rsplit(":", 1)[-1])
    )
    team2, b_model2 = build()
    b_model2.script.pop(0)  # the new process's model continues after the call
    resumed = Runner(team2, store=store).resume_sync(paused.checkpoint_id, value="yes")
    assert resumed.final_output == "approved and done"
    assert resumed.events[0].message.message.content == "approved: yes"  # type: ignore[union-attr]


async def test_team_state_and_local_state_persist_with_the_session() -> None:
    @tool
    def count() -> str:
        """Count this visit."""
        ctx = run_context()
        ctx.state["visits"] = ctx.state.get("visits", 0) + 1
        ctx.local_state["mine"] = ctx.local_state.get("mine", 0) + 1
        return f"{ctx.state['visits']}/{ctx.local_state['mine']}"

    store = MemoryStore()
    texts = []
    for _ in range(2):
        a, _ = _agent("a", call("count", {}), reply("ok"), tools=[count])
        b, _ = _agent("b")
        result = (
            await Runner(Team.swarm("a", [a, b]), store=store).query("q", session_id="s").collect()
        )
        texts.append(result.events[1].message.message.content)  # type: ignore[union-attr]
    assert texts == ["1/1", "2/2"]


def test_an_interrupt_in_a_coordinator_member_resumes_through_the_team() -> None:
    @tool
    def sign_off() -> str:
        """Ask a person to sign off."""
        return f"signed: {interrupt('sign?')}"

    worker, worker_model = _agent(
        "worker", call("sign_off", {}), reply("worker done"), tools=[sign_off]
    )
    lead, lead_model = _agent("lead", call("worker", {"request": "do it"}), reply("all done"))
    runner = Runner(Team.coordinator(lead, [worker], name="crew"))
    paused = runner.query_sync("go")
    (pending,) = paused.interrupts
    assert pending.address.startswith("agent:crew;agent:lead;tool:worker:")
    assert pending.address.endswith(
        ";agent:worker;tool:sign_off:" + pending.address.rsplit(":", 1)[-1]
    )
    resumed = runner.resume_sync(paused.checkpoint_id, value="ok")
    assert resumed.final_output == "all done"
    assert [m.content for m in lead_model.requests[1].messages if m.role == "tool"] == [
        "worker done"
    ]
    assert len(worker_model.requests) == 2


@tool
def _lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return query


@pytest.mark.parametrize("mode", ["coordinator", "swarm"])
@pytest.mark.parametrize(
    ("given", "shown"), [(None, "None"), ("b", "'b'"), (_lookup, "FunctionTool('_lookup')")]
)
def test_what_is_not_an_agent_is_refused_when_a_team_is_built(
    mode: str, given: object, shown: str
) -> None:
    a = _agent("a")[0]
    members: list[Any] = [a, given]
    build = Team.swarm if mode == "swarm" else Team.coordinator
    with pytest.raises(UsageError) as raised:
        build(_agent("lead")[0] if mode == "coordinator" else a, members, name="t")
    assert str(raised.value) == (
        f"team 't': members[1] is {shown}, not an Agent (needs name, description and run)"
    )


# --- the agents handed in, inheritance as written, renamed members, handoff reasons ------------


def test_two_swarms_built_from_the_same_members_both_run() -> None:
    a, a_model = _agent("a", _to("b", "one"), _to("b", "two"))
    b, b_model = _agent("b", reply("first"), reply("second"))
    first = Team.swarm("a", [a, b], name="first")
    second = Team.swarm("a", [a, b], name="second")
    assert Runner(first).query_sync("q1").final_output == "first"
    assert Runner(second).query_sync("q2").final_output == "second"
    for request in (*a_model.requests, *b_model.requests):
        assert [t.name for t in request.tools] == ["transfer_to_agent"]
        assert request.messages[0].content.count("The other members:") == 1
    assert "team 'first'" in a_model.requests[0].messages[0].content
    assert "team 'second'" in a_model.requests[1].messages[0].content
    assert a.tools == () and b.tools == ()


def test_the_same_coordinator_leads_two_teams() -> None:
    x, _ = _agent("x", reply("from x"))
    y, _ = _agent("y", reply("from y"))
    lead, lead_model = _agent(
        "lead", call("x", {"request": "go"}), "x done", call("y", {"request": "go"}), "y done"
    )
    with_x = Team.coordinator(lead, [x], name="team_x")
    with_y = Team.coordinator(lead, [y], name="team_y")
    assert Runner(with_x).query_sync("q").final_output == "x done"
    assert Runner(with_y).query_sync("q").final_output == "y done"
    offered = [[t.name for t in r.tools] for r in lead_model.requests]
    assert offered == [["x"], ["x"], ["y"], ["y"]]
    assert lead.tools == ()
    assert [m.name for m in with_x.members] == ["x"] and with_x.lead is lead


def test_a_former_swarm_member_runs_alone_without_the_swarms_tools() -> None:
    a, a_model = _agent("a", _to("b"), reply("alone"), instruction="Be brief.")
    b, _ = _agent("b", reply("b"))
    team = Team.swarm("a", [a, b])
    assert team.members == (a, b)
    Runner(team).query_sync("in the team")
    assert Runner(a).query_sync("on my own").final_output == "alone"
    alone = a_model.requests[-1]
    assert [t.name for t in alone.tools] == []
    assert [m.content for m in alone.messages] == ["Be brief.", "on my own"]


def test_a_custom_inherit_gets_the_history_as_written() -> None:
    @tool
    def lookup() -> str:
        """Look the account up."""
        return "account 42"

    got: dict[str, Any] = {}

    def tools_only(history: History, src: str, dst: str) -> list[Message]:
        got["roles"] = [m.role for m in history]
        got["authors"] = [history.author(m) for m in history]
        return [m for m in history if m.role in ("system", "tool")]

    a, _ = _agent("a", call("lookup", {}), _to("b", "take it"), tools=[lookup])
    b, b_model = _agent("b", reply("ok"))
    team = Team.swarm("a", [a, b], inherit=tools_only)
    Runner(team).run_sync([Message.system("house rules"), Message.user("q")])
    assert got["roles"] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert got["authors"] == [None, None, "a", "a", "a", "a"]
    seen = [(m.role, m.content) for m in b_model.requests[0].messages[1:]]
    assert seen == [
        ("system", "house rules"),
        ("user", "For context: [a] `lookup` tool returned result: account 42."),
        (
            "user",
            "For context: [a] `transfer_to_agent` tool returned result: "
            "Transfer initiated to agent 'b'.",
        ),
        ("user", "take it"),
    ]


def test_resuming_after_the_paused_member_was_renamed_is_a_resume_error() -> None:
    @tool
    def approve() -> str:
        """Ask a person."""
        return f"approved: {interrupt('ok?')}"

    store = MemoryStore()

    def build(billing: str) -> Team:
        triage, _ = _agent("triage", _to(billing, "refund"))
        member, _ = _agent(billing, call("approve", {}), reply("refunded"), tools=[approve])
        return Team.swarm("triage", [triage, member], name="desk")

    paused = Runner(build("billing"), store=store).query_sync("refund me")
    assert paused.interrupts
    resumed = Runner(build("accounts"), store=store).resume_sync(paused.checkpoint_id, value="y")
    assert isinstance(resumed.error, ResumeError)
    assert str(resumed.error) == (
        "the checkpoint names agent 'billing', which team 'desk' no longer has; its members "
        "are: triage, accounts"
    )
    again = Runner(build("billing"), store=store).resume_sync(paused.checkpoint_id, value="y")
    # the refused resume left the checkpoint pending: the right team resumes it
    assert again.error is None
    assert "approved: y" in [e.message.message.content for e in again.events if e.message]  # type: ignore[union-attr]


def test_the_handoff_reason_is_the_models_text_when_the_argument_is_empty() -> None:
    long = "x" * 600
    a, _ = _agent("a", _to("b", text="  The user needs billing.\n"), reply("back"))
    b, _ = _agent("b", _to("a", text=long))
    c_a, _ = _agent("a", _to("b", reason="given", text="ignored"))
    c_b, _ = _agent("b", reply("done"))
    logs = Runner(Team.swarm("a", [a, b])).query_sync("q").handoffs
    assert [log.reason for log in logs] == ["The user needs billing.", "x" * 499 + "…", ""]
    given, _end = Runner(Team.swarm("a", [c_a, c_b])).query_sync("q").handoffs
    assert given.reason == "given"


def test_a_coordinator_that_is_not_an_agent_is_refused() -> None:
    with pytest.raises(UsageError, match="needs a ChatModelAgent coordinator"):
        Team.coordinator(None, [ChatModelAgent("m", ScriptedModel([]))])  # type: ignore[arg-type]
