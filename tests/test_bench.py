"""The benchmark scripts still run (no timing is asserted here)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PG_DSN = os.environ.get("PLAIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("PLAIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def _require_servers() -> None:
    """Skip, saying why, unless the test PostgreSQL and Redis servers both answer (the
    benchmarks read the same variables)."""
    psycopg = pytest.importorskip("psycopg")
    redis = pytest.importorskip("redis")
    try:
        psycopg.connect(PG_DSN, connect_timeout=5).close()
    except psycopg.Error as exc:
        pytest.skip(f"no PostgreSQL server at {PG_DSN} (PLAIT_TEST_POSTGRES_DSN): {exc}")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        pytest.skip(f"no Redis server at {REDIS_URL} (PLAIT_TEST_REDIS_URL): {exc}")
    finally:
        client.close()


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


def _a_figure(value: Any) -> bool:
    """Whether `value` is a figure: a finite number (a difference of two timings may come
    out at or below zero on a busy machine, so its sign is not checked)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def test_core_benchmark_runs_and_reports_every_figure() -> None:
    figures = _quick("core.py")
    for key in ("w1_us", "w2_us", "w3_runs_per_s", "w5_chunks_per_s"):
        assert figures[key] > 0, key  # a time or a rate
    for key in ("step_us", "import_ms", "import_core_ms"):
        assert _a_figure(figures[key]), key  # a difference of two timings


def test_local_model_benchmark_runs_and_reports_its_figures() -> None:
    figures = _quick("local_model.py")
    for key in ("load_s", "prompt_tok_s", "free_tok_s", "grammar_tok_s"):
        assert figures[key] > 0, key
    assert figures["tool_calls"]["queries"] == 2 and figures["routing"]["queries"] == 2


def test_reliability_benchmark_runs_and_reports_every_figure() -> None:
    _require_servers()
    figures = _quick("reliability.py")
    for name in ("memory", "sqlite", "postgres", "redis"):
        if figures["load"][name] == "skipped":  # the server went away while it ran
            pytest.skip(f"the benchmark found no {name} server")
        assert figures["load"][name]["errors"] == 0, name
    assert figures["memory"]["runs"] == 200
    for name, took in figures["faults"].items():
        assert isinstance(took, float), (name, took)


def test_server_benchmark_runs_and_reports_plait_figures() -> None:
    figures = _quick("server.py", "--no-peer")  # ADK's environment is not needed
    for key in ("runs_per_s", "ttfe_p50_ms", "ttfe_p99_ms", "peak_rss_mb"):
        assert figures[f"plait_sqlite_{key}"] > 0, key
    assert figures["plait_sqlite_failed_runs"] == 0
    for key in ("runs_per_s", "server_cpu_us_per_run"):  # the Agent Protocol's stream route
        assert _a_figure(figures[f"plait_ap_sqlite_{key}"]), key
    assert figures["peer_skipped"] == "--no-peer"


def test_server_turns_benchmark_measures_each_server_it_is_given() -> None:
    serve = [f"--serve=ap={ROOT}:ap", f"--serve=v1={ROOT}:v1"]
    figures = _quick("server_turns.py", *serve)
    assert set(figures) == {"ap", "v1"}
    for (row,) in figures.values():
        assert row["runs_per_s"] > 0
        assert _a_figure(row["server_cpu_us_per_run"])


def test_server_benchmark_measures_plait_next_to_the_floor() -> None:
    figures = _quick("server.py", "--floor")  # one round of each: the bare app, then plait
    for name in ("bare", "plait"):
        for key in ("runs_per_s", "server_cpu_us_per_run"):
            assert _a_figure(figures[f"{name}_{key}"]), (name, key)
    assert len(figures["floor_rounds"]["plait"]) == figures["rounds"] == 1
    assert _a_figure(figures["ratio_server_cpu"]) and _a_figure(figures["ratio_runs_per_s"])


def test_cli_start_benchmark_runs_and_reports_its_figures() -> None:
    figures = _quick("cli_start.py")
    for key in ("python_s", "help_s", "version_s", "run_help_s"):
        assert figures[key] > 0, key


def test_ctrl_c_benchmark_runs_every_case() -> None:
    pytest.importorskip("pexpect")
    figures = _quick("ctrl_c.py")  # each case checks the exit code is 130
    assert set(figures["seconds"]) == {
        "chat prompt",
        "answer prompt",
        "tool call",
        "model call",
        "stuck thread",
        "serve",
    }


def test_once_cost_benchmark_runs_and_reports_every_figure() -> None:
    _require_servers()
    figures = _quick("once_cost.py")
    for store in ("sqlite", "postgres"):
        for durability in ("exit", "step"):
            prefix = f"{store}_{durability}"
            assert figures[f"{prefix}_plain_call_us"] > 0, prefix
            assert f"{prefix}_once_extra_per_call_us" in figures, prefix


def test_checkpoints_benchmark_runs_and_reports_plait_figures() -> None:
    _require_servers()
    figures = _quick("checkpoints.py")
    for store in ("memory", "sqlite", "postgres", "postgres_flushed"):
        assert _a_figure(figures[f"plait_{store}_per_step_us"]), store
    # the floor: a run's writes replayed alone, through the store and with psycopg alone
    for key in (
        "plait_sqlite_writes_alone_per_step_us",
        "plait_postgres_writes_alone_per_step_us",
        "postgres_bare_statement_per_step_us",
    ):
        assert figures[key] > 0, key


def test_quota_load_benchmark_runs_and_stays_within_one_call() -> None:
    _require_servers()
    figures = _quick("quota_load.py")
    assert figures["runs"] == 20 and figures["model_calls"] > 0
    assert figures["spent"] > 0 and _a_figure(figures["seconds"])
    assert figures["overspend"] <= figures["largest_call"]
    assert sum(figures["ended"].values()) == 20


def test_temporal_overhead_benchmark_runs_and_reports_its_figures() -> None:
    pytest.importorskip("temporalio")
    figures = _quick("temporal_overhead.py")
    for key in ("plain_step_ms", "temporal_step_ms", "bare_temporal_activity_ms"):
        assert _a_figure(figures[key]), key  # each a difference of two timings
    assert "plait_share_per_activity_ms" in figures
    assert "local_overhead_per_activity_ms" in figures


def test_the_step_instructions_script_takes_the_steps_it_is_asked_for() -> None:
    assert _quick("step_instructions.py") == {"steps": 2}


def test_the_step_bytecodes_script_counts_a_step() -> None:
    figures = _quick("step_bytecodes.py")
    assert figures["bytecodes_per_step"] > 100  # a step runs the loop, the tool and the kernel


def test_in_process_server_benchmark_measures_plait_and_the_bare_app() -> None:
    figures = _quick("server_inproc.py", "--without", "ledger,kept")
    assert figures["without"] == ["kept", "ledger"]
    for key in ("plait_cpu_us_per_run", "bare_cpu_us_per_run", "ratio_cpu"):
        assert _a_figure(figures[key]) and figures[key] > 0, key


def test_the_run_bytecodes_script_counts_a_run() -> None:
    figures = _quick("run_bytecodes.py")
    assert figures["bytecodes_per_run"] > 100  # a run starts, calls the model once and ends
    assert figures["calls_per_run"] > 10


def test_in_process_server_benchmark_drives_the_agent_protocol_route() -> None:
    figures = _quick("server_inproc.py", "--route", "ap")
    assert figures["route"] == "ap"
    assert _a_figure(figures["plait_cpu_us_per_run"]) and figures["plait_cpu_us_per_run"] > 0


@pytest.mark.parametrize(("app", "route"), [("plait", "v1"), ("plait", "ap"), ("bare", "v1")])
def test_the_server_writes_benchmark_counts_cpu_and_socket_writes(app: str, route: str) -> None:
    figures = _quick("server_writes.py", "--app", app, "--route", route)
    assert (figures["app"], figures["route"], figures["runs"]) == (app, route, 20)
    assert _a_figure(figures["cpu_us_per_run"]) and figures["cpu_us_per_run"] > 0
    # every run's answer is written: its head and body at least, and its end
    assert figures["writes_per_run"] >= 2
