"""Transfer between agents: wiring, history rewriting, run paths, unknown targets."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from plait import (
    AgentAction,
    AgentEvent,
    AgentInput,
    ChatModelAgent,
    Message,
    RunContext,
    Runner,
    TransferToAgentAction,
    set_sub_agents,
)
from plait.errors import InvalidToolArguments, UsageError
from plait.testing import ScriptedModel, call, reply
from tests.conftest import kinds


def _transfer(name: str, **kw: object) -> Message:
    return call("transfer_to_agent", {"agent_name": name}, **kw)  # type: ignore[arg-type]


def test_transfer_runs_the_child_with_the_rewritten_history() -> None:
    parent_model = ScriptedModel([_transfer("Child", id="tc1", text="I'll transfer")])
    child_model = ScriptedModel([reply("Hello from child")])
    child = ChatModelAgent("Child", child_model, instruction="child", description="helps")
    parent = ChatModelAgent("Parent", parent_model, sub_agents=[child])
    result = Runner(parent).query_sync("q")
    assert kinds(result.events) == ["assistant", "tool:transfer_to_agent", "assistant"]
    transfer_event = result.events[1]
    assert transfer_event.action == AgentAction(
        transfer_to_agent=TransferToAgentAction(dest_agent_name="Child")
    )
    assert transfer_event.message.message.content == (  # type: ignore[union-attr]
        "successfully transferred to agent [Child]"
    )
    assert [e.run_path for e in result.events] == [("Parent",), ("Parent",), ("Parent", "Child")]
    assert result.final_output == "Hello from child"
    system, *rest = child_model.requests[0].messages
    assert system.content.startswith("child\n\nAvailable other agents:\n- Agent name: Parent")
    assert rest == [
        Message.user("q"),
        Message(
            role="user",
            content="For context: [Parent] said: I'll transfer. [Parent] called tool: "
            '`transfer_to_agent` with arguments: {"agent_name": "Child"}.',
            name="Parent",  # who said it, for models that can use it (not sent to providers)
        ),
        Message(
            role="user",
            content="For context: [Parent] `transfer_to_agent` tool returned result: "
            "successfully transferred to agent [Child].",
            name="Parent",
        ),
    ]


def test_the_transfer_tool_and_instruction_list_children_then_parent() -> None:
    leaf_model = ScriptedModel([reply("x")])
    leaf = ChatModelAgent("Leaf", leaf_model, description="leaf work")
    mid = ChatModelAgent("Mid", ScriptedModel([]), description="middle", sub_agents=[leaf])
    top = ChatModelAgent("Top", ScriptedModel([]), sub_agents=[mid])
    assert [t.name for t in top.tools] == ["transfer_to_agent"]
    enum = mid.tools[0].parameters["properties"]["agent_name"]["enum"]
    assert enum == ["Leaf", "Top"]
    assert leaf.parent is mid and mid.sub_agents == (leaf,)


def test_an_unknown_target_is_told_to_the_model_and_the_loop_goes_on() -> None:
    model = ScriptedModel([_transfer("ghost"), reply("I'll answer myself")])
    child = ChatModelAgent("Child", ScriptedModel([]))
    parent = ChatModelAgent("Parent", model, sub_agents=[child])
    result = Runner(parent).query_sync("q")
    assert kinds(result.events) == ["assistant", "tool:transfer_to_agent", "assistant"]
    content = result.events[1].message.message.content  # type: ignore[union-attr]
    assert content == "Error: there is no agent named 'ghost'; you can transfer to: Child."
    assert result.events[1].action is None
    assert result.final_output == "I'll answer myself"


_USE = 'call transfer_to_agent with {"agent_name": <one of: Child>}.'


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"agent_name": "ghost"}', "there is no agent named 'ghost'; you can transfer to: Child."),
        ('{"agent_name": 5}', _USE),
        ("not json", _USE),
        ("{}", _USE),
    ],
)
def test_transfer_misuse_under_tool_errors_raise_ends_the_run(arguments: str, problem: str) -> None:
    model = ScriptedModel([call("transfer_to_agent", arguments, id="t1"), reply("never")])
    child_model = ScriptedModel([reply("never either")])
    child = ChatModelAgent("Child", child_model)
    parent = ChatModelAgent("Parent", model, sub_agents=[child], tool_errors="raise")
    result = Runner(parent).query_sync("q")
    assert kinds(result.events) == ["assistant", "error:InvalidToolArguments"]
    err = result.error
    assert isinstance(err, InvalidToolArguments) and str(err) == problem
    assert (err.tool_name, err.call_id, err.agent_name) == ("transfer_to_agent", "t1", "Parent")
    assert (model.remaining, child_model.remaining) == (1, 1)
    told = Runner(
        ChatModelAgent(
            "Parent",
            ScriptedModel([call("transfer_to_agent", arguments), reply("ok")]),
            sub_agents=[ChatModelAgent("Child", ScriptedModel([]))],
        )
    ).query_sync("q")
    assert told.events[1].message.message.content == f"Error: {problem}"  # type: ignore[union-attr]
    assert told.final_output == "ok"


def test_an_unknown_target_is_quoted_cut_to_200_characters() -> None:
    model = ScriptedModel([_transfer("g" * 10_485_760), reply("ok")])
    parent = ChatModelAgent(
        "Parent", model, sub_agents=[ChatModelAgent("Child", ScriptedModel([]))]
    )
    content = Runner(parent).query_sync("q").events[1].message.message.content  # type: ignore[union-attr]
    assert content == (
        f"Error: there is no agent named '{'g' * 200}'…(10,485,760 characters); "
        "you can transfer to: Child."
    )


def test_a_chain_grows_the_run_path_and_transfer_back_reruns_the_parent() -> None:
    a_model = ScriptedModel([_transfer("B"), reply("A answers at last")])
    b_model = ScriptedModel([_transfer("A")])
    b = ChatModelAgent("B", b_model)
    a = ChatModelAgent("A", a_model, sub_agents=[b])
    result = Runner(a).query_sync("q")
    assert [e.run_path for e in result.events] == [
        ("A",),
        ("A",),
        ("A", "B"),
        ("A", "B"),
        ("A", "B", "A"),
    ]
    assert result.final_output == "A answers at last"
    # A sees its own first turn verbatim and B's turn rewritten
    rerun = a_model.requests[1].messages
    assert [m.role for m in rerun] == ["system", "user", "assistant", "tool", "user", "user"]
    assert rerun[4].content.startswith("For context: [B] called tool: `transfer_to_agent`")


def test_disallow_transfer_to_parent_hides_the_parent() -> None:
    child = ChatModelAgent("Child", ScriptedModel([]), disallow_transfer_to_parent=True)
    ChatModelAgent("Parent", ScriptedModel([]), sub_agents=[child])
    assert child.tools == ()


def test_set_sub_agents_returns_the_parent_and_refuses_rewiring() -> None:
    a = ChatModelAgent("A", ScriptedModel([]))
    b = ChatModelAgent("B", ScriptedModel([]))
    assert set_sub_agents(a, [b]) is a
    with pytest.raises(UsageError, match="already has sub-agents"):
        set_sub_agents(a, [ChatModelAgent("C", ScriptedModel([]))])
    with pytest.raises(UsageError, match="already has a parent"):
        set_sub_agents(ChatModelAgent("D", ScriptedModel([])), [b])
    with pytest.raises(UsageError, match="same name: 'F'"):
        set_sub_agents(
            ChatModelAgent("E", ScriptedModel([])),
            [ChatModelAgent("F", ScriptedModel([])), ChatModelAgent("F", ScriptedModel([]))],
        )


class Emitter:
    """A custom agent that emits actions under a foreign run path, then a message."""

    name = "Emitter"
    description = ""
    sub_agents = ()
    parent = None

    def __init__(self, action: AgentAction, run_path: tuple[str, ...] | None = None) -> None:
        self.action = action
        self.foreign = run_path

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        path = self.foreign or ctx.run_path
        yield AgentEvent(agent_name="inner", run_path=path, action=self.action)
        yield ctx.event(message=Message.assistant("after"))


def test_actions_from_another_run_path_do_not_act() -> None:
    other = ChatModelAgent("Other", ScriptedModel([reply("never")]))
    agent = Emitter(
        AgentAction(exit=True, transfer_to_agent=TransferToAgentAction(dest_agent_name="Other")),
        run_path=("inner",),
    )
    set_sub_agents(agent, [other])
    result = Runner(agent).query_sync("q")
    assert result.final_output == "after"
    assert [e.agent_name for e in result.events] == ["inner", "Emitter"]


def test_a_custom_agent_transferring_to_an_unknown_name_fails_clearly() -> None:
    agent = Emitter(AgentAction(transfer_to_agent=TransferToAgentAction(dest_agent_name="nobody")))
    set_sub_agents(agent, [ChatModelAgent("Known", ScriptedModel([]))])
    result = Runner(agent).query_sync("q")
    assert isinstance(result.error, UsageError)
    assert "agent 'nobody' not found when transferring from 'Emitter'" in str(result.error)


async def test_streamed_messages_are_rewritten_for_the_next_agent() -> None:
    child_model = ScriptedModel([reply("ok")])
    child = ChatModelAgent("Child", child_model)
    parent = ChatModelAgent(
        "Parent", ScriptedModel([_transfer("Child", text="passing on")]), sub_agents=[child]
    )
    result = await Runner(parent, enable_streaming=True).query("q").collect()
    assert result.final_output == "ok"
    assert (
        child_model.requests[0]
        .messages[2]
        .content.startswith("For context: [Parent] said: passing on.")
    )


def test_set_sub_agents_links_any_agent_through_the_declared_protocols() -> None:
    from plait.agents import set_sub_agents
    from plait.core.agent import LinkAware, Transferable

    class Plain:
        def __init__(self, name: str) -> None:
            self.name, self.description = name, name
            self.told = 0

        async def run(self, input: object, ctx: object) -> AsyncIterator[AgentEvent]:
            return
            yield

        def transfer_links_changed(self) -> None:
            self.told += 1

    parent, child = Plain("p"), Plain("c")
    set_sub_agents(parent, [child])
    assert isinstance(child, Transferable) and isinstance(child, LinkAware)
    assert child.parent is parent and tuple(parent.sub_agents) == (child,)
    assert (parent.told, child.told) == (1, 1)
