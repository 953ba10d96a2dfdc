"""The benchmark scripts still run (no timing is asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _quick(script: str, *args: str) -> dict[str, Any]:
    """Run `bench/<script> --quick` and return the figures of its last line."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--quick", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def test_core_benchmark_runs_and_reports_every_figure() -> None:
    figures = _quick("core.py")
    for key in ("w1_us", "w2_us", "step_us", "w3_runs_per_s", "w5_chunks_per_s", "import_ms"):
        assert figures[key] > 0, key


def test_local_model_benchmark_runs_and_reports_its_figures() -> None:
    figures = _quick("local_model.py")
    for key in ("load_s", "prompt_tok_s", "free_tok_s", "grammar_tok_s"):
        assert figures[key] > 0, key
    assert figures["tool_calls"]["queries"] == 2 and figures["routing"]["queries"] == 2


def test_reliability_benchmark_runs_and_reports_every_figure() -> None:
    figures = _quick("reliability.py")
    for name in ("memory", "sqlite", "postgres", "redis"):
        assert figures["load"][name]["errors"] == 0, name
    assert figures["memory"]["runs"] == 200
    for name, took in figures["faults"].items():
        assert isinstance(took, float), (name, took)


def test_server_benchmark_runs_and_reports_plait_figures() -> None:
    figures = _quick("server.py", "--no-peer")  # ADK's environment is not needed
    for key in ("runs_per_s", "ttfe_p50_ms", "ttfe_p99_ms", "peak_rss_mb"):
        assert figures[f"plait_sqlite_{key}"] > 0, key
    assert figures["plait_sqlite_failed_runs"] == 0
    assert figures["peer_skipped"] == "--no-peer"
