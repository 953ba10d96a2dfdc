"""Guardrails: checks of an agent's input and final answer that end the run when they trip.

```python
def no_homework(ctx, text):
    return GuardrailResult(tripwire="homework" in text.lower(), info={"topic": "homework"})

agent = ChatModelAgent("Helper", model, input_guardrails=[no_homework])
```

A guardrail is a function `(ctx, value) -> GuardrailResult`, sync (run on a worker thread;
inline in a Temporal workflow, see docs/temporal.md) or async.
`ChatModelAgent(input_guardrails=..., output_guardrails=...)` runs them: the input
guardrails as the first of its own hooks, the output guardrails on its final answer.

- Input guardrails get the text of the last user message of the agent's input ("" when it
  has none; `ctx.history` holds the whole conversation). They run once per run of the
  agent, concurrently with each other and with its first model call (the `during_model`
  seam): the first to trip cancels the model call and the others; a reply that comes first
  is held (no event, no tool call) until all have passed. An agent resumed after it paused
  does not run them again: it paused in a tool round, after they had passed.
- Output guardrails get the final answer: the text of the model's reply that has no tool
  calls, or with an `output_type` the validated object (never a tool-call turn, nor a
  return-directly tool's result). They run concurrently, once, when the agent's turn ends
  with the answer; until they pass, the answer is held (no event carries it, streamed
  chunks included, and it is not stored under `output_key`), so an answer they block never
  leaves the agent (see `plait.agents.guarded`).

A guardrail that trips ends the whole run, from any depth (an agent run as a tool, a team
member), with `GuardrailTripped` naming it (`guardrail`: the guardrail's `name` attribute
when it has a str one, else its `__name__`) and carrying its `info`. One that raises a
`PlaitError` ends the run with it; any other exception, or a return value that is not a
`GuardrailResult`, ends it with `HookError` whose `hook` is the guardrail's name and whose
`seam` is "input_guardrail" or "output_guardrail".
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from plait._util.alongside import all_of
from plait._util.threads import run_in_thread
from plait.core.agent_context import AgentContext
from plait.core.hooks import Hooks, ModelRequest
from plait.errors import GuardrailTripped, HookError, PlaitError, UsageError

if TYPE_CHECKING:
    from plait.core.agent import AgentInput
    from plait.messages import Message

__all__ = ["Guardrail", "GuardrailResult", "InputGuardrails", "OutputGuardrails"]


@dataclasses.dataclass(frozen=True, slots=True)
class GuardrailResult:
    """What a guardrail decided: `tripwire` True ends the run; `info` travels with the
    `GuardrailTripped` error (keep it JSON-able if runs are saved or served)."""

    tripwire: bool
    """Whether the guardrail tripped."""
    info: Any = None
    """Anything the guardrail wants to tell about its decision."""


Guardrail = Callable[[AgentContext, Any], GuardrailResult | Awaitable[GuardrailResult]]

Kind = Literal["input", "output"]


class _Check:
    """One guardrail, named, called the way it was written (sync on a worker thread)."""

    __slots__ = ("fn", "is_async", "name")

    def __init__(self, fn: Guardrail, owner: str) -> None:
        if not callable(fn) or isinstance(fn, type):
            raise UsageError(
                f"{owner}: a guardrail is a function (ctx, value) -> GuardrailResult, "
                f"not {type(fn).__name__} {fn!r}"
            )
        self.fn = fn
        self.name = _name(fn)
        call = getattr(fn, "__call__", None)  # noqa: B004 (an object with an async __call__)
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)

    async def run(self, ctx: AgentContext, value: Any, kind: Kind) -> None:
        """Call the guardrail on `value`; raise `GuardrailTripped` when it trips."""
        seam = f"{kind}_guardrail"
        try:
            if self.is_async:
                result = await self.fn(ctx, value)  # type: ignore[misc]
            else:
                result = await run_in_thread(functools.partial(self.fn, ctx, value))
                if inspect.isawaitable(result):  # a sync callable that returned a coroutine
                    result = await result
        except PlaitError:
            raise
        except Exception as exc:
            raise HookError(
                f"{kind} guardrail '{self.name}' of agent '{ctx.agent_name}' raised "
                f"{type(exc).__name__}: {exc}",
                hook=self.name,
                seam=seam,
            ) from exc
        if not isinstance(result, GuardrailResult):
            raise HookError(
                f"{kind} guardrail '{self.name}' of agent '{ctx.agent_name}' returned "
                f"{type(result).__name__}, expected a plait.GuardrailResult",
                hook=self.name,
                seam=seam,
            )
        if result.tripwire:
            raise GuardrailTripped(
                guardrail=self.name, kind=kind, agent_name=ctx.agent_name, info=result.info
            )


def _name(fn: object) -> str:
    given = getattr(fn, "name", None)
    if isinstance(given, str) and given:
        return given
    name = getattr(fn, "__name__", None)
    if isinstance(name, str):
        return name
    inner = getattr(fn, "func", None)  # functools.partial
    return _name(inner) if inner is not None else type(fn).__name__


async def _run_all(checks: Sequence[_Check], ctx: AgentContext, value: Any, kind: Kind) -> None:
    await all_of([functools.partial(c.run, ctx, value, kind) for c in checks])


_DONE = object()  # the input guardrails of this agent run passed (or need not run)


class InputGuardrails(Hooks):
    """The input guardrails of one agent, run alongside the first model call of each of its
    runs."""

    def __init__(self, guardrails: Sequence[Guardrail], *, owner: str) -> None:
        self.checks = tuple(_Check(g, owner) for g in guardrails)
        self._pending: dict[int, object] = {}  # per agent run (its context): what to check

    async def before_agent(self, ctx: AgentContext, input: AgentInput) -> None:
        """Note the input to check at the first model call (none after a pause)."""
        resumed = ctx.resume_info is not None and ctx.resume_info.was_interrupted
        self._pending[id(ctx)] = _DONE if resumed else _last_user_text(input.messages)

    async def during_model(self, ctx: AgentContext, request: ModelRequest) -> None:
        """Check the input alongside the run's first model call."""
        key = id(ctx)
        value = self._pending.get(key)
        if value is _DONE:
            return
        if value is None:  # entered without `before_agent`: the request holds the input
            value = _last_user_text(request.messages)
        await _run_all(self.checks, ctx, value, "input")
        self._pending[key] = _DONE

    async def after_agent(self, ctx: AgentContext, error: PlaitError | None) -> None:
        """Forget the agent run."""
        self._pending.pop(id(ctx), None)


class OutputGuardrails:
    """The output guardrails of one agent, run on its final answer."""

    def __init__(self, guardrails: Sequence[Guardrail], *, owner: str) -> None:
        self.checks = tuple(_Check(g, owner) for g in guardrails)

    async def check(self, ctx: AgentContext, value: Any) -> None:
        """Run the output guardrails on the final answer `value` (the text, or the validated
        object of an agent with a structured output)."""
        await _run_all(self.checks, ctx, value, "output")


def _last_user_text(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            return message.content
    return ""


def guardrail_hooks(
    input_guardrails: Sequence[Guardrail], output_guardrails: Sequence[Guardrail], *, owner: str
) -> tuple[tuple[Hooks, ...], OutputGuardrails | None]:
    """Return the hooks that run an agent's input guardrails (none for none) and its output
    guardrails (None for none); `owner` names the agent in a `UsageError` for a guardrail
    that is not a function."""
    for given in (input_guardrails, output_guardrails):
        if isinstance(given, str) or callable(given):
            raise UsageError(f"{owner}: guardrails are given as a list of functions")
    hooks = (InputGuardrails(list(input_guardrails), owner=owner),) if input_guardrails else ()
    output = OutputGuardrails(list(output_guardrails), owner=owner) if output_guardrails else None
    return hooks, output
