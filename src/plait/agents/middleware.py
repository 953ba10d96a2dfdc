"""Middleware: hooks around a `ChatModelAgent`'s model and tool calls."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from plait.agent_context import AgentContext
from plait.messages import Message, ToolCall

__all__ = ["Middleware"]


class Middleware:
    """Hooks around model and tool calls; subclass and override the ones you need.

    Each hook may return a replacement for what passes through it, or `None` to keep it.
    The first middleware registered is the outermost: `before_*` hooks run in registration
    order and `after_*` hooks in reverse order.

    - `before_model` rewrites the messages about to be sent; the rewrite is kept in the
      agent's history.
    - `after_model` rewrites the model's reply before the agent acts on it; the event the
      caller sees still shows the model's raw output.
    - `before_tool` rewrites a tool call (name or arguments) before it runs.
    - `after_tool` rewrites a tool's result text before the model sees it.
    """

    async def before_model(
        self, ctx: AgentContext, messages: list[Message]
    ) -> list[Message] | None:
        """Rewrite the messages sent to the model (return None to keep them)."""
        return None

    async def after_model(self, ctx: AgentContext, message: Message) -> Message | None:
        """Rewrite the model's reply (return None to keep it)."""
        return None

    async def before_tool(self, ctx: AgentContext, call: ToolCall) -> ToolCall | None:
        """Rewrite a tool call before it runs (return None to keep it)."""
        return None

    async def after_tool(self, ctx: AgentContext, call: ToolCall, result: str) -> str | None:
        """Rewrite a tool's result (return None to keep it)."""
        return None


Hook = Callable[..., Awaitable[Any]]


def collect_hooks(middlewares: Sequence[Middleware], name: str) -> tuple[Hook, ...]:
    """Return the overridden `name` hooks, in the order they must run."""
    base = getattr(Middleware, name)
    hooks = tuple(
        getattr(mw, name)
        for mw in middlewares
        if getattr(type(mw), name, base) is not base and getattr(mw, name, None) is not None
    )
    return tuple(reversed(hooks)) if name.startswith("after") else hooks
