"""Evaluation: run an eval set on an agent and check its tool calls and answers.

```python
report = await evaluate(agent, "router.evalset.json")
print(report.pass_rate, [case.id for case in report.cases if not case.passed])
```

An eval set is JSON `{"cases": [...]}`; a case has an `id`, an `input` (text) or a
`conversation` (message objects, the run's input messages), and optionally
`expected_tools` (`[{"name", "args"}]`, without `"args"` any arguments match),
`expected_response`, `trajectory` (`"exact"`, `"in_order"`, `"any_order"`), `response`
(`"exact"`, `"contains"`, `"judge"`), `session_values` and `cassette` (a recorded run
replayed by `plait.cassette`). Google ADK's eval-set files are read too (`plait.eval.adk`).
The command line runs it as `plait eval EVALSET.json TARGET`.
"""

from plait.eval.evalset import (
    MAX_EVALSET_BYTES,
    EvalCase,
    EvalMessage,
    EvalSet,
    ExpectedTool,
    ResponseMode,
    TrajectoryMode,
    load_evalset,
)
from plait.eval.report import EvalCaseResult, EvalReport
from plait.eval.run import JUDGE_PROMPT, evaluate, match_response, match_trajectory

__all__ = [
    "JUDGE_PROMPT",
    "MAX_EVALSET_BYTES",
    "EvalCase",
    "EvalCaseResult",
    "EvalMessage",
    "EvalReport",
    "EvalSet",
    "ExpectedTool",
    "ResponseMode",
    "TrajectoryMode",
    "evaluate",
    "load_evalset",
    "match_response",
    "match_trajectory",
]
