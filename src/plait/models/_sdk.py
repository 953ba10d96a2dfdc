"""What the SDK-backed providers share: one client per event loop, plait's retries, errors.

The official `openai` and `anthropic` SDKs raise the same family of errors (`APIError`,
`APITimeoutError`, `APIConnectionError`, with `status_code`, `body` and `response`), so a
provider only says how to build its client and how to send a request.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import random
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

from plait.errors import ModelError, UsageError
from plait.messages import Message

__all__ = ["NO_KEY", "Backoff", "SdkChatModel"]

NO_KEY = "no-key"  # the key sent to a server at a custom base URL when none is set

# Keeps the shutdown guards alive: an event loop holds its tasks only weakly.
_GUARDS: set[asyncio.Task[None]] = set()


@dataclass(frozen=True)
class Backoff:
    """How a model's failed requests are retried: at most `retries` times, each wait a random
    time up to `base * 2**attempt` seconds (full jitter), never over `ceiling`; a server's
    `Retry-After` is honoured up to `ceiling`."""

    retries: int
    base: float
    ceiling: float

    def wait(self, attempt: int, retry_after: float | None) -> float:
        """Return the seconds to wait before retry `attempt + 1`."""
        if retry_after is not None:
            return min(retry_after, self.ceiling)
        return random.uniform(0, min(self.ceiling, self.base * 2**attempt))


@dataclass
class _LoopClient:
    client: Any
    guard: asyncio.Task[None]


class SdkChatModel:
    """The base of a chat model on a provider's official async SDK.

    One client is made per event loop on first use and closed when that loop shuts down
    (`asyncio.run` cancels the task that owns it), so a model works from several
    `asyncio.run` calls; `aclose()` closes the running loop's client sooner. HTTP 429, 5xx
    and connection errors are retried up to `max_retries` times with exponential backoff and
    full jitter (a `Retry-After` header is honoured), each wait at most `retry_max_delay`
    seconds. A timeout is not retried. Other failures are `ModelError`s with the provider's
    status code and message.

    An API key is needed unless a base URL is set: with no `api_key` and none of
    `key_variables` set, the constructor raises a `UsageError` naming the first variable, and
    a server at a custom base URL (the argument or `base_url_variable`) is sent `NO_KEY`.
    """

    provider: ClassVar[str]  # "OpenAI", "Anthropic": used in messages
    sdk_package: ClassVar[str]  # the SDK's package, which plait's extra of that name installs
    key_variables: ClassVar[tuple[str, ...]]  # where the SDK finds a key; the first is named
    base_url_variable: ClassVar[str]  # where the SDK finds a base URL
    client_class: ClassVar[str]  # the SDK's async client, e.g. "AsyncOpenAI"
    base_error: ClassVar[str]  # the error the SDK raises for bad settings, e.g. "OpenAIError"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 8.0,
        **options: Any,
    ) -> None:
        """Configure the model; no connection is made until the first call.

        Args:
            model: The model name, e.g. "gpt-4o-mini".
            base_url: The API root of a compatible server; the SDK default when None.
            api_key: The API key; the provider's variable when None (see above).
            timeout: Seconds allowed for each network operation of a request.
            max_retries: How many times a retryable failure is retried.
            retry_base_delay: The backoff of the first retry, doubled on every retry.
            retry_max_delay: The longest wait between two attempts.
            **options: Default request options, overridden by per-call options.

        Raises:
            UsageError: The SDK is not installed, the settings are out of range, or no API
                key is found (see above).
        """
        self._sdk()  # a missing package is reported now, not at the first call
        kind = type(self).__name__
        if not model:
            raise UsageError(f"{kind} needs a model name")
        if timeout <= 0 or max_retries < 0 or retry_base_delay < 0 or retry_max_delay < 0:
            raise UsageError(f"{kind}: timeout must be positive and retry settings >= 0")
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        self.backoff = Backoff(max_retries, retry_base_delay, retry_max_delay)
        self.options = dict(options)
        self._api_key = api_key
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClient] = (
            weakref.WeakKeyDictionary()
        )
        self._check_api_key()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self.base_url!r})"

    def _check_api_key(self) -> None:
        """Raise a one-line `UsageError` naming the variable to set when no key is found."""
        if self._api_key or self._env_key() or self._custom_base_url():
            return
        raise UsageError(
            f"{type(self).__name__} needs an API key: set {self.key_variables[0]} or pass api_key="
        )

    def _client_api_key(self) -> str | None:
        """Return the key for the SDK's client: None lets the SDK read its variables."""
        if self._api_key:
            return self._api_key
        if self._env_key() or not self._custom_base_url():
            return None
        return NO_KEY

    def _env_key(self) -> bool:
        return any(os.environ.get(name) for name in self.key_variables)

    def _custom_base_url(self) -> bool:
        return bool(self.base_url or os.environ.get(self.base_url_variable))

    def _sdk(self) -> ModuleType:
        """Import and return the provider's SDK (a `UsageError` naming the extra if absent)."""
        try:
            return importlib.import_module(self.sdk_package)
        except ImportError as exc:
            raise UsageError(
                f"{type(self).__name__} needs the {self.sdk_package} package: "
                f'pip install "plait[{self.sdk_package}]"'
            ) from exc

    def _new_client(self, sdk: ModuleType) -> Any:
        """Build the SDK's async client (`client_class`), with the SDK's own retries off.

        Raises:
            UsageError: The SDK refuses the settings (its `base_error`).
        """
        try:
            return getattr(sdk, self.client_class)(
                api_key=self._client_api_key(),
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=0,
            )
        except getattr(sdk, self.base_error) as exc:
            raise UsageError(f"{type(self).__name__} cannot create its client: {exc}") from exc

    def _merged(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Per-call options over the defaults; `None` removes one, `stream` is plait's."""
        merged = {**self.options, **options}
        request = {k: v for k, v in merged.items() if v is not None and k != "stream"}
        request.setdefault("model", self.model)
        return request

    async def aclose(self) -> None:
        """Close the client of the running event loop, if one was created."""
        entry = self._clients.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            entry.guard.cancel()
            await asyncio.wait({entry.guard})

    def _client(self) -> Any:
        """Return the client of the running loop, creating it on first use."""
        loop = asyncio.get_running_loop()
        entry = self._clients.get(loop)
        if entry is None:
            client = self._new_client(self._sdk())
            guard = loop.create_task(_close_at_shutdown(client))
            _GUARDS.add(guard)
            guard.add_done_callback(_GUARDS.discard)
            entry = self._clients[loop] = _LoopClient(client, guard)
        return entry.client

    async def _send(self, call: Callable[[Any], Awaitable[Any]]) -> Any:
        """Run `call(client)`, retrying what can be retried; raise `ModelError` otherwise."""
        sdk = self._sdk()
        client = self._client()
        attempt = 0
        while True:
            try:
                return await call(client)
            except sdk.APIError as exc:
                if attempt >= self.backoff.retries or not _retryable(sdk, exc):
                    raise self._error(exc) from exc
                delay = self._delay(attempt, exc)
            await asyncio.sleep(delay)
            attempt += 1

    async def _create(self, request: dict[str, Any]) -> Any:
        """Send `request` with plait's retries (each provider defines this)."""
        raise NotImplementedError

    async def _chunks(
        self, request: dict[str, Any], convert: Callable[[Any], Message | None]
    ) -> AsyncGenerator[Message, None]:
        """Open the stream of `request` (retried like any request) and yield what `convert`
        makes of each of its items (None: nothing). A failure after it opened is a
        `ModelError`; the stream is closed however the reading ends."""
        sdk = self._sdk()
        sdk_stream = await self._create(request)
        try:
            async for item in sdk_stream:
                chunk = convert(item)
                if chunk is not None:
                    yield chunk
        except sdk.APIError as exc:
            raise self._error(exc) from exc
        finally:
            # the SDKs' streams close with close(); LiteLLM's wrapper with aclose()
            close = getattr(sdk_stream, "aclose", None) or sdk_stream.close
            await close()

    def _delay(self, attempt: int, exc: Any) -> float:
        """Return the wait before retry `attempt + 1`: full jitter, or the server's word."""
        return self.backoff.wait(attempt, _retry_after(exc))

    def _error(self, exc: Any) -> ModelError:
        """Turn a provider error into a `ModelError` carrying status code and message."""
        sdk, name = self._sdk(), self.provider
        if isinstance(exc, sdk.APITimeoutError):
            return ModelError(f"{name} request timed out after {self.timeout}s ({self.model})")
        if isinstance(exc, sdk.APIConnectionError):
            return ModelError(f"could not reach {name} ({self.model}): {exc.message}")
        status = getattr(exc, "status_code", None)
        text = _provider_message(exc)
        if status is None:
            return ModelError(f"{name} error ({self.model}): {text}")
        return ModelError(f"{name} returned {status} ({self.model}): {text}", status_code=status)


async def _close_at_shutdown(client: Any) -> None:
    """Wait until cancelled (the loop is shutting down), then close `client`."""
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        await client.close()


def _retryable(sdk: ModuleType, exc: Any) -> bool:
    if isinstance(exc, sdk.APITimeoutError):
        return False
    if isinstance(exc, sdk.APIConnectionError):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status == 429 or status >= 500)


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _provider_message(exc: Any) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
    if isinstance(body, str) and body:
        return body
    return str(exc.message)
