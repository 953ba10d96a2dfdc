"""The `ChatModel` protocol every model provider implements, and the optional
structured-output capability (`OutputSchema`, `supports_output_schema`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from plait.errors import ModelError, PlaitError
from plait.messages import Message, ToolInfo

__all__ = ["ChatModel", "OutputSchema", "model_error", "supports_output_schema", "wrong_output"]


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: `generate` returns a whole message, `stream` yields its chunks.

    The chunks of `stream` concatenate to the message (text joined, tool-call chunks merged
    by index, usage summed). Any object with these two methods is accepted as a model. One
    whose `generate` returns anything but a `Message`, or whose `stream` is not an async
    iterator of `Message`s, ends the run with a `ModelError` naming the type it gave.

    A model may also declare `supports_output_schema = True`: it is then passed an
    `output_schema` option (an `OutputSchema`) by agents with an `output_type`.
    """

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Return the model's reply to `messages`, offering `tools`."""
        ...

    def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Yield the model's reply to `messages` in chunks."""
        ...


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """The JSON schema the model's final answer must match (a structured-output agent's).

    A model that declares `supports_output_schema = True` is passed one as the keyword
    option `output_schema` of `generate` and `stream`, and makes its answer (the reply's
    text, when it calls no tool) JSON that matches `schema`: OpenAI sends it as the
    `json_schema` response format, `LocalModel` decodes under a grammar built from it.
    Models that do not declare support are never passed it.
    """

    name: str
    """A name for the schema (letters, digits, `_` and `-`; at most 64 characters)."""
    schema: dict[str, Any] = field(hash=False)
    """The JSON schema of the answer (an object)."""
    strict: bool = False
    """Whether the schema meets OpenAI's strict mode (every object closed, every property
    required), so a provider may enforce it exactly."""
    description: str = ""
    """What the answer is, for the model."""


def supports_output_schema(model: object) -> bool:
    """Return whether `model` takes the `output_schema` option (it declares
    `supports_output_schema = True`)."""
    return getattr(model, "supports_output_schema", False) is True


def model_error(name: str, exc: Exception) -> PlaitError:
    """Return the error a failed model call of agent `name` ends with."""
    if isinstance(exc, ModelError):
        if exc.agent_name is None:
            exc.agent_name = name
        return exc
    if isinstance(exc, PlaitError):
        return exc
    err = ModelError(f"model call failed: {type(exc).__name__}: {exc}", agent_name=name)
    err.__cause__ = exc
    return err


def wrong_output(
    model: ChatModel, name: str, what: str, value: object, expected: str
) -> ModelError:
    """The error for a model whose `generate`/`stream` gave something other than a Message."""
    return ModelError(
        f"model {type(model).__name__}: {what} {type(value).__name__}, "
        f"expected {expected} (see the plait.models.ChatModel protocol)",
        agent_name=name,
    )
