"""Agents: the ReAct `ChatModelAgent`, transfer between agents, and workflow agents."""

from plait.agents.agent_tool import AgentTool
from plait.agents.chat_model import ChatModelAgent
from plait.agents.flow import set_sub_agents
from plait.agents.middleware import Middleware
from plait.agents.workflow import LoopAgent, ParallelAgent, SequentialAgent

__all__ = [
    "AgentTool",
    "ChatModelAgent",
    "LoopAgent",
    "Middleware",
    "ParallelAgent",
    "SequentialAgent",
    "set_sub_agents",
]
