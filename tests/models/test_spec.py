"""`infer` and `resolve_model`: specs, and the one-line errors of a model that cannot be made."""

from __future__ import annotations

import sys

import pytest

from plait.errors import UsageError
from plait.models import OpenAIModel, infer, resolve_model
from plait.testing import ScriptedModel

_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
)


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _one_line(error: pytest.ExceptionInfo[UsageError]) -> str:
    message = str(error.value)
    assert message and "\n" not in message
    return message


@pytest.mark.parametrize(
    ("spec", "variable"),
    [("openai:gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic:claude-x", "ANTHROPIC_API_KEY")],
)
def test_a_missing_key_names_the_variable_to_set(spec: str, variable: str) -> None:
    with pytest.raises(UsageError) as info:
        infer(spec)
    assert f"set {variable}" in _one_line(info)


@pytest.mark.parametrize(
    ("spec", "module", "extra"),
    [
        ("openai:gpt-4o-mini", "openai", "openai"),
        ("anthropic:claude-x", "anthropic", "anthropic"),
        ("litellm:openai/gpt-4o-mini", "litellm", "litellm"),
        ("local", "llama_cpp", "local"),
    ],
)
def test_a_missing_sdk_names_the_pip_install(
    monkeypatch: pytest.MonkeyPatch, spec: str, module: str, extra: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setitem(sys.modules, module, None)  # `import` fails as if it were absent
    with pytest.raises(UsageError) as info:
        resolve_model(spec, owner="agent 'helper'")
    message = _one_line(info)
    assert message.startswith("agent 'helper': ")
    assert f'pip install "plait[{extra}]"' in message


@pytest.mark.parametrize("spec", ["mistral:large", "gpt:4o"])
def test_an_unknown_provider_names_the_accepted_specs(spec: str) -> None:
    with pytest.raises(UsageError) as info:
        infer(spec)
    message = _one_line(info)
    assert f"unknown model provider {spec.split(':')[0]!r}" in message
    for accepted in ('"openai:<model>"', '"anthropic:<model>"', '"litellm:<model>"', '"local"'):
        assert accepted in message


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "openai", "", "  "])
def test_a_malformed_spec_names_the_expected_form(spec: str) -> None:
    with pytest.raises(UsageError, match='"openai:<model>"'):
        infer(spec)


def test_no_spec_and_no_plait_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLAIT_MODEL", raising=False)
    with pytest.raises(UsageError, match="PLAIT_MODEL"):
        infer()


def test_resolve_model_builds_a_spec_and_passes_a_model_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    built = resolve_model("openai:gpt-4o-mini", owner="agent 'a'")
    assert isinstance(built, OpenAIModel) and built.model == "gpt-4o-mini"
    scripted = ScriptedModel([])
    assert resolve_model(scripted, owner="agent 'a'") is scripted


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (3, "not int 3"),
        (None, "not None"),
        (ScriptedModel, "not the class ScriptedModel (make an instance)"),
    ],
)
def test_resolve_model_rejects_what_is_not_a_model(value: object, shown: str) -> None:
    with pytest.raises(UsageError) as info:
        resolve_model(value, owner="agent 'a'")  # type: ignore[arg-type]
    message = _one_line(info)
    assert message.startswith("agent 'a' needs a model")
    assert message.endswith(shown)
