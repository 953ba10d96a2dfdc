"""An agent's topology as data, for the dev page's picture: `GET /v1/agents/{name}/topology`.

The agent is walked from its root: a team's members (a swarm's members may transfer to each
other; a coordinator has its members as tools, drawn under it), an agent's sub-agents
(transfers) and the agents it calls as tools (`AgentTool`), a workflow's steps, and a
graph's nodes and edges (`__start__` and `__end__` included; a conditional edge whose targets
are not declared goes to every node). Each node's id is its path from the root
(`team/member/...`, as an event's `run_path` joined with "/"), so a client can find the
node of any event.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = ["Topology", "TopologyEdge", "TopologyNode", "agents_in", "describe"]

NodeKind = Literal["agent", "team", "workflow", "graph", "function", "start", "end"]
EdgeKind = Literal["member", "transfer", "agent_tool", "step", "graph"]
_MAX_NODES = 500


class TopologyNode(BaseModel):
    """An agent, team, workflow, graph, or a graph's function node (or its start and end)."""

    id: str = Field(description="The node's path from the root, joined with '/'.")
    name: str
    kind: NodeKind
    parent: str | None = Field(default=None, description="The id of the node it is part of.")
    description: str = ""
    tools: list[str] = Field(default=[], description="Its tools that are not agents.")


class TopologyEdge(BaseModel):
    """A link between two nodes: `member` (of a team), `transfer` (may hand the conversation
    over), `agent_tool` (calls it as a tool), `step` (of a workflow), `graph` (a graph edge;
    `label` "?" when conditional)."""

    source: str
    target: str
    kind: EdgeKind
    label: str = ""


class Topology(BaseModel):
    """An agent as a graph of nodes and edges; `root` is the id of the agent itself."""

    root: str
    nodes: list[TopologyNode]
    edges: list[TopologyEdge]


class _Walk:
    def __init__(self) -> None:
        self.nodes: dict[str, TopologyNode] = {}
        self.edges: list[TopologyEdge] = []
        self.agents: list[Any] = []  # the agents visited, in order

    def edge(self, source: str, target: str, kind: EdgeKind, label: str = "") -> None:
        self.edges.append(TopologyEdge(source=source, target=target, kind=kind, label=label))

    def visit(self, agent: Any, parent: str | None) -> str:
        """Add `agent` (under `parent`) and what it holds; return its id."""
        name = str(getattr(agent, "name", type(agent).__name__))
        node_id = name if parent is None else f"{parent}/{name}"
        if node_id in self.nodes or len(self.nodes) >= _MAX_NODES:
            return node_id
        node = TopologyNode(
            id=node_id,
            name=name,
            kind="agent",
            parent=parent,
            description=str(getattr(agent, "description", "") or ""),
        )
        self.nodes[node_id] = node
        self.agents.append(agent)
        if hasattr(agent, "members") and hasattr(agent, "lead"):
            node.kind = "team"
            self._team(agent, node_id)
        elif hasattr(agent, "graph") and hasattr(getattr(agent, "graph", None), "nodes"):
            node.kind = "graph"
            self._graph(agent.graph, node_id)
        elif hasattr(agent, "sub_agents") and not hasattr(agent, "model"):
            node.kind = "workflow"
            previous = None
            for sub in agent.sub_agents:
                child = self.visit(sub, node_id)
                self.edge(previous or node_id, child, "step")
                previous = child
        else:
            self._agent(agent, node)
        return node_id

    def _team(self, team: Any, node_id: str) -> None:
        lead = getattr(team, "lead", None)
        if lead is not None:  # the members are the coordinator's tools, run under it
            lead_id = self.visit(lead, node_id)
            self.edge(node_id, lead_id, "member", "coordinator")
            for member in team.members:
                self.edge(lead_id, self.visit(member, lead_id), "agent_tool")
            return
        members = [self.visit(member, node_id) for member in team.members]
        entry = getattr(team, "entry", None)
        entry_id = f"{node_id}/{entry.name}" if entry is not None else None
        for member in members:
            self.edge(node_id, member, "member", "entry" if member == entry_id else "")
        for source in members:
            for target in members:
                if source != target:
                    self.edge(source, target, "transfer")

    def _agent(self, agent: Any, node: TopologyNode) -> None:
        for tool in getattr(agent, "_user_tools", ()):
            inner = getattr(tool, "agent", None)
            if inner is not None and hasattr(inner, "run"):
                self.edge(node.id, self.visit(inner, node.id), "agent_tool")
            else:
                info = tool.info()
                node.tools.append(info.name)
        for sub in getattr(agent, "sub_agents", ()):
            self.edge(node.id, self.visit(sub, node.id), "transfer")

    def _graph(self, graph: Any, node_id: str) -> None:
        from plait.graph.state_graph import END, START

        ids = {START: f"{node_id}/{START}", END: f"{node_id}/{END}"}
        ends: tuple[tuple[str, NodeKind], ...] = ((START, "start"), (END, "end"))
        for special, kind in ends:
            self.nodes[ids[special]] = TopologyNode(
                id=ids[special], name=special, kind=kind, parent=node_id
            )
        for name, target in graph.nodes.items():
            if hasattr(target, "run") and hasattr(target, "name"):
                ids[name] = self.visit(target, node_id)
            else:
                ids[name] = f"{node_id}/{name}"
                self.nodes[ids[name]] = TopologyNode(
                    id=ids[name], name=name, kind="function", parent=node_id
                )
        for source, targets in graph.edges.items():
            for target in targets:
                self.edge(ids[source], ids[target], "graph")
        for sources, target in graph.joins:
            for source in sources:
                self.edge(ids[source], ids[target], "graph", "join")
        for source, branches in graph.branches.items():
            for _, path_map in branches:
                targets = list(path_map.values()) if path_map else [*graph.nodes, END]
                for target in targets:
                    if target in ids:
                        self.edge(ids[source], ids[target], "graph", "?")


def describe(agent: Any) -> Topology:
    """Return the topology of `agent` (at most 500 nodes)."""
    walk = _Walk()
    root = walk.visit(agent, None)
    return Topology(root=root, nodes=list(walk.nodes.values()), edges=walk.edges)


def agents_in(agent: Any) -> list[Any]:
    """Return `agent` and every agent, team, workflow and graph under it (at most 500)."""
    walk = _Walk()
    walk.visit(agent, None)
    return walk.agents
