"""Pricing a model call: the spec of plait's model classes, `genai-prices`' bundled data,
a model's own `price`, and 0 (unpriced) for a model nobody knows."""

from __future__ import annotations

import pytest

from plait.errors import UsageError
from plait.messages import Usage
from plait.models.anthropic import AnthropicModel
from plait.models.litellm import LiteLLMModel
from plait.models.openai import OpenAIModel
from plait.models.pricing import Price, model_spec, price
from plait.testing import FunctionModel, reply

MILLION_IN = Usage(input_tokens=1_000_000, output_tokens=0)


def test_plait_s_models_are_named_by_their_spec() -> None:
    assert model_spec(OpenAIModel("gpt-4o", api_key="k")) == "openai:gpt-4o"
    assert model_spec(AnthropicModel("claude-3-5-haiku-latest", api_key="k")) == (
        "anthropic:claude-3-5-haiku-latest"
    )
    assert model_spec(LiteLLMModel("openai/gpt-4o")) == "litellm:openai/gpt-4o"
    assert model_spec(FunctionModel(lambda m, t: reply("x"))) == "FunctionModel"


def test_a_listed_model_is_priced_from_genai_prices_data() -> None:
    cost, priced = price(OpenAIModel("gpt-4o", api_key="k"), MILLION_IN)
    assert priced and cost > 0
    same = price(LiteLLMModel("openai/gpt-4o"), MILLION_IN)
    assert same == Price(cost, True)  # LiteLLM's "<provider>/<model>" is looked up the same
    more = price(OpenAIModel("gpt-4o", api_key="k"), Usage(input_tokens=2_000_000))
    assert more.cost == pytest.approx(2 * cost)


def test_an_unknown_model_costs_nothing_and_says_so() -> None:
    assert price(OpenAIModel("no-such-model-xyz", api_key="k"), MILLION_IN) == Price(0.0, False)
    assert price(FunctionModel(lambda m, t: reply("x")), MILLION_IN) == Price(0.0, False)


def test_a_model_that_prices_itself_is_taken_at_its_word() -> None:
    class Flat(FunctionModel):
        def price(self, usage: Usage) -> float:
            return usage.total_tokens * 1e-6

    model = Flat(lambda m, t: reply("x"))
    assert price(model, Usage(input_tokens=3, output_tokens=2)) == (pytest.approx(5e-6), True)

    class Wrong(FunctionModel):
        def price(self, usage: Usage) -> object:
            return "free"

    with pytest.raises(UsageError, match="price\\(\\) returned 'free'"):
        price(Wrong(lambda m, t: reply("x")), MILLION_IN)
