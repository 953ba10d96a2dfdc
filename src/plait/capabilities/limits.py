"""Usage limits: `Runner(limits=UsageLimits(...))` bounds what one run may spend.

The limits are hooks (`plait.Hooks`) the runner puts last in its chain, so they see every
agent of the run at every depth (agents run as tools, team members, transfers, workflow
children, graph nodes). They read counts the run keeps in its state and saves with every
checkpoint, so the counts hold across pauses and resumes; the limits themselves are the
resuming runner's.

- `max_requests`: before each model call, refused when the run has sent that many.
- `max_tool_calls`: before each tool call, refused when that many have run. A tool call
  that paused is not counted; it counts when it runs again on the resume.
- `max_input_tokens` / `max_output_tokens`: after each reply, the run's tokens (as the
  models report them) may not be past the limit. Before each call the prompt is estimated
  too (`estimate_tokens`), and a call whose estimate would take the run's input tokens past
  the limit is never sent.

A limit is exceeded only when a count would go past it: equal to the limit is allowed.
A refused call ends the whole run with `UsageLimitExceeded`.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from plait.core.hooks import Hooks, ModelRequest
from plait.errors import UsageError, UsageLimitExceeded
from plait.messages import Message, ToolCall

if TYPE_CHECKING:
    from plait.core.agent_context import HookContext

__all__ = ["UsageLimits", "estimate_tokens"]

_NAMES = ("max_requests", "max_input_tokens", "max_output_tokens", "max_tool_calls")


@dataclasses.dataclass(frozen=True, slots=True)
class UsageLimits:
    """What one run may spend, across every agent of it (None: no limit).

    `max_requests` model calls, `max_input_tokens` and `max_output_tokens` tokens (as the
    models report them in their replies' usage), `max_tool_calls` tool calls. Reaching a
    limit is allowed; a call that would go past it is not made, and the run ends with
    `UsageLimitExceeded` naming the limit (`max_requests=2`).
    """

    max_requests: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None

    def __post_init__(self) -> None:
        for name in _NAMES:
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 0):
                raise UsageError(f"UsageLimits: {name} must be an int of 0 or more, or None")

    @property
    def active(self) -> bool:
        """Whether any limit is set."""
        return any(getattr(self, name) is not None for name in _NAMES)

    def hooks(self) -> Hooks:
        """Return the hook that enforces these limits (what `Runner(limits=...)` adds)."""
        return _LimitHooks(self)


async def estimate_tokens(messages: Sequence[Message], model: object = None) -> int:
    """Return the tokens `messages` are expected to take as a prompt.

    A model that reports a count has a `count_tokens(messages) -> int` method (a coroutine
    or not); it is asked first. Otherwise the estimate is characters / 4, rounded up, over
    the messages' contents and their tool calls' names and arguments.
    """
    counter = getattr(model, "count_tokens", None)
    if callable(counter):
        counted = counter(list(messages))
        if inspect.isawaitable(counted):
            counted = await counted
        if type(counted) is not int or counted < 0:
            raise UsageError(
                f"model {type(model).__name__}: count_tokens() returned {counted!r}, "
                "expected an int of 0 or more"
            )
        return counted
    chars = 0
    for message in messages:
        chars += len(message.content)
        for call in message.tool_calls:
            chars += len(call.name) + len(call.arguments)
    return math.ceil(chars / 4)


class _LimitHooks(Hooks):
    """Refuses model and tool calls past a run's `UsageLimits`."""

    def __init__(self, limits: UsageLimits) -> None:
        self.limits = limits

    async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
        limits = self.limits
        requests = ctx.requests
        if limits.max_requests is not None and requests >= limits.max_requests:
            raise _exceeded(
                "max_requests",
                limits.max_requests,
                requests + 1,
                f"the run would send model call {requests + 1}",
            )
        limit = limits.max_input_tokens
        if limit is not None:
            estimate = await estimate_tokens(request.messages, ctx.model)
            total = ctx.usage.input_tokens + estimate
            if total > limit:
                raise _exceeded(
                    "max_input_tokens",
                    limit,
                    total,
                    f"agent '{ctx.agent_name}' did not send a model call whose prompt is about "
                    f"{estimate} tokens (estimated): the run's input tokens would reach {total}",
                )

    async def after_model(self, ctx: HookContext, request: ModelRequest, reply: Message) -> None:
        limits, usage = self.limits, ctx.usage
        for name, limit, count in (
            ("max_input_tokens", limits.max_input_tokens, usage.input_tokens),
            ("max_output_tokens", limits.max_output_tokens, usage.output_tokens),
        ):
            if limit is not None and count > limit:
                kind = name.removeprefix("max_").replace("_", " ")
                raise _exceeded(name, limit, count, f"the run has used {count} {kind}")

    async def before_tool(self, ctx: HookContext, call: ToolCall) -> None:
        limit, made = self.limits.max_tool_calls, ctx.tool_calls
        if limit is not None and made >= limit:
            raise _exceeded(
                "max_tool_calls",
                limit,
                made + 1,
                f"the run would make tool call {made + 1} ('{call.name}')",
            )


def _exceeded(name: str, limit: int, count: int, what: str) -> UsageLimitExceeded:
    return UsageLimitExceeded(
        f"{what}, over the runner's usage limit {name}={limit}",
        limit_name=name,
        limit=limit,
        count=count,
    )
