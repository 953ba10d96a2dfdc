"""Middleware: per-agent hooks around a `ChatModelAgent`'s model and tool calls."""

from __future__ import annotations

from plait.core.hooks import Hooks

__all__ = ["Middleware"]


class Middleware(Hooks):
    """Per-agent hooks (`plait.Hooks`) on the same seams with the same signatures;
    `ChatModelAgent(middlewares=[...])` adds them to the agent's `hooks`.

    - `before_model(ctx, request)` replaces the `ModelRequest`; its messages are kept in the
      agent's history.
    - `after_model(ctx, request, reply)` replaces the reply the agent acts on; the event the
      caller sees still shows the model's raw output.
    - `wrap_model(ctx, request, call_next)` surrounds the model call: it returns
      `await call_next(request)`'s reply, or one of its own instead of calling the model.
    - `before_tool(ctx, call)` replaces a tool call (name or arguments) before it runs.
    - `wrap_tool(ctx, call, call_next)` surrounds the tool call the same way.
    - `after_tool(ctx, call, result)` replaces a tool's result text before the model sees it.
    """
