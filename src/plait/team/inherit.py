"""`Inherit`: what a swarm member sees of the conversation when it takes over."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from plait.agents.flow import rewrite_message
from plait.messages import Message
from plait.models.base import ChatModel
from plait.models.spec import resolve_model

__all__ = ["History", "Inherit", "InheritPolicy", "Summarizer"]

SUMMARY_PROMPT = (
    "Summarise the conversation below for a colleague who takes it over: the user's request, "
    "what was found or done so far, and what is still open. Be brief and factual."
)


class History(list[Message]):
    """The conversation a swarm member hands over, as it was written.

    A list of messages: the run's input, then every message the members wrote, with its
    original role (assistant messages with their tool calls, tool messages with their
    results). `author(message)` names the member that wrote a message.
    """

    def __init__(self, records: Iterable[tuple[str | None, Message]] = ()) -> None:
        pairs = list(records)
        super().__init__(message for _, message in pairs)
        # by identity (messages equal in value may come from different members); the
        # message is held so that its id stays its own
        self._authors = {id(m): (author, m) for author, m in pairs if author is not None}

    def author(self, message: Message) -> str | None:
        """Return the member that wrote `message`; None for the run's input and new messages."""
        entry = self._authors.get(id(message))
        return entry[0] if entry is not None and entry[1] is message else None

    def seen_by(self, agent_name: str, messages: Iterable[Message]) -> list[Message]:
        """Return `messages` as `agent_name` sees them: other members' messages of this
        history rewritten as user messages "For context: [author] …", the rest verbatim."""
        seen = []
        for message in messages:
            author = self.author(message)
            if author is not None and author != agent_name:
                message = rewrite_message(author, message)
            seen.append(message)
        return seen


InheritFn = Callable[[History, str, str], Sequence[Message]]


@dataclass(frozen=True)
class Summarizer:
    """How a summary is written when a policy asks for one: by `model` when the policy names
    none (the source member's; None: no summary, the history is kept whole), each reply
    passed to `record` (its usage counts), each model routed through `route` when given."""

    model: ChatModel | None
    record: Callable[[Message], None]
    route: Callable[[ChatModel], ChatModel] | None = None


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

    async def apply(self, history: History, to_agent: str, summarizer: Summarizer) -> list[Message]:
        """Return the messages of `history` agent `to_agent` keeps, or new ones in their
        place (a summary, written as `summarizer` says)."""
        if self.kind == "all":
            return list(history)
        if self.kind == "none":
            return []
        if self.kind == "last_n":
            return history[-self.n :] if self.n else []
        model = self.model or summarizer.model
        if model is None:
            return list(history)
        if summarizer.route is not None:
            model = summarizer.route(model)
        seen = history.seen_by(to_agent, history)
        text = "\n".join(f"{m.role}: {m.content}" for m in seen if m.content)
        reply = await model.generate([Message.system(SUMMARY_PROMPT), Message.user(text)], tools=())
        summarizer.record(reply)
        return [Message.user(f"Summary of the conversation so far: {reply.content}")]


class Inherit:
    """Context inheritance policies for `Team.swarm(inherit=...)`.

    `ALL` (the whole history, other agents' messages "For context"), `NONE` (only the handoff
    message), `last_n(n)`, `summary(model=None)` (one model call condenses the history; the
    source member's model by default), or any callable `(history, from_agent, to_agent) ->
    messages` (sync or async). The callable gets the `History` as written (original roles,
    `history.author(message)`); of what it returns, other members' messages are then
    rewritten "For context" for the target, and messages it built itself are passed as they
    are.
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
    history: History,
    from_agent: str,
    to_agent: str,
    summarizer: Summarizer,
) -> list[Message]:
    """Apply an inheritance policy or callable; return what `to_agent` sees."""
    if isinstance(policy, InheritPolicy):
        kept = await policy.apply(history, to_agent, summarizer)
        return history.seen_by(to_agent, kept)
    result: Any = policy(history, from_agent, to_agent)
    if hasattr(result, "__await__"):
        result = await result
    return history.seen_by(to_agent, result)
