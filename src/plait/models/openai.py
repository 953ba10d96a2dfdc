"""OpenAI chat models (and OpenAI-compatible servers) through the official `openai` SDK.

```python
model = OpenAIModel("gpt-4o-mini", temperature=0)  # reads OPENAI_API_KEY
model = OpenAIModel("llama3", base_url="http://localhost:8080/v1")  # a server that needs no key
```

`plait.models.infer("openai:gpt-4o-mini")` builds one from a spec (and `OPENAI_BASE_URL`).

The `openai` package is imported on first use; install it with `pip install "plait[openai]"`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from plait.errors import ModelError, UsageError
from plait.messages import Message, ToolCall, ToolInfo, Usage
from plait.models._sdk import SdkChatModel
from plait.models.base import OutputSchema

if TYPE_CHECKING:
    from openai.types import CompletionUsage
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

__all__ = ["OpenAIModel"]

_TOOL_CHOICE_MODES = frozenset({"auto", "none", "required"})
_TOOL_ONLY_OPTIONS = ("tool_choice", "parallel_tool_calls")


class OpenAIModel(SdkChatModel):
    """A chat model served by the OpenAI Chat Completions API or a compatible server.

    One async client is created per event loop on first use and closed when that loop
    shuts down (`asyncio.run` cancels the task that owns it), so the same model works from
    several `asyncio.run` calls. Call `aclose()` to close the current loop's client sooner.

    Retries are plait's, not the SDK's: HTTP 429, 5xx and connection errors are retried up
    to `max_retries` times with exponential backoff and full jitter (a `Retry-After` header
    is honoured), each wait at most `retry_max_delay` seconds. A timeout is not retried:
    `timeout` bounds the wait for each network operation and a timed-out request has
    already cost its time. Any other failure raises `ModelError` with the provider's
    `status_code` and message.

    Constructor `**options` (`temperature`, `max_tokens`, `tool_choice`, ...) are defaults
    for every call; per-call options override them and a per-call `None` removes one.
    `tool_choice` and `parallel_tool_calls` are sent only when tools are offered. A
    `tool_choice` of "auto", "none" or "required" passes through; another string names
    the tool to force. Message `name`s are not sent (OpenAI restricts their characters).

    It supports structured output: an `output_schema` option (an `OutputSchema`, which a
    `ChatModelAgent` with an `output_type` passes) is sent as the response format
    `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`.

    The API key is `api_key`, else `OPENAI_API_KEY`. Without either the constructor raises a
    `UsageError` naming `OPENAI_API_KEY`, unless a base URL is set (`base_url` or
    `OPENAI_BASE_URL`): a local OpenAI-compatible server often needs no key, so it is sent
    a placeholder.
    """

    provider = "OpenAI"
    sdk_package = "openai"
    supports_output_schema = True
    key_variables = ("OPENAI_API_KEY",)
    base_url_variable = "OPENAI_BASE_URL"
    client_class = "AsyncOpenAI"
    base_error = "OpenAIError"

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Return the model's reply to `messages`, offering `tools`.

        When the model refuses, the reply's content is the refusal text (OpenAI sends it
        in `refusal` with no content), so a refusal reads like any other answer.
        """
        request = self._request(messages, tools, options)
        completion: ChatCompletion = await self._create(request)
        return _from_completion(completion, self.provider)

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Yield the reply in chunks: text deltas, tool-call deltas (by index), then usage.

        Only opening the stream is retried; a failure after the first chunk raises
        `ModelError`. Refusal deltas are yielded as text.
        """
        request = self._request(messages, tools, options)
        request["stream"] = True
        request["stream_options"] = {**request.get("stream_options", {}), "include_usage": True}
        async with aclosing(self._chunks(request, _from_chunk)) as chunks:
            async for chunk in chunks:
                yield chunk

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolInfo], options: Mapping[str, Any]
    ) -> dict[str, Any]:
        return _chat_request(self._merged(options), messages, tools)

    async def _create(self, request: dict[str, Any]) -> Any:
        """Send `request` with plait's retries; raise `ModelError` when it fails."""
        return await self._send(lambda client: client.chat.completions.create(**request))


# --- conversion -------------------------------------------------------------------------------


def _chat_request(
    request: dict[str, Any], messages: Sequence[Message], tools: Sequence[ToolInfo]
) -> dict[str, Any]:
    """Add the messages and tools to `request` (tool-only options only with tools) and
    turn an `output_schema` into the response format."""
    request["messages"] = [_to_openai(m) for m in messages]
    output = request.pop("output_schema", None)
    if isinstance(output, OutputSchema):
        json_schema: dict[str, Any] = {"name": output.name, "schema": output.schema}
        if output.description:
            json_schema["description"] = output.description
        json_schema["strict"] = output.strict
        request["response_format"] = {"type": "json_schema", "json_schema": json_schema}
    if tools:
        request["tools"] = [_tool_schema(t) for t in tools]
        if "tool_choice" in request:
            request["tool_choice"] = _tool_choice(request["tool_choice"])
    else:
        for key in _TOOL_ONLY_OPTIONS:
            request.pop(key, None)
    return request


def _to_openai(message: Message) -> dict[str, Any]:
    """Convert a plait message to an OpenAI chat message."""
    if message.role == "tool":
        if message.tool_call_id is None:
            raise UsageError("OpenAIModel: a tool message needs the tool_call_id it answers")
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": tc.arguments or "{}"},
                }
                for tc in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _tool_schema(info: ToolInfo) -> dict[str, Any]:
    function = {"name": info.name, "description": info.description, "parameters": info.parameters}
    return {"type": "function", "function": function}


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str) and choice not in _TOOL_CHOICE_MODES:
        return {"type": "function", "function": {"name": choice}}
    return choice


def _usage(usage: CompletionUsage | None) -> Usage | None:
    if usage is None:
        return None
    return Usage(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens)


def _from_completion(completion: ChatCompletion, provider: str = "OpenAI") -> Message:
    """Convert a whole completion (its first choice) to a plait message.

    Duck-typed enough for LiteLLM's OpenAI-shaped objects, which may lack `refusal`.
    """
    if not completion.choices:
        raise ModelError(f"{provider} returned a completion without choices")
    reply = completion.choices[0].message
    calls = tuple(
        ToolCall(id=tc.id, name=tc.function.name, arguments=tc.function.arguments)
        for tc in reply.tool_calls or ()
        if tc.type == "function"
    )
    text = reply.content or getattr(reply, "refusal", None) or ""
    return Message.assistant(text, calls, usage=_usage(getattr(completion, "usage", None)))


def _from_chunk(chunk: ChatCompletionChunk) -> Message | None:
    """Convert one streamed chunk to a plait chunk, or None when it carries nothing."""
    text = ""
    calls: tuple[ToolCall, ...] = ()
    if chunk.choices:
        delta = chunk.choices[0].delta
        text = (delta.content or "") + (getattr(delta, "refusal", None) or "")
        calls = tuple(
            ToolCall(
                id=tc.id or "",
                name=(tc.function.name if tc.function else None) or "",
                arguments=(tc.function.arguments if tc.function else None) or "",
                index=tc.index,
            )
            for tc in delta.tool_calls or ()
        )
    usage = _usage(getattr(chunk, "usage", None))
    if not text and not calls and usage is None:
        return None
    return Message(role="assistant", content=text, tool_calls=calls, usage=usage)
