"""Context compaction: when a ReAct agent's prompt grows past a budget, its older messages
are replaced by one summary written by a model.

`ChatModelAgent(..., compaction=Compaction(max_tokens, keep_last=6, model=None))` adds the
`Compaction` hook to the agent's own hooks, after the others, on the `before_model` seam:
before each model call it measures the prompt and, when it is over `max_tokens`, sends the
model the system instruction, one summary message and the last `keep_last` messages instead.
What a `before_model` hook returns becomes the agent's history, so the agent goes on (and is
checkpointed) with the compacted messages.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Sequence
from typing import cast

from plait.core.agent_context import HookContext
from plait.core.hooks import Hooks, ModelRequest
from plait.errors import ModelError, UsageError
from plait.events import AgentOutput
from plait.messages import Message
from plait.models.base import ChatModel, model_error, wrong_output
from plait.models.spec import resolve_model

__all__ = ["SUMMARY_INSTRUCTION", "SUMMARY_PREFIX", "Compaction", "estimate_tokens"]

#: The system message of the summary call; its user message is the dropped messages, one
#: line each.
SUMMARY_INSTRUCTION = (
    "Summarize the conversation below concisely. Keep every fact, decision, tool result and "
    "open question the conversation still needs, and the user's goal; leave out pleasantries. "
    "Answer with the summary only."
)
#: What the summary message starts with (a user message placed after the system message).
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


def estimate_tokens(messages: Sequence[Message]) -> int:
    """Return the estimated tokens of `messages`: the characters of their contents and of
    their tool calls' names and arguments, divided by 4 and rounded up."""
    chars = 0
    for message in messages:
        chars += len(message.content)
        for tool_call in message.tool_calls:
            chars += len(tool_call.name) + len(tool_call.arguments)
    return -(-chars // 4)


class Compaction(Hooks):
    """Replace a ChatModelAgent's older messages by one summary when its prompt is too big.

    Give it to the agent: `ChatModelAgent(..., compaction=Compaction(8000))`.

    Before each model call the prompt is measured: with the model's own
    `count_tokens(messages) -> int` (a method or coroutine) when the agent's model has one,
    else as `estimate_tokens` (characters / 4). Over `max_tokens`, the messages between the
    leading system message(s) and the last `keep_last` messages are sent to `model` (a plain
    call, no tools) with `SUMMARY_INSTRUCTION`, and replaced by one user message,
    `SUMMARY_PREFIX` and the summary. The kept tail is extended backwards so that a tool
    result never loses the assistant message that called it. The agent then sends (and keeps)
    system + summary + tail, and the run gets an event whose `output.custom` is
    `{"compaction": {"before": n, "after": m}}` (tokens, measured as above), just before the
    model's reply. The summary call counts in the run's usage. When there is nothing older
    than the tail, or the compacted prompt is still over `max_tokens`, the agent goes on
    with what it has.

    Args:
        max_tokens: The most tokens a prompt may have before it is compacted (at least 1).
        keep_last: How many of the latest messages are kept as they are (at least 0; the
            system message is kept too and not counted).
        model: The model that writes the summary (a `ChatModel` or a spec string); None:
            the agent's model.
    """

    def __init__(
        self, max_tokens: int, keep_last: int = 6, model: ChatModel | str | None = None
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise UsageError(
                f"Compaction: max_tokens must be an int of at least 1, not {max_tokens!r}"
            )
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
            raise UsageError(
                f"Compaction: keep_last must be an int of at least 0, not {keep_last!r}"
            )
        self.max_tokens = max_tokens
        self.keep_last = keep_last
        self.model = None if model is None else resolve_model(model, owner="Compaction")
        self._agent_model: ChatModel | None = None  # set by the agent that runs it

    def bound_to(self, model: ChatModel) -> Compaction:
        """Return a copy that measures prompts for `model` and, without a `model` of its own,
        has it write the summary (an agent binds its compaction to its own model)."""
        bound = copy.copy(self)
        bound._agent_model = model
        return bound

    def __repr__(self) -> str:
        return (
            f"Compaction(max_tokens={self.max_tokens}, keep_last={self.keep_last}, "
            f"model={self.model!r})"
        )

    async def before_model(self, ctx: HookContext, request: ModelRequest) -> ModelRequest | None:
        """Compact the request when its prompt is over `max_tokens` (else keep it)."""
        target = self._target(ctx)
        before = await _count(target, request.messages)
        if before <= self.max_tokens:
            return None
        head, dropped, tail = _split(request.messages, self.keep_last)
        if not dropped:
            return None  # nothing older than the kept tail: sent as it is
        writer = self.model if self.model is not None else target
        summary = await self._summarize(ctx, writer, dropped)
        messages = (*head, Message.user(SUMMARY_PREFIX + summary), *tail)
        after = await _count(target, messages)
        custom = {"compaction": {"before": before, "after": after}}
        ctx.emit(ctx.event(output=AgentOutput(custom=custom)))
        return dataclasses.replace(request, messages=messages)

    def _target(self, ctx: HookContext) -> ChatModel:
        """Return the model the agent's prompt goes to in this run."""
        fallback = self._agent_model or self.model
        if fallback is not None:
            current = ctx.model  # the agent's model in this run
            return cast(ChatModel, current) if current is not None else fallback
        raise UsageError(
            "Compaction without a model takes its agent's: give it as "
            "ChatModelAgent(..., compaction=Compaction(...))"
        )

    async def _summarize(
        self, ctx: HookContext, model: ChatModel, dropped: Sequence[Message]
    ) -> str:
        """Return the summary `model` writes of `dropped` (its usage counts in the run's);
        the call goes through the run's `wrap_model` hooks (`side_model`)."""
        prompt = [Message.system(SUMMARY_INSTRUCTION), Message.user(_transcript(dropped))]
        model = ctx.side_model(model)
        try:
            reply = await model.generate(prompt)
        except Exception as exc:
            raise model_error(ctx.agent_name, exc) from exc
        if not isinstance(reply, Message):
            raise wrong_output(model, ctx.agent_name, "generate() returned", reply, "a Message")
        ctx.record_model_call(reply.usage)
        return reply.content.strip()


async def _count(model: ChatModel, messages: Sequence[Message]) -> int:
    """Return the tokens of `messages` as `model` counts them, or as estimated."""
    count = getattr(model, "count_tokens", None)
    if not callable(count):
        return estimate_tokens(messages)
    result = count(list(messages))
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, bool) or not isinstance(result, int):
        raise ModelError(
            f"model {type(model).__name__}: count_tokens() returned "
            f"{type(result).__name__}, expected an int"
        )
    return result


def _split(
    messages: Sequence[Message], keep_last: int
) -> tuple[tuple[Message, ...], tuple[Message, ...], tuple[Message, ...]]:
    """Return the leading system messages, the messages to summarize and the kept tail (the
    last `keep_last`, extended backwards so that it starts with no tool result)."""
    start = 0
    while start < len(messages) and messages[start].role == "system":
        start += 1
    body = tuple(messages[start:])
    cut = max(0, len(body) - keep_last)
    while 0 < cut < len(body) and body[cut].role == "tool":
        cut -= 1  # back to the assistant message whose tool calls these results answer
    return tuple(messages[:start]), body[:cut], body[cut:]


def _transcript(messages: Sequence[Message]) -> str:
    """Return `messages` as text, one line each (tool calls and results named)."""
    lines: list[str] = []
    for message in messages:
        if message.role == "tool":
            name = f" {message.name}" if message.name else ""
            lines.append(f"tool{name} result: {message.content}")
            continue
        if message.content:
            lines.append(f"{message.role}: {message.content}")
        for tool_call in message.tool_calls:
            lines.append(f"{message.role} called {tool_call.name}({tool_call.arguments})")
    return "\n".join(lines)
