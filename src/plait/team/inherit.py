"""`Inherit`: what a swarm member sees of the conversation when it takes over."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from plait.messages import Message
from plait.models.base import ChatModel
from plait.models.spec import resolve_model

__all__ = ["Inherit", "InheritPolicy"]

InheritFn = Callable[[list[Message], str, str], Sequence[Message]]

SUMMARY_PROMPT = (
    "Summarise the conversation below for a colleague who takes it over: the user's request, "
    "what was found or done so far, and what is still open. Be brief and factual."
)


class InheritPolicy:
    """How the history is handed to the next member (the handoff message comes after it)."""

    def __init__(self, kind: str, n: int = 0, model: ChatModel | str | None = None) -> None:
        self.kind = kind
        self.n = n
        self.model = None if model is None else resolve_model(model, owner=f"Inherit.{kind}")

    def __repr__(self) -> str:
        if self.kind == "last_n":
            return f"Inherit.last_n({self.n})"
        return (
            f"Inherit.{self.kind.upper()}" if self.kind in ("all", "none") else "Inherit.summary()"
        )

    async def apply(
        self,
        messages: list[Message],
        from_agent: str,
        to_agent: str,
        fallback_model: ChatModel | None,
        record: Callable[[Message], None],
    ) -> list[Message]:
        """Return what the target sees of `messages` (already rewritten for it)."""
        if self.kind == "all":
            return messages
        if self.kind == "none":
            return []
        if self.kind == "last_n":
            return messages[-self.n :] if self.n else []
        model = self.model or fallback_model
        if model is None:
            return messages
        text = "\n".join(f"{m.role}: {m.content}" for m in messages if m.content)
        reply = await model.generate([Message.system(SUMMARY_PROMPT), Message.user(text)], tools=())
        record(reply)
        return [Message.user(f"Summary of the conversation so far: {reply.content}")]


class Inherit:
    """Context inheritance policies for `Team.swarm(inherit=...)`.

    `ALL` (the whole history, other agents' messages "For context"), `NONE` (only the handoff
    message), `last_n(n)`, `summary(model=None)` (one model call condenses the history; the
    source member's model by default), or any callable `(messages, from_agent, to_agent) ->
    messages`.
    """

    ALL = InheritPolicy("all")
    NONE = InheritPolicy("none")

    @staticmethod
    def last_n(n: int) -> InheritPolicy:
        """Keep the last `n` messages of the history."""
        if n < 0:
            raise ValueError("last_n needs n >= 0")
        return InheritPolicy("last_n", n=n)

    @staticmethod
    def summary(model: ChatModel | str | None = None) -> InheritPolicy:
        """Condense the history with one model call (`model`: a `ChatModel` or a spec)."""
        return InheritPolicy("summary", model=model)


async def inherit(
    policy: InheritPolicy | InheritFn | Callable[..., Awaitable[Sequence[Message]]],
    messages: list[Message],
    from_agent: str,
    to_agent: str,
    fallback_model: ChatModel | None,
    record: Callable[[Message], None],
) -> list[Message]:
    """Apply an inheritance policy or callable."""
    if isinstance(policy, InheritPolicy):
        return await policy.apply(messages, from_agent, to_agent, fallback_model, record)
    result: Any = policy(messages, from_agent, to_agent)
    if hasattr(result, "__await__"):
        result = await result
    return list(result)
