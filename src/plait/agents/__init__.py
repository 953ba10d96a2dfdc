"""Agents: the ReAct `ChatModelAgent` and its middleware."""

from plait.agents.chat_model import ChatModelAgent
from plait.agents.middleware import Middleware

__all__ = ["ChatModelAgent", "Middleware"]
