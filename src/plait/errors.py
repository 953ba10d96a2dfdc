"""Errors raised by plait, all under one base class.

```
PlaitError
├── UsageError                  a developer mistake (bad configuration, missing placeholder)
│   └── EvalSetError            an eval set that does not parse (names the case and field)
├── AgentError                  an unexpected exception escaped a custom agent
├── RemoteAgentError            a remote agent failed, did not answer, or answered nonsense
├── HookError                   an unexpected exception escaped a hook (names hook and seam)
├── GuardrailTripped            a guardrail's tripwire ended the run (names it, carries info)
├── ModelError                  the model call failed (provider error, exhausted script)
├── ToolError                   a tool failed and the agent was told to raise (tool_errors="raise")
│   ├── InvalidToolArguments    the arguments were not JSON or did not match the schema
│   └── ToolTimeout             a tool call ran past its timeout (also a TimeoutError)
├── MaxIterationsExceeded       a ChatModelAgent reached max_iterations model calls
├── OutputValidationError       a structured answer stayed invalid after output_retries
├── LimitExceeded               a run-wide limit; ends the whole run from any depth
│   ├── MaxHandoffsExceeded
│   ├── RepetitiveHandoffError
│   ├── MaxDepthExceeded
│   ├── MaxStepsExceeded
│   ├── TokenBudgetExceeded
│   ├── NodeTimeout             (also a TimeoutError)
│   ├── UsageLimitExceeded      a `Runner(limits=UsageLimits(...))` limit (names it)
│   ├── LoopDetected            a `ChatModelAgent(loop_guard=...)` stopped a repeating agent
│   └── QuotaExceeded           a user's server quota (`plait.server.Quota`; names it)
├── StoreError                  the store failed (a server gone away, a full disk)
├── SessionConflict             another turn wrote the session first; this turn was not saved
├── CassetteCorrupt             a cassette line is not a step (names the file and the line)
├── CassetteDivergence          a replayed request differs from the recorded one (names the step)
├── CheckpointNotFound
├── CheckpointCorrupt
│   └── CheckpointVersionError  a format this plait does not read (a newer plait's)
├── SerializationError          names the path to the value that could not be encoded
├── ResumeError                 bad resume targets, a live run's checkpoint, a changed agent
│   └── CheckpointAlreadyResumed  resumed before (a new pause has a new id)
├── WorkflowNondeterminism      a Temporal run in flight no longer replays (names the workflow)
└── RunCancelled
```

Every error carries what a user needs to act on it as attributes (agent name, tool name,
call id, the limit that was hit, the path to a bad value). Errors inside a run do not raise
out of the `Runner`: they arrive as the last event (`event.error`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema

__all__ = [
    "AgentError",
    "CassetteCorrupt",
    "CassetteDivergence",
    "CheckpointCorrupt",
    "CheckpointNotFound",
    "CheckpointVersionError",
    "EvalSetError",
    "GuardrailTripped",
    "HookError",
    "InvalidToolArguments",
    "LimitExceeded",
    "LoopDetected",
    "MaxDepthExceeded",
    "MaxHandoffsExceeded",
    "MaxIterationsExceeded",
    "MaxStepsExceeded",
    "ModelError",
    "NodeTimeout",
    "OutputValidationError",
    "PlaitError",
    "QuotaExceeded",
    "RemoteAgentError",
    "RepetitiveHandoffError",
    "ResumeError",
    "CheckpointAlreadyResumed",
    "RunCancelled",
    "SerializationError",
    "SessionConflict",
    "StoreError",
    "TokenBudgetExceeded",
    "ToolError",
    "ToolTimeout",
    "UsageError",
    "UsageLimitExceeded",
    "WorkflowNondeterminism",
]


class PlaitError(Exception):
    """Base class of every error plait raises or reports.

    The keyword `details` are kept in a mapping of their own and read as attributes
    (`err.tool_name`), after the error's real attributes: a detail never hides `message`,
    a method or a class attribute, whether given here or decoded from JSON.
    """

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self._details = details

    if not TYPE_CHECKING:  # for mypy, only the attributes each subclass declares exist

        def __getattr__(self, name: str) -> Any:
            details = self.__dict__.get("_details")
            if details is not None and name in details and not name.startswith("_"):
                return details[name]
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def details(self) -> dict[str, Any]:
        """Return the structured attributes of this error (everything except the message);
        an attribute set after the error was made counts, and wins over a detail."""
        details = dict(self.__dict__.get("_details") or {})
        for key, value in vars(self).items():
            if key != "message" and not key.startswith("_"):
                details[key] = value
        return details

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, PlaitError)
        return self.message == other.message and self.details() == other.details()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.message))

    def __str__(self) -> str:
        return self.message

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        from pydantic_core import core_schema

        def serialize(err: PlaitError) -> dict[str, Any]:
            return {"type": type(err).__name__, "message": err.message, "details": err.details()}

        return core_schema.no_info_plain_validator_function(
            _error_from_json,
            serialization=core_schema.plain_serializer_function_ser_schema(serialize),
        )


def _error_from_json(value: Any) -> PlaitError:
    if isinstance(value, PlaitError):
        return value
    if not isinstance(value, dict) or not isinstance(value.get("message"), str):
        raise ValueError("an error is encoded as {type, message, details}")
    cls = getattr(sys.modules[__name__], str(value.get("type")), None)
    if not (isinstance(cls, type) and issubclass(cls, PlaitError)):
        cls = PlaitError
    details = value.get("details") or {}
    if not isinstance(details, dict):
        raise ValueError("an error's details are encoded as an object")
    err = cls.__new__(cls)
    Exception.__init__(err, value["message"])
    err.message = value["message"]
    err._details = dict(details)  # read through __getattr__: they cannot shadow anything
    return err


class UsageError(PlaitError):
    """A developer mistake: invalid configuration or a call that cannot work."""


class EvalSetError(UsageError):
    """An eval set (`plait.eval`) that cannot be used: `case` is the case's id (or its
    position, `#3`, when it has none; None for the file as a whole), `field` the path to the
    bad field (`expected_tools.0.name`)."""

    case: str | None
    field: str | None

    def __init__(self, message: str, *, case: str | None = None, field: str | None = None) -> None:
        super().__init__(message, case=case, field=field)


class AgentError(PlaitError):
    """An unexpected exception escaped an agent's `run`; `agent_name` names the agent."""

    agent_name: str | None

    @classmethod
    def wrap(cls, exc: Exception, agent_name: str) -> PlaitError:
        """Return `exc` if it is a `PlaitError`, else an `AgentError` caused by it."""
        if isinstance(exc, PlaitError):
            return exc
        err = cls(f"agent '{agent_name}' raised {type(exc).__name__}: {exc}", agent_name=agent_name)
        err.__cause__ = exc
        return err


class RemoteAgentError(PlaitError):
    """A remote agent (`plait.protocols.a2a.RemoteAgent`) failed: its task ended `failed`,
    `rejected` or `canceled`, it could not be reached or did not answer within the timeout,
    or its card or answer was not A2A. `url` is where it was called, `agent_name` the local
    agent's name (None before it has one), `task_id` and `state` the remote task's id and
    last state when there was one."""

    agent_name: str | None
    url: str
    task_id: str | None
    state: str | None

    def __init__(
        self,
        message: str,
        *,
        url: str,
        agent_name: str | None = None,
        task_id: str | None = None,
        state: str | None = None,
    ) -> None:
        super().__init__(message, url=url, agent_name=agent_name, task_id=task_id, state=state)


class HookError(PlaitError):
    """An unexpected exception escaped a hook; `hook` names its class and `seam` the method
    (`before_model`, `after_tool`, ...). The run ends with it; no agent is blamed."""

    hook: str
    seam: str


class GuardrailTripped(PlaitError):
    """A guardrail of agent `agent_name` tripped: `guardrail` is its name, `kind` is
    "input" or "output", and `info` is what it returned with the tripwire."""

    guardrail: str
    kind: str
    agent_name: str | None
    info: Any

    def __init__(
        self, *, guardrail: str, kind: str, agent_name: str | None = None, info: Any = None
    ) -> None:
        owner = f" of agent '{agent_name}'" if agent_name else ""
        super().__init__(
            f"{kind} guardrail '{guardrail}'{owner} tripped",
            guardrail=guardrail,
            kind=kind,
            agent_name=agent_name,
            info=info,
        )


class ModelError(PlaitError):
    """The model call failed; `agent_name`, `status_code` when a provider answered, and
    `fix` when there is one thing to do about it (such as a command to run)."""

    agent_name: str | None
    status_code: int | None
    fix: str | None

    def __init__(
        self,
        message: str,
        *,
        agent_name: str | None = None,
        status_code: int | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message, agent_name=agent_name, status_code=status_code, fix=fix)


class ToolError(PlaitError):
    """A tool call failed and the agent was configured to treat that as fatal."""

    tool_name: str
    call_id: str | None
    agent_name: str | None

    def __init__(
        self,
        message: str,
        *,
        tool_name: str,
        call_id: str | None = None,
        agent_name: str | None = None,
    ) -> None:
        super().__init__(message, tool_name=tool_name, call_id=call_id, agent_name=agent_name)


class InvalidToolArguments(ToolError):
    """The model sent arguments that are not JSON or do not match the tool's schema."""


class MaxIterationsExceeded(PlaitError):
    """A `ChatModelAgent` would make model call `limit + 1`."""

    agent_name: str
    limit: int

    def __init__(self, *, agent_name: str, limit: int) -> None:
        super().__init__(
            f"agent '{agent_name}' exceeded max_iterations={limit} model calls",
            agent_name=agent_name,
            limit=limit,
        )


class OutputValidationError(PlaitError):
    """The answer of an agent with an `output_type` was still invalid (not JSON, or not
    valid for the type) after `output_retries` retries: `errors` are the validation errors
    of the last answer (pydantic's, as JSON) and `output` is that answer as the model gave it."""

    agent_name: str
    errors: list[dict[str, Any]]
    output: str

    def __init__(
        self, message: str, *, agent_name: str, errors: list[dict[str, Any]], output: str
    ) -> None:
        super().__init__(message, agent_name=agent_name, errors=errors, output=output)


class LimitExceeded(PlaitError):
    """A run-wide limit was hit; these end the whole run and cross every agent boundary."""


class MaxHandoffsExceeded(LimitExceeded):
    """More handoffs than a swarm's `max_handoffs` in one run."""


class RepetitiveHandoffError(LimitExceeded):
    """The recent handoffs of a swarm went back and forth among too few agents."""


class MaxDepthExceeded(LimitExceeded):
    """Teams nested deeper than `max_depth`."""


class MaxStepsExceeded(LimitExceeded):
    """More model calls (or graph steps, or plan-execute rounds) than allowed."""


class TokenBudgetExceeded(LimitExceeded):
    """More tokens spent than `total_token_budget`."""


class NodeTimeout(LimitExceeded, TimeoutError):
    """A team member or graph node ran longer than its timeout."""


class UsageLimitExceeded(LimitExceeded):
    """A call would take the run past one of the runner's `UsageLimits`: `limit_name` is
    the limit (`"max_requests"`, `"max_input_tokens"`, `"max_output_tokens"` or
    `"max_tool_calls"`), `limit` its value, `count` what the run would reach."""

    limit_name: str
    limit: int
    count: int

    def __init__(self, message: str, *, limit_name: str, limit: int, count: int) -> None:
        super().__init__(message, limit_name=limit_name, limit=limit, count=count)


class LoopDetected(LimitExceeded):
    """An agent's `LoopGuard` stopped it: it asked for the same tool call `count` times in
    a row (`reason="repeat"`), or its last `count` turns brought no new tool result
    (`reason="idle"`); `tool_name` and `arguments` are the call it asked for last."""

    agent_name: str
    tool_name: str
    arguments: Any
    count: int
    reason: str

    def __init__(
        self,
        message: str,
        *,
        agent_name: str,
        tool_name: str,
        arguments: Any,
        count: int,
        reason: str,
    ) -> None:
        super().__init__(
            message,
            agent_name=agent_name,
            tool_name=tool_name,
            arguments=arguments,
            count=count,
            reason=reason,
        )


class QuotaExceeded(LimitExceeded):
    """A user's quota on a server (`plait.server.Quota`) refused a run or a model call:
    `quota` names it (`"tokens_per_day"`), `limit` is its value and `retry_after` the
    seconds until it lets the user go on. A run it stops keeps a checkpoint that `resume`
    continues once the quota allows (the call it stopped before is made then)."""

    quota: str
    limit: float
    retry_after: int

    def __init__(self, message: str, *, quota: str, limit: float, retry_after: int) -> None:
        super().__init__(message, quota=quota, limit=limit, retry_after=retry_after)


class StoreError(PlaitError):
    """The store failed; `operation` names what plait asked of it, the cause is chained."""

    operation: str


class SessionConflict(PlaitError):
    """Another turn wrote the session since this one read it, so this turn was not saved.

    `version` is the stored version found (0 when there is none) and `expected_version` the
    one this write was based on (0 for a session that did not exist yet).
    """

    session_id: str
    version: int
    expected_version: int

    def __init__(self, *, session_id: str, version: int, expected_version: int) -> None:
        found = f"version {version}" if version else "no longer stored"
        expected = f"expected {expected_version}" if expected_version else "expected none"
        super().__init__(
            f"session '{session_id}' was changed by another turn ({found}, {expected});"
            " this turn was not saved",
            session_id=session_id,
            version=version,
            expected_version=expected_version,
        )


class CassetteCorrupt(PlaitError):
    """A cassette file cannot be read: `path` is the file and `line` the line (from 1) that
    is not a recorded step."""

    path: str
    line: int


class CassetteDivergence(PlaitError):
    """A run replayed from a cassette asked for something the cassette did not record: `step`
    is the step's number, `recorded` and `new` the first value that differs (None where one
    side has nothing)."""

    step: int
    recorded: Any
    new: Any


class CheckpointNotFound(PlaitError):
    """No checkpoint is stored under `checkpoint_id`."""


class CheckpointCorrupt(PlaitError):
    """The stored checkpoint bytes cannot be read as a plait checkpoint."""


class CheckpointVersionError(CheckpointCorrupt):
    """The checkpoint is in a format this plait does not read (written by a newer plait):
    `version` is its format, `supported` the newest this plait reads."""

    version: int
    supported: int


class SerializationError(PlaitError):
    """A value cannot be encoded as JSON; `path` names it, e.g. `session_values['cart'][2]`."""

    path: str

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message, path=path)


class ResumeError(PlaitError):
    """A resume was rejected: unknown interrupt ids, a scalar for several, or already resumed."""


class CheckpointAlreadyResumed(ResumeError):
    """The checkpoint was resumed before: a run that paused again did so under a new id."""


class RunCancelled(PlaitError):
    """The run was cancelled before it finished."""


class WorkflowNondeterminism(PlaitError):
    """A run on Temporal (`plait.temporal`) no longer replays: its agents, tools or models
    changed in a way that makes the workflow take other steps than its history records;
    `workflow_id` names the run's workflow."""

    workflow_id: str


class ToolTimeout(ToolError, TimeoutError):
    """A tool call ran longer than its timeout (`@tool(timeout=...)`, or the agent's
    `tool_timeout`) and was stopped; `limit` is that timeout in seconds."""

    limit: float

    def __init__(
        self,
        *,
        tool_name: str,
        limit: float,
        call_id: str | None = None,
        agent_name: str | None = None,
    ) -> None:
        owner = f" of agent '{agent_name}'" if agent_name else ""
        super().__init__(
            f"tool '{tool_name}'{owner} ran longer than its timeout of {limit:g} s and was "
            "stopped; give it more time with @tool(timeout=...) or "
            "ChatModelAgent(tool_timeout=...), or make it return sooner",
            tool_name=tool_name,
            call_id=call_id,
            agent_name=agent_name,
        )
        self.limit = limit
