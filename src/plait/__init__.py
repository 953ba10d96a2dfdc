"""plait: one Agent interface, ReAct agents, multi-agent teams and graphs, pause and resume.

```python
from plait import ChatModelAgent, Runner, tool

@tool
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b

agent = ChatModelAgent("calc", model, instruction="You add numbers.", tools=[add])
print(Runner(agent).query_sync("What is 2 + 3?").final_output)
```

Every name is imported on first use (so `import plait` stays fast); the submodules
`plait.errors`, `plait.hooks`, `plait.models`, `plait.prebuilt`, `plait.testing` and
`plait.tracing` are attributes too.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from plait import errors

if TYPE_CHECKING:
    from plait import graph, hooks, models, prebuilt, testing, tracing
    from plait.agents import (
        AgentTool,
        ChatModelAgent,
        LoopAgent,
        Middleware,
        ParallelAgent,
        SequentialAgent,
        set_sub_agents,
    )
    from plait.agents.options import RunOption
    from plait.capabilities.compaction import Compaction
    from plait.capabilities.guardrails import GuardrailResult
    from plait.capabilities.limits import UsageLimits
    from plait.capabilities.loop_guard import LoopGuard
    from plait.core.agent import Agent, AgentInput
    from plait.core.agent_context import AgentContext, HookContext, RunContext
    from plait.core.context import IdSource
    from plait.core.current import run_context
    from plait.core.hooks import Hooks, ModelRequest
    from plait.core.interrupt import interrupt, interrupt_state
    from plait.core.resume import ResumeInfo
    from plait.errors import PlaitError, QuotaExceeded
    from plait.events import (
        AgentAction,
        AgentEvent,
        AgentOutput,
        BreakLoopAction,
        HandoffLog,
        InterruptCtx,
        InterruptInfo,
        MessageStream,
        MessageVariant,
        RunResult,
        TransferToAgentAction,
    )
    from plait.graph import END, START, StateGraph
    from plait.messages import Message, ToolCall, Usage
    from plait.run.runner import Runner, RunStream
    from plait.run.sessions import SessionSummary, SessionView
    from plait.run.time_travel import StepSnapshot
    from plait.team import Inherit, Team
    from plait.tools import Approval, FunctionTool, Tool, ToolInfo, ToolResult, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentAction",
    "AgentContext",
    "AgentEvent",
    "AgentInput",
    "AgentOutput",
    "AgentTool",
    "Approval",
    "BreakLoopAction",
    "ChatModelAgent",
    "Compaction",
    "END",
    "FunctionTool",
    "GuardrailResult",
    "HandoffLog",
    "HookContext",
    "Hooks",
    "IdSource",
    "Inherit",
    "InterruptCtx",
    "InterruptInfo",
    "LoopAgent",
    "LoopGuard",
    "Message",
    "MessageStream",
    "MessageVariant",
    "Middleware",
    "ModelRequest",
    "ParallelAgent",
    "PlaitError",
    "QuotaExceeded",
    "ResumeInfo",
    "RunContext",
    "RunOption",
    "RunResult",
    "RunStream",
    "Runner",
    "START",
    "SequentialAgent",
    "SessionSummary",
    "SessionView",
    "StateGraph",
    "StepSnapshot",
    "Team",
    "Tool",
    "ToolCall",
    "ToolInfo",
    "ToolResult",
    "TransferToAgentAction",
    "Usage",
    "UsageLimits",
    "errors",
    "graph",
    "hooks",
    "interrupt",
    "interrupt_state",
    "memory",
    "models",
    "prebuilt",
    "run_context",
    "set_sub_agents",
    "testing",
    "tool",
    "tracing",
]

_EXPORTS = {
    "Agent": "plait.core.agent",
    "Approval": "plait.tools",
    "AgentAction": "plait.events",
    "AgentEvent": "plait.events",
    "AgentInput": "plait.core.agent",
    "AgentOutput": "plait.events",
    "AgentTool": "plait.agents",
    "BreakLoopAction": "plait.events",
    "ChatModelAgent": "plait.agents",
    "Compaction": "plait.capabilities.compaction",
    "END": "plait.graph",
    "FunctionTool": "plait.tools",
    "GuardrailResult": "plait.capabilities.guardrails",
    "HandoffLog": "plait.events",
    "Hooks": "plait.core.hooks",
    "Inherit": "plait.team",
    "InterruptCtx": "plait.events",
    "InterruptInfo": "plait.events",
    "LoopAgent": "plait.agents",
    "LoopGuard": "plait.capabilities.loop_guard",
    "Message": "plait.messages",
    "MessageStream": "plait.events",
    "MessageVariant": "plait.events",
    "Middleware": "plait.agents",
    "ModelRequest": "plait.core.hooks",
    "ParallelAgent": "plait.agents",
    "PlaitError": "plait.errors",
    "QuotaExceeded": "plait.errors",
    "IdSource": "plait.core.context",
    "AgentContext": "plait.core.agent_context",
    "HookContext": "plait.core.agent_context",
    "ResumeInfo": "plait.core.resume",
    "RunContext": "plait.core.agent_context",
    "RunOption": "plait.agents.options",
    "RunResult": "plait.events",
    "RunStream": "plait.run.runner",
    "Runner": "plait.run.runner",
    "START": "plait.graph",
    "SequentialAgent": "plait.agents",
    "SessionSummary": "plait.run.sessions",
    "SessionView": "plait.run.sessions",
    "StateGraph": "plait.graph",
    "StepSnapshot": "plait.run.time_travel",
    "Team": "plait.team",
    "Tool": "plait.tools",
    "ToolCall": "plait.messages",
    "ToolInfo": "plait.tools",
    "ToolResult": "plait.tools",
    "TransferToAgentAction": "plait.events",
    "Usage": "plait.messages",
    "UsageLimits": "plait.capabilities.limits",
    "interrupt": "plait.core.interrupt",
    "interrupt_state": "plait.core.interrupt",
    "run_context": "plait.core.current",
    "set_sub_agents": "plait.agents",
    "tool": "plait.tools",
}
_LAZY_MODULES = frozenset({"graph", "hooks", "memory", "models", "prebuilt", "testing", "tracing"})


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(module_name), name)
    elif name in _LAZY_MODULES:
        value = importlib.import_module(f"plait.{name}")
    else:
        raise AttributeError(f"module 'plait' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
