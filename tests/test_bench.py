"""The benchmark scripts still run (no timing is asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_core_benchmark_runs_and_reports_every_figure() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "core.py"), "--quick"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    for key in ("w1_us", "w2_us", "step_us", "w3_runs_per_s", "w5_chunks_per_s", "import_ms"):
        assert figures[key] > 0, key
