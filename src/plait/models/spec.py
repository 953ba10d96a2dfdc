"""Model specs: `infer` builds a model from a string such as "openai:gpt-4o-mini", and
`resolve_model` accepts a model or a spec wherever plait takes a model.

```python
model = infer("anthropic:claude-sonnet-4-5")  # reads ANTHROPIC_API_KEY
model = resolve_model("openai:gpt-4o-mini", owner="agent 'helper'")
```

Every way a spec can fail before a model is made (no spec, an unknown provider, a provider
whose extra is not installed, a missing API key) is a one-line `UsageError` that names the
environment variable to set or the `pip install` to run.
"""

from __future__ import annotations

import os
import reprlib

from plait.errors import UsageError
from plait.models.base import ChatModel

__all__ = ["infer", "resolve_model"]

_PROVIDERS = ("openai", "anthropic", "litellm")
_SPECS = '"openai:<model>", "anthropic:<model>", "litellm:<model>" or "local"'


def infer(spec: str | None = None) -> ChatModel:
    """Build a model from a spec such as "openai:gpt-4o-mini".

    Specs: "openai:<model>" (reads `OPENAI_API_KEY`, `OPENAI_BASE_URL`),
    "anthropic:<model>" (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`), "litellm:<model>"
    (LiteLLM's own variables, read when it calls the provider) and "local" or
    "local:<path to a GGUF file>" (the embedded model; `PLAIT_LOCAL_MODEL` names a file too).

    Args:
        spec: A spec as above; when None, the `PLAIT_MODEL` environment variable.

    Raises:
        UsageError: The spec is missing or malformed, its provider is unknown, its extra is
            not installed, or its API key is not set. The message is one line.
    """
    if spec is None:
        spec = os.environ.get("PLAIT_MODEL")
        if not spec:
            raise UsageError(
                'no model given: pass a spec like "openai:gpt-4o-mini" or set PLAIT_MODEL'
            )
    provider, sep, name = spec.strip().partition(":")
    provider, name = provider.strip().lower(), name.strip()
    if provider == "local":
        from plait.models.local import LocalModel

        return LocalModel(name or None)
    if not sep or not name or provider not in _PROVIDERS:
        problem = f"unknown model provider {provider!r} in" if sep and name else "bad model spec"
        raise UsageError(
            f'{problem} {spec!r}: expected {_SPECS}, e.g. "openai:gpt-4o" '
            '(other providers through LiteLLM: "litellm:<provider>/<model>")'
        )
    if provider == "anthropic":
        from plait.models.anthropic import infer_anthropic

        return infer_anthropic(name)
    if provider == "litellm":
        from plait.models.litellm import LiteLLMModel

        return LiteLLMModel(name)
    from plait.models.openai import OpenAIModel

    return OpenAIModel(
        name,
        api_key=os.environ.get("OPENAI_API_KEY") or None,
        base_url=os.environ.get("OPENAI_BASE_URL") or None,
    )


def resolve_model(model: ChatModel | str, *, owner: str) -> ChatModel:
    """Return `model`, or the model a spec string names (see `infer`).

    Args:
        model: A `ChatModel` (an instance with `generate` and `stream`) or a spec string.
        owner: What takes the model, for the error message, e.g. "agent 'helper'".

    Raises:
        UsageError: `model` is neither, or the spec cannot be built; the message names
            `owner` and is one line.
    """
    if isinstance(model, str):
        try:
            return infer(model)
        except UsageError as exc:
            raise UsageError(f"{owner}: {exc}") from exc
    methods = (getattr(model, "generate", None), getattr(model, "stream", None))
    if not isinstance(model, type) and all(callable(m) for m in methods):
        return model
    raise UsageError(
        f"{owner} needs a model: a ChatModel (with async generate and stream) or a spec "
        f'string such as "openai:gpt-4o-mini", not {_describe(model)}'
    )


def _describe(value: object) -> str:
    """Return the type and a short, one-line repr of `value`."""
    text = " ".join(reprlib.repr(value).split())
    if value is None:
        return text
    if isinstance(value, type):
        return f"the class {value.__name__} (make an instance)"
    return f"{type(value).__name__} {text}"
