"""bench/protocol_streaming.py still runs (no timing is asserted here)."""

from __future__ import annotations

import pytest

from tests.test_bench import _a_figure, _quick


def test_protocol_streaming_benchmark_reports_every_protocol_and_size() -> None:
    pytest.importorskip("a2a")
    pytest.importorskip("ag_ui")
    pytest.importorskip("openai")
    figures = _quick("protocol_streaming.py")
    rows = figures["rows"]
    assert sorted({(r["protocol"], r["tokens"]) for r in rows}) == [
        (protocol, tokens) for protocol in ("a2a", "agui", "openai") for tokens in (20, 40, 80)
    ]
    for row in rows:
        for key in ("seconds", "events", "us_per_token"):
            assert _a_figure(row[key]), (row["protocol"], key)
    assert all(_a_figure(figures["growth"][p]) for p in ("a2a", "agui", "openai"))
