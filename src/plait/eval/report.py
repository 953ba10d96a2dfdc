"""What an evaluation found: `EvalReport` and one `EvalCaseResult` per case."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from plait.messages import Usage

__all__ = ["EvalCaseResult", "EvalReport"]


@dataclass(frozen=True, kw_only=True)
class EvalCaseResult:
    """How one case went.

    `passed` is true when the run completed and every expectation the case gives matched;
    `trajectory_match` and `response_match` are None when the case gives no such expectation
    (or its run did not complete). `tools` are the calls made, `[{"name", "args"}]`, in
    order; `response` is the final output; `error` says why the run did not complete (or why
    the judge could not answer). `expected_tools` and `expected_response` repeat the case's
    expectations, for showing a difference (they are not part of the JSON report).
    """

    id: str
    passed: bool
    trajectory_match: bool | None
    response_match: bool | None
    tools: list[dict[str, Any]]
    response: JsonValue
    usage: Usage
    latency_s: float
    error: str | None
    expected_tools: list[dict[str, Any]] | None = None
    expected_response: JsonValue = None

    def to_dict(self, *, expected: bool = False) -> dict[str, Any]:
        """Return the case as the JSON report has it (with `expected`, also an `expected`
        object holding `tools` and `response`)."""
        out: dict[str, Any] = {
            "id": self.id,
            "passed": self.passed,
            "trajectory_match": self.trajectory_match,
            "response_match": self.response_match,
            "tools": self.tools,
            "response": self.response,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
            "latency_s": self.latency_s,
            "error": self.error,
        }
        if expected:
            out["expected"] = {"tools": self.expected_tools, "response": self.expected_response}
        return out


@dataclass(frozen=True, kw_only=True)
class EvalReport:
    """The results of an eval set: `pass_rate` (passed cases / cases) and each case's."""

    pass_rate: float
    cases: list[EvalCaseResult] = field(default_factory=list)

    @property
    def passed(self) -> int:
        """Return how many cases passed."""
        return sum(case.passed for case in self.cases)

    @property
    def usage(self) -> Usage:
        """Return the tokens of every case together."""
        total = Usage()
        for case in self.cases:
            total = total + case.usage
        return total

    def to_dict(self, *, expected: bool = False) -> dict[str, Any]:
        """Return the JSON report: `{"pass_rate", "cases": [...]}`."""
        return {
            "pass_rate": self.pass_rate,
            "cases": [case.to_dict(expected=expected) for case in self.cases],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """Return the JSON report as text."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)
