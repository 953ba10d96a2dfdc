"""Anthropic Claude models through the official `anthropic` SDK (the Messages API).

```python
model = AnthropicModel("claude-sonnet-4-5", temperature=0)
model = infer_anthropic("claude-sonnet-4-5")  # reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL
```

The `anthropic` package is imported on first use; install it with
`pip install "plait[anthropic]"`.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from plait.errors import UsageError
from plait.messages import Message, ToolCall, ToolInfo, Usage
from plait.models._sdk import SdkChatModel
from plait.models.base import OutputSchema

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import Message as AnthropicMessage
    from anthropic.types import RawMessageStreamEvent

__all__ = ["AnthropicModel", "infer_anthropic"]

_TOOL_CHOICE_TYPES = {"auto": "auto", "required": "any", "none": "none"}
_TOOL_ONLY_OPTIONS = ("tool_choice", "parallel_tool_calls")


class AnthropicModel(SdkChatModel):
    """A chat model served by the Anthropic Messages API.

    One async client is created per event loop on first use and closed when that loop
    shuts down (`asyncio.run` cancels the task that owns it), so the same model works from
    several `asyncio.run` calls. Call `aclose()` to close the current loop's client sooner.

    Retries are plait's, not the SDK's: HTTP 429, 5xx (including 529 "overloaded") and
    connection errors are retried up to `max_retries` times with exponential backoff and
    full jitter (a `Retry-After` header is honoured), each wait at most `retry_max_delay`
    seconds. A timeout is not retried. Any other failure raises `ModelError` with the
    provider's `status_code` and message.

    System messages are joined (blank line between them) into the `system` parameter.
    Tool results become `tool_result` blocks of a user message; consecutive results share
    one message. `tool_choice` "auto", "required" and "none" map to Anthropic's "auto",
    "any" and "none"; another string names the tool to force; a mapping passes through.
    `parallel_tool_calls=False` sets `disable_parallel_tool_use`. Constructor `**options`
    are defaults for every call; per-call options override them and `None` removes one.
    Reported input tokens include cache reads and writes.

    It supports structured output (Claude's structured outputs): an `output_schema` option
    (an `OutputSchema`, which a `ChatModelAgent` with an `output_type` passes) is sent as
    `output_config={"format": {"type": "json_schema", "schema": ...}}`, the schema made
    the way the API takes it (`anthropic.transform_schema`, where the SDK has it). For a
    Claude model without structured outputs, pass `structured_outputs=False`: the agent
    then offers its `final_result` tool instead.

    The API key is `api_key`, else `ANTHROPIC_API_KEY` (or `ANTHROPIC_AUTH_TOKEN`). Without
    one the constructor raises a `UsageError` naming `ANTHROPIC_API_KEY`, unless a base URL is
    set (`base_url` or `ANTHROPIC_BASE_URL`): a compatible server may need no key, so it is
    sent a placeholder.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 1024,
        timeout: float = 60.0,
        max_retries: int = 2,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 8.0,
        structured_outputs: bool = True,
        **options: Any,
    ) -> None:
        """Configure the model; no connection is made until the first call.

        Args:
            model: The model name, e.g. "claude-sonnet-4-5".
            base_url: The API root (without "/v1"); the SDK default when None.
            api_key: The API key; `ANTHROPIC_API_KEY` when None (see above).
            max_tokens: The default cap on output tokens (the API requires one).
            timeout: Seconds allowed for each network operation of a request.
            max_retries: How many times a retryable failure is retried.
            retry_base_delay: The backoff of the first retry, doubled on every retry.
            retry_max_delay: The longest wait between two attempts.
            structured_outputs: Whether the model takes an output schema (see above).
            **options: Default request options, overridden by per-call options.
        """
        self.supports_output_schema = structured_outputs
        if max_tokens <= 0:
            raise UsageError("AnthropicModel: max_tokens must be positive")
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            retry_base_delay=retry_base_delay,
            retry_max_delay=retry_max_delay,
            max_tokens=max_tokens,
            **options,
        )

    provider = "Anthropic"
    sdk_package = "anthropic"
    key_variables = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    base_url_variable = "ANTHROPIC_BASE_URL"
    client_class = "AsyncAnthropic"
    base_error = "AnthropicError"

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Return the model's reply to `messages`, offering `tools`.

        Text blocks are joined into the content; other non-tool blocks (thinking, server
        tool results) are dropped.
        """
        request = self._request(messages, tools, options)
        reply: AnthropicMessage = await self._create(request)
        return _from_message(reply)

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Yield the reply in chunks: usage, text deltas and tool-call deltas (by block index).

        Only opening the stream is retried; a failure after the first event (including an
        `error` event) raises `ModelError`.
        """
        request = self._request(messages, tools, options)
        request["stream"] = True
        async with aclosing(self._chunks(request, _from_event)) as chunks:
            async for chunk in chunks:
                yield chunk

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolInfo], options: Mapping[str, Any]
    ) -> dict[str, Any]:
        request = self._merged(options)
        output = request.pop("output_schema", None)
        if isinstance(output, OutputSchema):
            config = dict(request.get("output_config") or {})
            config["format"] = {"type": "json_schema", "schema": _output_schema(output.schema)}
            request["output_config"] = config
        system, request["messages"] = _to_anthropic(messages)
        if system:
            prefix = request.get("system")
            request["system"] = f"{prefix}\n\n{system}" if isinstance(prefix, str) else system
        if tools:
            request["tools"] = [_tool_schema(t) for t in tools]
            _apply_tool_choice(request)
        else:
            for key in _TOOL_ONLY_OPTIONS:
                request.pop(key, None)
        return request

    async def _create(self, request: dict[str, Any]) -> Any:
        """Send `request` with plait's retries; raise `ModelError` when it fails."""

        async def create(client: AsyncAnthropic) -> Any:
            arguments = _sdk_arguments(type(client.messages), request)
            try:
                return await client.messages.create(**arguments)
            except TypeError as exc:  # the SDK's way of saying there is no API key
                if "authentication" not in str(exc):
                    raise
                raise UsageError(
                    f"AnthropicModel needs an api_key or ANTHROPIC_API_KEY: {exc}"
                ) from exc

        return await self._send(create)


def _sdk_arguments(messages_type: type[Any], request: dict[str, Any]) -> dict[str, Any]:
    """Return `request` as `create` arguments; options it does not name go in `extra_body`.

    Recent SDKs no longer name some request fields (`temperature`, `top_p`, ...) as
    parameters, so those are sent through `extra_body`.
    """
    named = inspect.signature(messages_type.create).parameters
    arguments = {k: v for k, v in request.items() if k in named}
    extra = {k: v for k, v in request.items() if k not in named}
    if extra:
        arguments["extra_body"] = {**extra, **(arguments.get("extra_body") or {})}
    return arguments


# --- conversion -------------------------------------------------------------------------------


def _to_anthropic(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Split plait messages into the system text and Anthropic messages."""
    system: list[str] = []
    converted: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            system.append(message.content)
        elif message.role == "tool":
            block = _tool_result(message)
            # Only tool results make user messages with list content: join consecutive ones.
            if (
                converted
                and converted[-1]["role"] == "user"
                and isinstance(converted[-1]["content"], list)
            ):
                converted[-1]["content"].append(block)
            else:
                converted.append({"role": "user", "content": [block]})
        elif message.role == "assistant" and message.tool_calls:
            converted.append({"role": "assistant", "content": _assistant_blocks(message)})
        else:
            converted.append({"role": message.role, "content": message.content})
    return "\n\n".join(system), converted


def _tool_result(message: Message) -> dict[str, Any]:
    if message.tool_call_id is None:
        raise UsageError("AnthropicModel: a tool message needs the tool_call_id it answers")
    return {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call)}
        )
    return blocks


def _tool_input(call: ToolCall) -> dict[str, Any]:
    """Parse a tool call's JSON arguments into the object Anthropic expects as `input`."""
    if not call.arguments.strip():
        return {}
    try:
        value = json.loads(call.arguments)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"AnthropicModel: the arguments of tool call {call.id!r} are not valid JSON: {exc}"
        ) from exc
    if not isinstance(value, dict):
        raise UsageError(
            f"AnthropicModel: the arguments of tool call {call.id!r} are not a JSON object"
        )
    return value


def _output_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return an output schema as the Messages API takes it (the SDK's `transform_schema`
    closes every object and moves unsupported constraints into descriptions)."""
    try:
        from anthropic import transform_schema
    except ImportError:  # an SDK from before structured outputs: send it as it is
        return schema
    transformed: dict[str, Any] = transform_schema(schema)
    return transformed


def _tool_schema(info: ToolInfo) -> dict[str, Any]:
    return {"name": info.name, "description": info.description, "input_schema": info.parameters}


def _apply_tool_choice(request: dict[str, Any]) -> None:
    """Map `tool_choice` and `parallel_tool_calls` onto Anthropic's `tool_choice` in place."""
    choice = request.pop("tool_choice", None)
    if isinstance(choice, str):
        kind = _TOOL_CHOICE_TYPES.get(choice)
        choice = {"type": kind} if kind else {"type": "tool", "name": choice}
    parallel = request.pop("parallel_tool_calls", None)
    if parallel is False:
        choice = dict(choice) if choice is not None else {"type": "auto"}
        if choice.get("type") != "none":
            choice["disable_parallel_tool_use"] = True
    if choice is not None:
        request["tool_choice"] = choice


def _input_tokens(usage: Any) -> int:
    """Return input tokens including cache reads and writes (absent fields count as 0)."""
    names = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(getattr(usage, name, None) or 0 for name in names)


def _from_message(reply: AnthropicMessage) -> Message:
    """Convert a whole Messages API reply to a plait message."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in reply.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input)))
    usage = Usage(input_tokens=_input_tokens(reply.usage), output_tokens=reply.usage.output_tokens)
    return Message.assistant("".join(texts), calls, usage=usage)


def _from_event(event: RawMessageStreamEvent) -> Message | None:
    """Convert one stream event to a plait chunk, or None when it carries nothing."""
    if event.type == "message_start":
        usage = Usage(input_tokens=_input_tokens(event.message.usage))
        return Message.assistant(usage=usage)
    if event.type == "message_delta":
        return Message.assistant(usage=Usage(output_tokens=event.usage.output_tokens))
    if event.type == "content_block_start":
        block = event.content_block
        if block.type == "tool_use":
            call = ToolCall(id=block.id, name=block.name, arguments="", index=event.index)
            return Message.assistant(tool_calls=(call,))
        if block.type == "text" and block.text:
            return Message.assistant(block.text)
        return None
    if event.type == "content_block_delta":
        delta = event.delta
        if delta.type == "text_delta":
            return Message.assistant(delta.text)
        if delta.type == "input_json_delta":
            call = ToolCall(id="", name="", arguments=delta.partial_json, index=event.index)
            return Message.assistant(tool_calls=(call,))
    return None


# --- infer ------------------------------------------------------------------------------------


def infer_anthropic(spec_model: str) -> AnthropicModel:
    """Build an `AnthropicModel` for the model part of an "anthropic:<model>" spec.

    The API key and base URL come from `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL`.

    Raises:
        UsageError: The model name is empty or the anthropic package is missing.
    """
    name = spec_model.strip()
    if not name:
        raise UsageError('bad model spec: expected "anthropic:<model>", e.g. "anthropic:claude"')
    return AnthropicModel(
        name,
        api_key=os.environ.get("ANTHROPIC_API_KEY") or None,
        base_url=os.environ.get("ANTHROPIC_BASE_URL") or None,
    )
