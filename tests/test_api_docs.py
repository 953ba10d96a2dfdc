"""scripts/api_docs.py builds the API reference of the public modules, and fails on a warning."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("api_docs", ROOT / "scripts" / "api_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_of_every_public_module_is_built(tmp_path: Path) -> None:
    api_docs = _script()
    assert api_docs.main([str(tmp_path)]) == 0
    for name in api_docs.MODULES:
        assert (tmp_path / f"{name.replace('.', '/')}.html").is_file(), name
    index = (tmp_path / "index.html").read_text()
    for name in api_docs.MODULES:  # the index leads to every module
        assert f'href="{name.replace(".", "/")}.html"' in index, name
    models = (tmp_path / "plait" / "models.html").read_text()
    assert 'id="OpenAIModel"' in models and 'id="FallbackModel"' in models  # lazy exports
    assert 'id="Runner"' in (tmp_path / "plait.html").read_text()


def test_a_name_that_does_not_resolve_fails_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api_docs = _script()
    broken = types.ModuleType("plait_broken_face", "A face naming what it does not hold.")
    broken.__all__ = ["Missing"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "plait_broken_face", broken)
    monkeypatch.setattr(api_docs, "MODULES", ("plait.errors", "plait_broken_face"))
    assert api_docs.main([str(tmp_path)]) == 1
    assert (
        "'Missing' in plait_broken_face.__all__, but it does not resolve" in capsys.readouterr().err
    )


def test_a_module_that_does_not_import_fails_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api_docs = _script()
    monkeypatch.setattr(api_docs, "MODULES", ("plait.no_such_module",))
    assert api_docs.main([str(tmp_path)]) == 1
    assert "pdoc failed: ModuleNotFoundError" in capsys.readouterr().err
