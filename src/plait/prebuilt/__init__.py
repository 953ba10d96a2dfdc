"""Prebuilt agents: Plan-Execute-Replan, Supervisor and Deep agents, and the file tools and
backends a deep agent works with."""

from plait.prebuilt import filesystem
from plait.prebuilt.deep import Todo, deep_agent
from plait.prebuilt.filesystem import *  # noqa: F403 - the file tools are part of the face
from plait.prebuilt.plan_execute import executor, plan_execute, planner, replanner
from plait.prebuilt.supervisor import supervisor

__all__ = [
    "Todo",
    "deep_agent",
    "executor",
    "plan_execute",
    "planner",
    "replanner",
    "supervisor",
]
__all__ += filesystem.__all__
