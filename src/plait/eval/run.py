"""`evaluate`: run every case of an eval set on an agent and check what it did.

Each case runs on a `Runner` of its own with a fresh in-memory store and no session, so
nothing carries over from one case to the next; cases run one after another, in file order.
`evaluate_cases` checks cases run another way (the server runs each as one of its runs).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from plait.capabilities.cassette import Cassette
from plait.core.agent import Agent
from plait.errors import PlaitError, UsageError
from plait.eval.evalset import EvalCase, EvalSet, ExpectedTool, load_evalset
from plait.eval.report import EvalCaseResult, EvalReport
from plait.events import RunResult
from plait.messages import Message
from plait.models import ChatModel
from plait.run.runner import Runner

__all__ = [
    "JUDGE_PROMPT",
    "CaseRun",
    "evaluate",
    "evaluate_cases",
    "match_response",
    "match_trajectory",
]

#: Runs one case of an eval set and returns what its run did.
CaseRun = Callable[[EvalCase], Awaitable[RunResult]]

#: The judge's one user message; a reply starting with PASS passes.
JUDGE_PROMPT = """You grade an AI agent's answer against the expected answer.
Reply PASS if the actual response gives what the expected response gives (same facts, \
same meaning; wording may differ), else FAIL; then one short sentence saying why.

Input:
{input}

Expected response:
{expected}

Actual response:
{actual}"""


async def evaluate(
    agent: Agent,
    evalset: str | Path | Mapping[str, Any] | EvalSet,
    *,
    judge: ChatModel | None = None,
) -> EvalReport:
    """Run each case of `evalset` (a path or the parsed JSON) on `agent`; return the report.

    `judge` answers the cases whose `response` is `"judge"`.

    Raises:
        EvalSetError: The eval set is invalid (the error names the case and the field), or
            its file cannot be read (not a regular file, over `MAX_EVALSET_BYTES`, nested
            too deeply).
        UsageError: `agent` is not an agent, or a case needs a judge and none is given.
    """
    if not isinstance(agent, Agent):
        raise UsageError(f"evaluate needs an Agent, got {agent!r}")
    cases = load_evalset(evalset)

    async def run(case: EvalCase) -> RunResult:
        stream = _runner(agent, case, cases.base).run(
            case.messages(), session_values=case.session_values
        )
        return await stream.collect()

    return await evaluate_cases(cases, run, judge=judge)


async def evaluate_cases(
    cases: EvalSet, run: CaseRun, *, judge: ChatModel | None = None
) -> EvalReport:
    """Run each case of `cases` with `run`, one after another, and check what it did;
    return the report (`evaluate` runs each on a runner of its own; the server runs each as
    one of its runs).

    Raises:
        UsageError: A case needs a judge and none is given (before any case runs).
    """
    judged = [case.id for case in cases.cases if case.response == "judge"]
    if judged and judge is None:
        raise UsageError(
            f"cases {', '.join(map(repr, judged))} are judged by a model: pass judge=<a "
            "ChatModel> (on the command line: --judge MODEL)"
        )
    results = [await _run_case(case, run, judge) for case in cases.cases]
    passed = sum(result.passed for result in results)
    return EvalReport(pass_rate=passed / len(results), cases=results)


async def _run_case(case: EvalCase, run: CaseRun, judge: ChatModel | None) -> EvalCaseResult:
    """Run one case with `run` and check it."""
    started = time.perf_counter()
    try:
        result = await run(case)
        error = _problem(result)
    except PlaitError as exc:
        result, error = RunResult(), f"{type(exc).__name__}: {exc}"
    latency = time.perf_counter() - started
    tools = await _tools(result)
    response = _jsonable(result.final_output)
    trajectory_ok = response_ok = None
    if error is None:
        if case.expected_tools is not None:
            trajectory_ok = match_trajectory(case.expected_tools, tools, case.trajectory)
        if case.expected_response is not None:
            try:
                response_ok = await _check_response(case, response, judge)
            except PlaitError as exc:
                error = f"the judge failed: {type(exc).__name__}: {exc}"
    return EvalCaseResult(
        id=case.id,
        passed=error is None and trajectory_ok is not False and response_ok is not False,
        trajectory_match=trajectory_ok,
        response_match=response_ok,
        tools=tools,
        response=response,
        usage=result.usage,
        latency_s=round(latency, 4),
        error=error,
        expected_tools=_expected(case.expected_tools),
        expected_response=case.expected_response,
    )


def _runner(agent: Agent, case: EvalCase, base: Path | None) -> Runner:
    """Return the case's runner: plain, or with its tools answered by the case's cassette
    (the model runs live: `Cassette(path, mode="replay", tools_only=True)`)."""
    if case.cassette is None:
        return Runner(agent)
    path = Path(case.cassette)
    if base is not None and not path.is_absolute():
        path = base / path
    return Runner(agent, cassette=Cassette(path, mode="replay", tools_only=True))


def _problem(result: RunResult) -> str | None:
    """Return why the run did not complete (failed or paused), or None."""
    if result.error is not None:
        return f"{type(result.error).__name__}: {result.error}"
    if result.interrupts:
        infos = "; ".join(
            json.dumps(_jsonable(i.info), ensure_ascii=False) for i in result.interrupts
        )
        return f"paused at an interrupt (not completed): {infos}"
    return None


async def _tools(result: RunResult) -> list[dict[str, Any]]:
    """Return every tool call the run's models asked for, in order, as `{"name", "args"}`."""
    calls: list[dict[str, Any]] = []
    for event in result.events:
        variant = event.message
        if variant is None or variant.role != "assistant":
            continue
        message = await variant.get_message()
        for call in message.tool_calls:
            calls.append({"name": call.name, "args": _arguments(call.arguments)})
    return calls


def _arguments(text: str) -> Any:
    """Return a call's parsed arguments ({} for none; the text itself when not JSON)."""
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


def _jsonable(value: Any) -> JsonValue:
    result: JsonValue = to_jsonable_python(value, fallback=repr)
    return result


def _expected(tools: Sequence[ExpectedTool] | None) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    return [tool.model_dump(exclude_none=True) for tool in tools]


def _fits(expected: ExpectedTool, call: Mapping[str, Any]) -> bool:
    return expected.name == call["name"] and (
        expected.args is None or expected.args == call["args"]
    )


def match_trajectory(
    expected: Sequence[ExpectedTool], calls: Sequence[Mapping[str, Any]], mode: str = "exact"
) -> bool:
    """Return whether `calls` (`{"name", "args"}`) follow `expected`.

    `"exact"`: the same calls in the same order, no others. `"in_order"`: the expected calls
    appear in this order, other calls between them allowed. `"any_order"`: each expected
    call appears (a call counts once), in any order, other calls allowed.
    """
    if mode == "exact":
        return len(expected) == len(calls) and all(map(_fits, expected, calls))
    if mode == "in_order":
        remaining = iter(calls)
        return all(any(_fits(want, call) for call in remaining) for want in expected)
    if mode == "any_order":
        free = list(calls)
        # calls with arguments first: a call that any arguments match must not take theirs
        for want in sorted(expected, key=lambda tool: tool.args is None):
            found = next((i for i, call in enumerate(free) if _fits(want, call)), None)
            if found is None:
                return False
            del free[found]
        return True
    raise UsageError(f"unknown trajectory mode {mode!r}: exact, in_order or any_order")


def match_response(expected: JsonValue, actual: JsonValue, mode: str = "exact") -> bool:
    """Return whether `actual` matches `expected` by `"exact"` (surrounding whitespace
    ignored) or `"contains"` (the expected text appears in the actual text)."""
    if mode == "exact":
        if isinstance(expected, str) and isinstance(actual, str):
            return expected.strip() == actual.strip()
        return expected == actual
    if mode == "contains":
        return _text(expected) in _text(actual)
    raise UsageError(f"unknown response mode {mode!r}: exact or contains (judge needs a model)")


async def _check_response(case: EvalCase, actual: JsonValue, judge: ChatModel | None) -> bool:
    if case.response != "judge":
        return match_response(case.expected_response, actual, case.response)
    assert judge is not None  # evaluate refuses judged cases without one
    prompt = JUDGE_PROMPT.format(
        input=case.input_text(), expected=_text(case.expected_response), actual=_text(actual)
    )
    try:
        reply = await judge.generate([Message.user(prompt)])
    except PlaitError:
        raise
    except Exception as exc:
        raise PlaitError(str(exc) or type(exc).__name__) from exc
    return reply.content.lstrip().startswith("PASS")


def _text(value: JsonValue) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, ensure_ascii=False)
