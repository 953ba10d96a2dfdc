"""`plait eval EVALSET.json TARGET`: run an eval set on an agent and show the report.

A table (case, result, trajectory, response, tokens, latency), then for each failed case
what was expected and what the agent did, then a summary line. With `--json` stdout holds
only the JSON report. Exit codes: 0 pass rate at or above the threshold, 1 below it,
2 usage error (a bad eval set or TARGET).
"""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from plait._util.words import counted
from plait.cli.stop import Stopper
from plait.cli.target import load_target
from plait.errors import UsageError

__all__ = ["eval_command"]

_MARK = {True: "[green]✓[/green]", False: "[red]✗[/red]", None: "[dim]—[/dim]"}


def eval_command(
    evalset: str, target: str, *, json_report: bool, threshold: float, judge: str | None
) -> int:
    """Run `evalset` on the agent `target` names; return the exit code."""
    from plait.eval import evaluate, load_evalset

    if not 0.0 <= threshold <= 1.0:
        raise UsageError(f"--threshold is a pass rate from 0 to 1, got {threshold}")
    cases = load_evalset(evalset)  # a bad file is reported before the agent is loaded
    agent = load_target(target)
    judge_model = None
    if judge is not None:
        from plait.models import infer

        judge_model = infer(judge)
    reports: list[Any] = []

    async def main() -> int:
        reports.append(await evaluate(agent, cases, judge=judge_model))
        return 0

    stopped = Stopper().run(main)  # Ctrl-C stops it within the stop time, exit 130
    if not reports:
        return stopped
    report = reports[0]
    if json_report:
        typer.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        _show(Console(soft_wrap=True, highlight=False), report, threshold)
    return 0 if report.pass_rate >= threshold else 1


def _show(console: Console, report: Any, threshold: float) -> None:
    """Print the table, the failed cases' differences and the summary line."""
    table = Table(title="plait eval")
    for column in ("case", "result", "trajectory", "response", "tokens", "latency"):
        table.add_column(column, justify="right" if column in ("tokens", "latency") else "left")
    for case in report.cases:
        table.add_row(
            escape(case.id),
            "[green]pass[/green]" if case.passed else "[red]FAIL[/red]",
            _MARK[case.trajectory_match],
            _MARK[case.response_match],
            f"{case.usage.input_tokens}+{case.usage.output_tokens}",
            f"{case.latency_s:.2f} s",
        )
    console.print(table)
    for case in report.cases:
        if not case.passed:
            _diff(console, case)
    total = report.usage
    verdict = "[green]passed[/green]" if report.pass_rate >= threshold else "[red]failed[/red]"
    seconds = sum(case.latency_s for case in report.cases)
    cases = counted(len(report.cases), "case")
    console.print(
        f"pass rate {report.pass_rate:.0%} ({report.passed}/{cases}) · "
        f"threshold {threshold:.0%} {verdict} · {total.input_tokens} prompt + "
        f"{total.output_tokens} generated tokens · {seconds:.1f} s"
    )


def _diff(console: Console, case: Any) -> None:
    """Print what a failed case expected and what the agent did."""
    console.print(f"\n[bold red]✗ {escape(case.id)}[/bold red]")
    if case.error is not None:
        console.print(f"  error: {escape(case.error)}")
    if case.trajectory_match is False:
        console.print(f"  expected tools: {escape(_calls(case.expected_tools))}")
        console.print(f"  actual tools:   {escape(_calls(case.tools))}")
    if case.response_match is False:
        console.print(f"  expected response: {escape(_value(case.expected_response))}")
        console.print(f"  actual response:   {escape(_value(case.response))}")


def _calls(calls: list[dict[str, Any]] | None) -> str:
    if not calls:
        return "(none)"
    shown = []
    for call in calls:
        args = call.get("args")
        shown.append(call["name"] if args is None else f"{call['name']}({_value(args)})")
    return ", ".join(shown)


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
