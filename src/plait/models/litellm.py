"""Chat models of the many providers `litellm` speaks to, through the `litellm` package.

```python
model = LiteLLMModel("anthropic/claude-3-5-haiku-latest", temperature=0)
model = LiteLLMModel("openai/llama3", api_base="http://localhost:8000/v1", api_key="none")
```

`litellm` is imported when the first `LiteLLMModel` is made, not with plait; install it with
`pip install "plait[litellm]"`. What importing and calling it does (checked with litellm
1.110), and what plait does about it before the first import:

- Importing fetches the model cost map from GitHub (and, offline, logs warnings while a
  background thread retries). plait sets `LITELLM_LOCAL_MODEL_COST_MAP=True`, so the copy
  bundled with litellm is used.
- Other files litellm would fetch on its own (Anthropic beta-header table, tokenizers) are
  read from its bundled copies under `LITELLM_OFFLINE_MODE=true`, which plait also sets; it
  leaves the requests to the provider alone.
- Importing loads a `.env` file into `os.environ` unless `LITELLM_MODE` is "PRODUCTION";
  plait sets that, so a model does not read secrets from files behind the user's back.
- litellm prints a "Give Feedback / Get Help" banner to stdout on every error: plait sets
  `litellm.suppress_debug_info`.
- litellm 1.110 sends no telemetry from the SDK: `litellm.telemetry` is no longer a flag but
  the package of the proxy's opt-in usage reports, so plait leaves it alone (assigning to it
  would hide that package).

Each environment variable is only a default (`os.environ.setdefault`): a value the user set
wins. Left as litellm has them: importing takes seconds and adds "ignore" filters for the
pydantic warnings its streaming triggers (a test suite that resets the filters and turns
warnings into errors must ignore them itself); and litellm's logging runs in background
tasks on the event loop, so a program that runs several loops (`Runner.query_sync` calls
`asyncio.run` each time) sees "LoggingWorker: event loop changed" warnings in its log.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from plait.errors import UsageError
from plait.messages import Message, ToolInfo
from plait.models.openai import OpenAIModel, _chat_request

__all__ = ["LiteLLMModel"]

_INSTALL = 'pip install "plait[litellm]"'
_ENV_DEFAULTS = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_MODE": "PRODUCTION",
}


def _import_litellm() -> Any:
    """Import litellm quietly and offline (see the module docstring); return the module."""
    for name, value in _ENV_DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        # Imported by name so that mypy does not analyse litellm (large, partly typed): its
        # attributes are `Any` here, and the replies are read through duck-typed converters.
        litellm: Any = importlib.import_module("litellm")
    except ImportError as exc:
        raise UsageError(f"LiteLLMModel needs the litellm package: {_INSTALL}") from exc
    litellm.suppress_debug_info = True
    return litellm


class LiteLLMModel(OpenAIModel):
    """A chat model reached through `litellm.acompletion`, named "<provider>/<model>".

    Messages, tools and replies use the OpenAI chat format, which litellm translates for
    each provider, so everything but the transport is `OpenAIModel`'s. litellm keeps its
    own HTTP clients (one per event loop), so the model holds none and `aclose()` has
    nothing to close.

    Retries are plait's, with litellm's own turned off: HTTP 429, 5xx and connection
    errors are retried up to `max_retries` times with exponential backoff and full jitter
    (a `Retry-After` header is honoured), each wait at most `retry_max_delay` seconds. A
    timeout is not retried. Any other failure raises `ModelError` with the provider's
    `status_code` and message (litellm raises `openai`'s error types for every provider;
    it reports a connection that fails as a 500 of its own, with its own message).

    Constructor `**options` (`temperature`, `max_tokens`, `tool_choice`, ...) are defaults
    for every call; per-call options override them and a per-call `None` removes one.
    `tool_choice` and `parallel_tool_calls` are sent only when tools are offered. A
    `tool_choice` of "auto", "none" or "required" passes through; another string names
    the tool to force.
    """

    provider = "LiteLLM"

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 8.0,
        **options: Any,
    ) -> None:
        """Configure the model; litellm is imported now, no connection is made.

        Args:
            model: The litellm model name, e.g. "openai/gpt-4o-mini" or "anthropic/...".
            api_base: The API root of the provider; litellm's default for it when None.
            api_key: The API key; litellm reads the provider's variable (e.g.
                `ANTHROPIC_API_KEY`) when None, at call time: a missing key is the
                provider's error then, not the constructor's.
            timeout: Seconds allowed for a request.
            max_retries: How many times a retryable failure is retried.
            retry_base_delay: The backoff of the first retry, doubled on every retry.
            retry_max_delay: The longest wait between two attempts.
            **options: Default request options, overridden by per-call options.
        """
        super().__init__(
            model,
            base_url=api_base,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            retry_base_delay=retry_base_delay,
            retry_max_delay=retry_max_delay,
            **options,
        )

    @property
    def api_base(self) -> str | None:
        """The API root given to litellm, or None for the provider's default."""
        return self.base_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, api_base={self.base_url!r})"

    def _sdk(self) -> ModuleType:
        """Import litellm; return `openai`, whose error types litellm's errors subclass."""
        _import_litellm()
        import openai

        return openai

    def _client(self) -> Any:
        """Return None: litellm holds the HTTP clients."""
        return None

    def _check_api_key(self) -> None:
        """Check nothing: which key a model needs is litellm's to know, at call time."""

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolInfo], options: Mapping[str, Any]
    ) -> dict[str, Any]:
        request = _chat_request(self._merged(options), messages, tools)
        if self.base_url is not None:
            request["api_base"] = self.base_url
        if self._api_key is not None:
            request["api_key"] = self._api_key
        request.update(timeout=self.timeout, num_retries=0, max_retries=0)
        return request

    async def _create(self, request: dict[str, Any]) -> Any:
        """Send `request` with plait's retries; raise `ModelError` when it fails."""
        acompletion = _import_litellm().acompletion
        return await self._send(lambda _: acompletion(**request))
