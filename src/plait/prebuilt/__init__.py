"""Prebuilt agents: Plan-Execute-Replan, Supervisor and Deep agents."""

from plait.prebuilt.deep import Todo, deep_agent
from plait.prebuilt.filesystem import (
    DirectoryBackend,
    FileBackend,
    FileLimits,
    MemoryBackend,
    PathOutsideRoot,
)
from plait.prebuilt.plan_execute import executor, plan_execute, planner, replanner
from plait.prebuilt.supervisor import supervisor

__all__ = [
    "DirectoryBackend",
    "FileBackend",
    "FileLimits",
    "MemoryBackend",
    "PathOutsideRoot",
    "Todo",
    "deep_agent",
    "executor",
    "plan_execute",
    "planner",
    "replanner",
    "supervisor",
]
