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

The submodules `plait.errors`, `plait.models` and `plait.testing` are reachable as
attributes; the ones not needed by the core are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from plait import errors
from plait.agent import Agent, AgentInput
from plait.agents import (
    AgentTool,
    ChatModelAgent,
    LoopAgent,
    Middleware,
    ParallelAgent,
    SequentialAgent,
    set_sub_agents,
)
from plait.context import RunContext, run_context
from plait.errors import PlaitError
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
from plait.messages import Message, ToolCall, Usage
from plait.runner import Runner, RunStream
from plait.tools import FunctionTool, Tool, ToolInfo, ToolResult, tool

if TYPE_CHECKING:
    from plait import models, prebuilt, testing

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentAction",
    "AgentEvent",
    "AgentInput",
    "AgentOutput",
    "AgentTool",
    "BreakLoopAction",
    "ChatModelAgent",
    "FunctionTool",
    "HandoffLog",
    "InterruptCtx",
    "InterruptInfo",
    "LoopAgent",
    "Message",
    "MessageStream",
    "MessageVariant",
    "Middleware",
    "ParallelAgent",
    "PlaitError",
    "RunContext",
    "RunResult",
    "RunStream",
    "Runner",
    "SequentialAgent",
    "Tool",
    "ToolCall",
    "ToolInfo",
    "ToolResult",
    "TransferToAgentAction",
    "Usage",
    "errors",
    "models",
    "prebuilt",
    "run_context",
    "set_sub_agents",
    "testing",
    "tool",
]

_LAZY_MODULES = frozenset({"models", "prebuilt", "testing"})


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        module = importlib.import_module(f"plait.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'plait' has no attribute {name!r}")
