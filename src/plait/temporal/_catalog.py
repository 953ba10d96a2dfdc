"""What a worker's activities call: the models, tools and sync graph nodes of its agents.

Activities run in any worker process of a task queue, so they cannot be handed the live
objects the workflow saw; they get a number instead. Every process builds the same agents
(the same code), and `Catalog` walks them the same way, so the n-th model (tool, sync node)
found is the same object everywhere. The walk goes through agents, plait's own objects and
containers; it stops at models and at leaf tools (a model's or a function's insides are not
walked), and it goes into the tools that run agents (control flow: they run in the
workflow, their agents' own calls are activities).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from plait.core.agent import Agent
from plait.errors import UsageError
from plait.tools.base import Gated

__all__ = ["Catalog", "runs_in_workflow"]

#: Tools that are control flow: they run an agent, transfer, or end the agent's turn; they
#: run in the workflow (the calls inside them are activities).
_CONTROL_TOOLS = frozenset(
    {
        "plait.agents.agent_tool.AgentTool",
        "plait.agents.flow.TransferTool",
        "plait.team.swarm.SwarmTransfer",
        "plait.agents.structured.FinalResultTool",
        "plait.prebuilt.deep._TaskTool",
    }
)
_SCALARS = (str, bytes, int, float, bool, complex, type(None))


def runs_in_workflow(tool: object) -> bool:
    """Whether a call of `tool` is control flow run in the workflow (not an activity)."""
    for cls in type(tool).__mro__:
        if f"{cls.__module__}.{cls.__qualname__}" in _CONTROL_TOOLS:
            return True
    fn = getattr(tool, "fn", None)  # a FunctionTool of plait's own (`exit`)
    module = getattr(fn, "__module__", None) or ""
    return type(tool).__name__ == "FunctionTool" and module.startswith("plait.agents")


def _is_model(obj: object) -> bool:
    return callable(getattr(obj, "generate", None)) and callable(getattr(obj, "stream", None))


def _is_tool(obj: object) -> bool:
    return callable(getattr(obj, "info", None)) and callable(getattr(obj, "call", None))


class Catalog:
    """The agents a worker serves, by name, and their models, leaf tools and sync graph
    nodes, numbered in the order a walk from the agents finds them."""

    def __init__(self, agents: Mapping[str, Agent]) -> None:
        self.agents = dict(agents)
        self.models: list[Any] = []
        self.tools: list[Any] = []
        self.nodes: list[Any] = []
        self._numbers: dict[int, int] = {}
        self._walk(self.agents.values())

    def number(self, obj: object, kind: str) -> int:
        """Return the number of `obj` (a model, tool or node of these agents)."""
        found = self._numbers.get(id(obj))
        if found is None:
            raise UsageError(
                f"the {kind} {obj!r} is not part of the agents given to plait.temporal.worker: "
                f"under Temporal every {kind} an agent calls must be built with the agents "
                "(not made during a run), so that every worker process finds it"
            )
        return found

    def model(self, number: int) -> Any:
        return self._get(self.models, number, "model")

    def tool(self, number: int) -> Any:
        return self._get(self.tools, number, "tool")

    def node(self, number: int) -> Any:
        return self._get(self.nodes, number, "graph node")

    @staticmethod
    def _get(items: list[Any], number: int, kind: str) -> Any:
        if not 0 <= number < len(items):
            raise UsageError(
                f"this worker's agents have no {kind} number {number}: every worker of a "
                "task queue must build the same agents"
            )
        return items[number]

    def _add(self, items: list[Any], obj: object) -> None:
        self._numbers[id(obj)] = len(items)
        items.append(obj)

    def _walk(self, roots: Iterable[object]) -> None:
        seen: set[int] = set()
        queue: deque[object] = deque(roots)
        while queue:
            obj = queue.popleft()
            if isinstance(obj, (*_SCALARS, type)) or id(obj) in seen:
                continue
            seen.add(id(obj))
            queue.extend(self._visit(obj))

    def _visit(self, obj: object) -> Iterable[object]:
        """Record `obj` if it is a model or leaf tool; return what to walk next."""
        if isinstance(obj, Mapping):
            return list(obj.values())
        if isinstance(obj, list | tuple):
            return list(obj)
        if _is_model(obj) and not isinstance(obj, Agent):
            self._add(self.models, obj)
            return ()
        if _is_tool(obj) and not runs_in_workflow(obj):
            _refuse_gated(obj)
            self._add(self.tools, obj)
            return ()
        nodes = getattr(getattr(obj, "graph", None), "nodes", None)
        if type(obj).__name__ == "CompiledGraph" and isinstance(nodes, Mapping):
            self._graph_nodes(nodes)
        if not (isinstance(obj, Agent) or type(obj).__module__.startswith("plait.")):
            return ()
        return _fields(obj)

    def _graph_nodes(self, nodes: Mapping[str, Any]) -> None:
        for node in nodes.values():
            if callable(node) and not isinstance(node, Agent) and id(node) not in self._numbers:
                self._add(self.nodes, node)


def _refuse_gated(tool: object) -> None:
    """Refuse a tool whose calls pass a gate (a "once" effect or an approval): its journal,
    approvals and audit log live in a `Runner`'s store, which a Temporal run has none of."""
    if not isinstance(tool, Gated) or (tool.effect != "once" and tool.approval is None):
        return
    what = "effect='once'" if tool.effect == "once" else "an approval"
    name = getattr(tool, "name", None) or type(tool).__name__
    raise UsageError(
        f"tool {name!r} has {what}, which plait.temporal does not run: the journal of once "
        "calls, approvals and the audit log live in a Runner's store, and a Temporal run has "
        "none; run this agent with a Runner (or plait serve), or ask for the approval with "
        "interrupt() in the tool and leave retries to Temporal's retry policy"
    )


def _fields(obj: object) -> list[object]:
    """Return the attribute values of `obj` (its `__dict__` and `__slots__`), in order."""
    values: list[object] = []
    names: list[str] = []
    for cls in reversed(type(obj).__mro__):
        slots = cls.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else slots)
    for name in names:
        if name not in ("__dict__", "__weakref__"):
            values.append(getattr(obj, name, None))
    values.extend(getattr(obj, "__dict__", {}).values())
    return values
