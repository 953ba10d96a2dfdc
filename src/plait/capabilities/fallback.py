"""`FallbackModel`: a chat model that tries the next model when one fails.

```python
model = FallbackModel("openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5")
```

Each model is tried in turn, after its own retries (the providers retry rate limits and
server errors themselves): a failure whose exception is one of `on` (`ModelError` by
default) moves on to the next model; any other exception stands at once. A stream falls
back only when it fails before its first chunk; once a chunk has been passed on, its error
stands (the chunks already seen cannot be taken back). When every model fails, the error is
a `ModelError` whose message names each model and what it raised; its `failures` lists them
(`{"model", "error"}`, in order) and it is raised from an `ExceptionGroup` of the
exceptions themselves. It takes a structured-output JSON schema (`supports_output_schema`)
only when every one of its models does; otherwise an agent's `output_type` goes by the
`final_result` tool, which any model can call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from plait.errors import ModelError, UsageError
from plait.messages import Message, ToolInfo
from plait.models.base import ChatModel, supports_output_schema
from plait.models.spec import resolve_model

__all__ = ["FallbackModel"]


class FallbackModel:
    """A `ChatModel` that tries `primary`, then each of `fallbacks` in order, moving on
    when a model fails with an exception in `on`.

    Models are `ChatModel`s or spec strings ("openai:gpt-4o-mini"), built as an agent
    builds them. `model_name` is the primary's name (what a trace names the model);
    `models` lists them all.
    """

    def __init__(
        self,
        primary: ChatModel | str,
        *fallbacks: ChatModel | str,
        on: type[Exception] | tuple[type[Exception], ...] = (ModelError,),
    ) -> None:
        on = on if isinstance(on, tuple) else (on,)
        if not on or not all(isinstance(t, type) and issubclass(t, Exception) for t in on):
            raise UsageError(f"FallbackModel: `on` takes exception classes, got {on!r}")
        self.models: tuple[ChatModel, ...] = tuple(
            resolve_model(m, owner=f"FallbackModel (model {i + 1})")
            for i, m in enumerate((primary, *fallbacks))
        )
        self.on: tuple[type[Exception], ...] = on
        # a structured answer goes by JSON schema only when every model takes one
        self.supports_output_schema = all(supports_output_schema(m) for m in self.models)

    @property
    def model_name(self) -> str:
        """The primary model's name."""
        return _name(self.models[0])

    @property
    def model(self) -> str:
        """The primary model's name (as the providers' `model` attribute)."""
        return self.model_name

    def __repr__(self) -> str:
        return f"FallbackModel({', '.join(repr(m) for m in self.models)})"

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Return the reply of the first model that does not fail."""
        failures: list[tuple[ChatModel, Exception]] = []
        for model in self.models:
            try:
                return await model.generate(messages, tools=tools, **options)
            except self.on as exc:
                failures.append((model, exc))
        raise self._all_failed(failures)

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Yield the chunks of the first model whose stream does not fail before its first
        chunk."""
        failures: list[tuple[ChatModel, Exception]] = []
        for model in self.models:
            try:
                source = model.stream(messages, tools=tools, **options)
            except self.on as exc:
                failures.append((model, exc))
                continue
            try:
                first = await anext(aiter(source))
            except StopAsyncIteration:  # an empty stream is an answer, not a failure
                await _close(source)
                return
            except self.on as exc:
                failures.append((model, exc))
                await _close(source)
                continue
            except BaseException:
                await _close(source)
                raise
            try:
                yield first
                async for chunk in source:
                    yield chunk
            finally:
                await _close(source)
            return
        raise self._all_failed(failures)

    def _all_failed(self, failures: list[tuple[ChatModel, Exception]]) -> ModelError:
        lines = "; ".join(
            f"{i}. {_name(m)}: {type(e).__name__}: {e}" for i, (m, e) in enumerate(failures, 1)
        )
        err = ModelError(f"all {len(failures)} models failed: {lines}")
        err.failures = [  # type: ignore[attr-defined]
            {"model": _name(m), "error": f"{type(e).__name__}: {e}"} for m, e in failures
        ]
        err.__cause__ = ExceptionGroup("the failures of each model", [e for _, e in failures])
        return err


def _name(model: ChatModel) -> str:
    """Return a model's name: its `model_name` or `model` text, else its class name."""
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


async def _close(source: object) -> None:
    aclose = getattr(source, "aclose", None)
    if aclose is not None:
        await aclose()
