"""What a model call cost: a model's spec (`"openai:gpt-4o"`) and the price of its usage.

`model_spec(model)` names a model as `plait.models.infer` takes it: `"openai:<model>"`,
`"anthropic:<model>"`, `"litellm:<provider>/<model>"`, `"local"`; a model of another class
is named by its `spec` attribute when it has one (a string), else by its class.

`price(model, usage)` is the call's cost in US dollars and whether it is known:

- a model with a `price(usage) -> float` method prices itself (a fixed rate, a contract);
- otherwise the `genai-prices` package's bundled data prices it, from the provider and model
  name of its spec. The data is the one installed with the package: nothing is fetched
  while plait runs (update prices by upgrading `genai-prices`);
- a model neither knows (a test model, an unlisted name, `genai-prices` not installed)
  costs 0, and `priced` is False so a ledger can say so.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import NamedTuple

from plait.errors import UsageError
from plait.messages import Usage

__all__ = ["Price", "model_spec", "price"]

#: The spec prefix of each of plait's model classes.
_PROVIDERS = {
    "OpenAIModel": "openai",
    "AnthropicModel": "anthropic",
    "LiteLLMModel": "litellm",
}


class Price(NamedTuple):
    """A call's cost in US dollars, and whether a price was known (else the cost is 0)."""

    cost: float
    priced: bool


def model_spec(model: object) -> str:
    """Return the spec naming `model` (`"openai:gpt-4o-mini"`; see the module docstring)."""
    given = getattr(model, "spec", None)
    if isinstance(given, str) and given:
        return given
    kind = type(model).__name__
    name = getattr(model, "model", None)
    provider = _PROVIDERS.get(kind)
    if provider is not None and isinstance(name, str) and name:
        return f"{provider}:{name}"
    if kind == "LocalModel":
        return "local"
    return kind


def price(model: object, usage: Usage, *, at: datetime | None = None) -> Price:
    """Return what a call of `model` that used `usage` cost (see the module docstring); `at`
    is when it was made (prices change over time).

    Raises:
        UsageError: The model's own `price` returned something other than a finite number
            of 0 or more.
    """
    own = getattr(model, "price", None)
    if callable(own):
        cost = own(usage)
        if isinstance(cost, bool) or not isinstance(cost, int | float) or not cost >= 0:
            raise UsageError(
                f"model {type(model).__name__}: price() returned {cost!r}, expected a "
                "number of US dollars, 0 or more"
            )
        if not math.isfinite(cost):
            raise UsageError(f"model {type(model).__name__}: price() returned {cost!r}")
        return Price(float(cost), True)
    return _listed(model_spec(model), usage, at)


def _listed(spec: str, usage: Usage, at: datetime | None) -> Price:
    """Return the price `genai-prices` lists for a call of the model `spec` (0, unpriced,
    when it lists none)."""
    provider, sep, name = spec.partition(":")
    if not sep or not name:
        return Price(0.0, False)
    if provider == "litellm":  # "litellm:<provider>/<model>"
        provider, _, name = name.partition("/")
        if not name:
            return Price(0.0, False)
    try:
        from genai_prices import Usage as Tokens
        from genai_prices import calc_price
    except ImportError:
        return Price(0.0, False)
    tokens = Tokens(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    try:
        found = calc_price(tokens, name, provider_id=provider, genai_request_timestamp=at)
    except LookupError:
        return Price(0.0, False)
    return Price(float(found.total_price), True)
