"""`plait eval EVALSET.json TARGET`: the table, the JSON report and the exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.eval import MAX_EVALSET_BYTES

TARGET = f"{Path(__file__).resolve().parent / 'eval_targets.py'}:calculator"

PASSING: list[dict[str, Any]] = [
    {
        "id": "sum",
        "input": "add 2 3",
        "expected_tools": [{"name": "add"}],
        "expected_response": "5",
    },
    {"id": "echo", "input": "hi", "expected_tools": [], "expected_response": "echo hi"},
]
FAILING: list[dict[str, Any]] = [
    {
        "id": "wrong-sum",
        "input": "add 2 2",
        "expected_tools": [{"name": "add", "args": {"a": 2, "b": 3}}],
        "expected_response": "5",
    },
    {"id": "wrong-echo", "input": "hello", "expected_response": "echo bye", "response": "contains"},
]


def _write(tmp_path: Path, cases: list[dict[str, Any]] | Any) -> str:
    path = tmp_path / "set.json"
    path.write_text(json.dumps({"cases": cases} if isinstance(cases, list) else cases))
    return str(path)


def _eval(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["eval", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_json_prints_only_the_report(tmp_path: Path) -> None:
    code, out, _ = _eval(_write(tmp_path, PASSING + FAILING[:1]), TARGET, "--json")
    assert code == 1  # 2 of 3 is below 0.8
    report = json.loads(out)  # stdout is the report and nothing else
    assert set(report) == {"pass_rate", "cases"}
    assert report["pass_rate"] == pytest.approx(2 / 3)
    first = report["cases"][0]
    assert list(first) == [
        "id",
        "passed",
        "trajectory_match",
        "response_match",
        "tools",
        "response",
        "usage",
        "latency_s",
        "error",
    ]
    assert first["tools"] == [{"name": "add", "args": {"a": 2, "b": 3}}]
    assert first["usage"] == {"input_tokens": 18, "output_tokens": 4}
    assert (first["response"], first["error"]) == ("5", None)
    assert isinstance(first["latency_s"], float)
    wrong = report["cases"][2]
    assert (wrong["passed"], wrong["trajectory_match"], wrong["response_match"]) == (
        False,
        False,
        False,
    )


@pytest.mark.parametrize(
    ("threshold", "code"),
    [(None, 1), ("0.5", 0), ("0.51", 1), ("0", 0), ("1", 1)],
)
def test_the_exit_code_compares_the_pass_rate_with_the_threshold(
    tmp_path: Path, threshold: str | None, code: int
) -> None:
    path = _write(tmp_path, PASSING[:1] + FAILING[:1])  # pass rate 0.5
    extra = ["--threshold", threshold] if threshold is not None else []
    assert _eval(path, TARGET, "--json", *extra)[0] == code


def test_a_pass_rate_equal_to_the_default_threshold_passes(tmp_path: Path) -> None:
    cases = [{"id": f"ok{i}", "input": "hi"} for i in range(4)] + FAILING[:1]  # 4 of 5: 0.8
    code, out, _ = _eval(_write(tmp_path, cases), TARGET, "--json")
    assert json.loads(out)["pass_rate"] == 0.8
    assert code == 0


def test_the_table_shows_each_case_the_failures_diff_and_a_summary(tmp_path: Path) -> None:
    code, out, _ = _eval(_write(tmp_path, PASSING + FAILING), TARGET)
    assert code == 1
    for case in ("sum", "echo", "wrong-sum", "wrong-echo"):
        assert case in out
    assert out.count("FAIL") == 2
    assert "18+4" in out  # tokens in+out
    assert 'expected tools: add({"a": 2, "b": 3})' in out
    assert 'actual tools:   add({"a": 2, "b": 2})' in out
    assert "expected response: echo bye" in out
    assert "actual response:   echo hello" in out
    assert "✗ sum" not in out  # passing cases get no diff
    assert "pass rate 50% (2/4 cases)" in out
    assert "threshold 80% failed" in out


def test_a_failed_run_shows_its_error(tmp_path: Path) -> None:
    cases = [{"id": "broken", "conversation": [{"role": "user", "content": "add 1"}]}]
    code, out, _ = _eval(_write(tmp_path, cases), TARGET)
    assert code == 1
    assert "error: " in out
    assert "not enough values to unpack" in out


@pytest.mark.parametrize(
    ("evalset", "target", "message"),
    [
        ({"cases": [{"id": "x"}]}, TARGET, "case 'x': input: "),
        ("not json", TARGET, "is not JSON"),
        (None, TARGET, "cannot read the eval set"),
        (PASSING, "nowhere.py:agent", "TARGET 'nowhere.py:agent'"),
        ([{**PASSING[0], "response": "judge"}], TARGET, "--judge MODEL"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    tmp_path: Path, evalset: Any, target: str, message: str
) -> None:
    if evalset is None:
        path = str(tmp_path / "missing.json")
    elif isinstance(evalset, str):
        (tmp_path / "bad.json").write_text(evalset)
        path = str(tmp_path / "bad.json")
    else:
        path = _write(tmp_path, evalset)
    code, out, err = _eval(path, target, "--json")
    assert code == 2
    assert out == ""
    assert err.startswith("plait: error: ")
    assert message in err
    assert err.count("\n") == 1


def test_a_threshold_outside_zero_to_one_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = _eval(_write(tmp_path, PASSING), TARGET, "--threshold", "80")
    assert code == 2
    assert "--threshold is a pass rate from 0 to 1" in err


def test_an_adk_file_runs_from_the_command_line(tmp_path: Path) -> None:
    adk = {
        "eval_set_id": "calc",
        "eval_cases": [
            {
                "eval_id": "adk_sum",
                "conversation": [
                    {
                        "user_content": {"parts": [{"text": "add 4 4"}]},
                        "final_response": {"role": "model", "parts": [{"text": "8"}]},
                        "intermediate_data": {
                            "tool_uses": [{"name": "add", "args": {"a": 4, "b": 4}}]
                        },
                    }
                ],
            }
        ],
    }
    code, out, _ = _eval(_write(tmp_path, adk), TARGET, "--json")
    assert code == 0
    (case,) = json.loads(out)["cases"]
    assert (case["id"], case["passed"]) == ("adk_sum", True)


def _hostile(tmp_path: Path, kind: str) -> str:
    """Return the path of an eval-set file no one should read whole or parse recursively."""
    path = tmp_path / f"{kind}.json"
    if kind == "nested":
        path.write_text('{"cases": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif kind == "device":
        return "/dev/zero"
    elif kind == "link":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)  # opening it for reading would wait for a writer
    else:  # over the size limit (sparse: nothing is written)
        with path.open("wb") as file:
            file.truncate(MAX_EVALSET_BYTES + 1)
    return str(path)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("nested", "is nested too deeply to read"),
        ("device", "is not a regular file"),
        ("link", "is not a regular file"),
        ("fifo", "is not a regular file"),
        ("huge", "is over the limit of 16 MiB"),
    ],
)
def test_a_hostile_evalset_file_is_one_line_and_exit_2(
    tmp_path: Path, kind: str, message: str
) -> None:
    code, out, err = _eval(_hostile(tmp_path, kind), TARGET)
    assert (code, out) == (2, "")
    assert err.startswith("plait: error: the eval set ")
    assert message in err
    assert err.count("\n") == 1
