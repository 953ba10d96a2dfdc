"""A graph and a custom agent served as assistants, through the official langgraph-sdk
client: their runs (wait, background, every stream mode), graphs and schemas."""

from __future__ import annotations

from tests.protocols.agent_protocol.support import Served


def _ask(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


async def _stream(client: Served, agent: str, text: str, modes: list[str]) -> list:
    key = (await client.ann.threads.create())["thread_id"]
    return [
        part
        async for part in client.ann.runs.stream(key, agent, input=_ask(text), stream_mode=modes)
    ]


async def test_a_graph_runs_as_an_assistant(kinds: Served) -> None:
    key = (await kinds.ann.threads.create())["thread_id"]
    values = await kinds.ann.runs.wait(key, "drafts", input=_ask("cats"))
    assert [(m["type"], m["content"]) for m in values["messages"]] == [
        ("human", "cats"),
        ("ai", "draft: cats"),
    ]
    run = await kinds.ann.runs.create(key, "drafts", input=_ask("dogs"))
    joined = await kinds.ann.runs.join(key, run["run_id"])
    assert joined["messages"][-1]["content"] == "draft: dogs"
    [step, _] = (await kinds.ann.threads.get_history(key))[1:]  # newest run first
    assert step["metadata"]["writes"] == {"plan": {"topic": "dogs"}}  # after its super-step


async def test_a_graph_streams_its_node_updates_chunks_and_final_state(kinds: Served) -> None:
    parts = await _stream(
        kinds, "drafts", "owls", ["updates", "messages-tuple", "custom", "values"]
    )
    updates = [p.data for p in parts if p.event == "updates"]
    assert {"plan": {"topic": "owls"}} in updates
    [write] = [u["write"] for u in updates if "write" in u]
    assert [(m["type"], m["content"]) for m in write["messages"]] == [("ai", "draft: owls")]
    chunks = [
        p.data for p in parts if p.event == "messages" and p.data[1]["langgraph_node"] == "writer"
    ]
    assert "".join(chunk["content"] for chunk, _ in chunks) == "draft: owls"
    [final] = [p.data for p in parts if p.event == "custom"]  # its state, not its node updates
    assert final["topic"] == "owls"
    assert [m["type"] for m in final["messages"]] == ["human", "ai"]
    assert [m["content"] for m in parts[-2].data["messages"]] == ["owls", "draft: owls"]
    assert parts[-1].event == "end"


async def test_a_graph_draws_its_nodes_and_gives_its_state_schema(kinds: Served) -> None:
    graph = await kinds.ann.assistants.get_graph("drafts")
    ids = {node["id"] for node in graph["nodes"]}
    assert ids == {"drafts", "drafts/__start__", "drafts/plan", "drafts/writer", "drafts/__end__"}
    edges = {(e["source"], e["target"]) for e in graph["edges"]}  # an agent node by its agent
    assert {("drafts/__start__", "drafts/plan"), ("drafts/plan", "drafts/writer")} <= edges
    schemas = await kinds.ann.assistants.get_schemas("drafts")
    state = schemas["state_schema"]
    assert set(state["properties"]) == {"messages", "topic"}
    assert state["properties"]["topic"] == {"type": "string"}
    assert schemas["input_schema"] == state
    assert (await kinds.ann.assistants.get("drafts"))["description"] == (
        "Plans a topic, then drafts it."
    )


async def test_a_custom_agent_runs_streams_and_is_resumed(kinds: Served) -> None:
    key = (await kinds.ann.threads.create())["thread_id"]
    parts = [
        part
        async for part in kinds.ann.runs.stream(
            key, "greeter", input=_ask("hi"), stream_mode=["messages-tuple", "updates"]
        )
    ]
    said = [p.data[0]["content"] for p in parts if p.event == "messages"]
    assert said == ["hello! you said: hi"]
    asked = [
        p.data["__interrupt__"] for p in parts if p.event == "updates" and "__interrupt__" in p.data
    ]
    assert asked[0][0]["value"] == {"question": "what is your name?"}
    thread = await kinds.ann.threads.get(key)
    assert thread["status"] == "interrupted"
    resumed = [
        part
        async for part in kinds.ann.runs.stream(
            key, "greeter", command={"resume": "Ana"}, stream_mode=["custom", "values"]
        )
    ]
    assert [p.data for p in resumed if p.event == "custom"] == [{"greeted": "Ana"}]
    values = [p.data for p in resumed if p.event == "values"][-1]
    assert [m["content"] for m in values["messages"]] == [
        "hi",
        "hello! you said: hi",
        "nice to meet you, Ana",
    ]
    assert values["name"] == "Ana"
    again = await kinds.ann.runs.wait(key, "greeter", input=_ask("hi again"))
    assert again["messages"][-1]["content"] == "nice to meet you, Ana"  # it knows the name now


async def test_a_custom_agent_draws_as_one_node_with_the_common_schema(kinds: Served) -> None:
    graph = await kinds.ann.assistants.get_graph("greeter")
    assert [node["id"] for node in graph["nodes"]] == ["greeter"]
    assert graph["nodes"][0]["data"]["description"] == "Greets whoever writes, asking their name."
    schemas = await kinds.ann.assistants.get_schemas("greeter")
    assert "messages" in schemas["state_schema"]["properties"]
    assert "model" in schemas["context_schema"]["properties"]
