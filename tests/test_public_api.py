"""The public surface: a sorted, complete __all__, lazy submodules, a fast import."""

from __future__ import annotations

import subprocess
import sys

import pytest

import plait


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert plait.__all__ == sorted(plait.__all__)
    for name in plait.__all__:
        assert getattr(plait, name) is not None, name


def test_every_exported_class_is_plaits_own_and_listed() -> None:
    assert set(plait.__all__) <= set(dir(plait))
    for name in plait.__all__:
        value = getattr(plait, name)
        if isinstance(value, str):  # START and END
            continue
        module = getattr(value, "__module__", None) or value.__name__
        assert module.startswith("plait"), name


def test_unknown_attributes_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = plait.Nope  # type: ignore[attr-defined]


def test_submodules_are_attributes_and_import_plait_stays_light() -> None:
    code = (
        "import sys, plait\n"
        "assert 'pydantic' not in sys.modules, 'import plait must not import pydantic'\n"
        "assert 'plait.testing' not in sys.modules\n"
        "plait.testing.ScriptedModel\n"
        "plait.models.ChatModel\n"
        "plait.errors.PlaitError\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
