"""Plan-Execute-Replan: a planner writes a plan, an executor does one step at a time, and a
replanner either revises the remaining plan or responds to the user.

`plan_execute(planner, executor, replanner)` is `Sequential[planner, Loop[executor,
replanner]]`. The three agents share the session values `user_input`, `plan`
(`{"steps": [...]}`), `executed_step` and `executed_steps` (`[{"step", "result"}]`).
`planner(model)`, `executor(model, tools)` and `replanner(model)` build them from a model
(a `ChatModel` or a spec string such as "openai:gpt-4o-mini"). A plan the replanner has not
answered within `max_iterations` rounds ends the run with `MaxStepsExceeded`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from typing import Any

from plait._util.quote import quote
from plait.agents.chat_model import ChatModelAgent
from plait.agents.workflow import LoopAgent, SequentialAgent
from plait.core.agent import Agent, AgentInput, require_agent, require_unique_names
from plait.core.agent_context import AgentContext
from plait.core.context import Frame, inside
from plait.errors import MaxStepsExceeded, ModelError, PlaitError
from plait.events import AgentAction, AgentEvent, BreakLoopAction
from plait.messages import Message
from plait.models.base import ChatModel
from plait.models.spec import resolve_model
from plait.tools.base import Tool, ToolInfo

__all__ = [
    "EXECUTED_STEP",
    "EXECUTED_STEPS",
    "PLAN",
    "USER_INPUT",
    "executor",
    "plan_execute",
    "planner",
    "replanner",
]

USER_INPUT = "user_input"
PLAN = "plan"
EXECUTED_STEP = "executed_step"
EXECUTED_STEPS = "executed_steps"

PLAN_TOOL = ToolInfo(
    name="plan",
    description="Record the plan: the steps still to do, in order.",
    parameters={
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The steps, each one self-contained, in the order to do them.",
            }
        },
        "required": ["steps"],
    },
)
RESPOND_TOOL = ToolInfo(
    name="respond",
    description="Answer the user: the objective is met and no more steps are needed.",
    parameters={
        "type": "object",
        "properties": {"response": {"type": "string", "description": "The answer to the user."}},
        "required": ["response"],
    },
)

PLANNER_INSTRUCTION = (
    "Make a step-by-step plan for the objective below. Each step must be self-contained and "
    "the result of the final step must answer the objective. Call the 'plan' tool with the steps."
)
EXECUTOR_INSTRUCTION = "You are diligent: do exactly the current step, using tools when needed."
REPLANNER_INSTRUCTION = (
    "You revise plans. If the steps done so far answer the objective, call 'respond' with the "
    "answer. Otherwise call 'plan' with the steps that remain (not the ones already done)."
)


def plan_execute(
    planner: Agent,
    executor: Agent,
    replanner: Agent,
    *,
    max_iterations: int = 10,
    name: str = "plan_execute_replan",
) -> SequentialAgent:
    """Compose the three agents: plan once, then execute and replan up to `max_iterations`.

    A run whose replanner has not responded (broken the loop) after `max_iterations` rounds
    of execute and replan ends with a `MaxStepsExceeded` error (a `LimitExceeded`).

    Raises:
        UsageError: `planner`, `executor` or `replanner` is not an `Agent`, or two of them
            share a name.
    """
    parts = {"planner": planner, "executor": executor, "replanner": replanner}
    for role, agent in parts.items():
        require_agent(agent, f"plan_execute '{name}': {role}")
    require_unique_names(list(parts.values()), f"plan_execute '{name}'")
    loop = _PlanLoop(name, [executor, replanner], max_iterations=max_iterations)
    return SequentialAgent(name, [planner, loop], description="Plans, executes and replans.")


class _PlanLoop(LoopAgent):
    """The execute-replan loop; running out of rounds before a break is an error."""

    def __init__(self, owner: str, sub_agents: Sequence[Agent], *, max_iterations: int) -> None:
        super().__init__("execute_replan", sub_agents, max_iterations=max_iterations)
        self.owner = owner  # the name of the plan_execute agent

    async def _events(self, input: AgentInput, ctx: Frame) -> AsyncGenerator[AgentEvent, None]:
        """Run the rounds; if they all end without a break, fail with `MaxStepsExceeded`."""
        ended = False
        async with aclosing(super()._events(input, ctx)) as events:
            async for event in events:
                yield event
                ended = ended or _ends_loop(event, ctx.depth)
        if not ended and self.max_iterations is not None:
            limit = self.max_iterations
            err = MaxStepsExceeded(
                f"plan_execute '{self.owner}': the plan was not finished within {limit} "
                "iterations of execute and replan",
                agent_name=self.owner,
                limit=limit,
            )
            yield ctx.event(error=err)


def _ends_loop(event: AgentEvent, depth: int) -> bool:
    """Whether `event` stops the loop of this lane: an error, an exit, a pause or a break."""
    action = event.action
    if event.error is not None:
        return True
    if action is None or event.depth != depth:
        return False
    brk = action.break_loop
    return action.exit or action.interrupted is not None or (brk is not None and brk.done)


def _steps(values: dict[str, Any]) -> list[str]:
    plan = values.get(PLAN) or {}
    return [str(s) for s in plan.get("steps", [])]


def _render_done(values: dict[str, Any]) -> str:
    done = values.get(EXECUTED_STEPS) or []
    return "".join(f"Step: {d['step']}\nResult: {d['result']}\n\n" for d in done) or "(none)\n"


def _user_text(messages: Sequence[Message]) -> str:
    return "\n".join(m.content for m in messages if m.role == "user")


class _Deciding:
    """An agent that makes one model call which must call one of its tools."""

    def __init__(
        self, name: str, model: ChatModel | str, tools: Sequence[ToolInfo], instruction: str
    ):
        self.name = name
        self.description = ""
        self.model = resolve_model(model, owner=f"agent '{name}'")
        self.instruction = instruction
        self._tools = tuple(tools)

    async def _decide(
        self, prompt: str, ctx: Frame
    ) -> tuple[Message, str, dict[str, Any]] | PlaitError:
        messages = [Message.system(self.instruction), Message.user(prompt)]
        try:
            reply = await self.model.generate(messages, tools=self._tools, tool_choice="required")
        except Exception as exc:
            return ModelError(f"{self.name}: model call failed: {exc}", agent_name=self.name)
        ctx.record_model_call(reply.usage)
        names = [t.name for t in self._tools]
        if not reply.tool_calls:
            return ModelError(f"{self.name}: the model did not call {names}", agent_name=self.name)
        tc = reply.tool_calls[0]
        if tc.name not in names:
            return ModelError(f"unexpected tool call: {quote(tc.name)}", agent_name=self.name)
        try:
            args = json.loads(tc.arguments or "{}")
        except ValueError as exc:
            return ModelError(
                f"{self.name}: bad arguments for '{tc.name}': {exc}", agent_name=self.name
            )
        valid = isinstance(args, dict) and (
            isinstance(args.get("steps"), list)
            if tc.name == "plan"
            else isinstance(args.get("response"), str)
        )
        if not valid:
            return ModelError(
                f"{self.name}: bad arguments for '{tc.name}': {quote(tc.arguments)}",
                agent_name=self.name,
            )
        return reply, tc.name, args


class _Planner(_Deciding):
    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Run on `input` in `ctx` (see the class docstring)."""
        return self._events(input, inside(ctx))

    async def _events(self, input: AgentInput, ctx: Frame) -> AsyncGenerator[AgentEvent, None]:
        """Store the objective, ask the model for a plan and store it."""
        values = ctx.session_values
        values[USER_INPUT] = _user_text(input.messages)
        decided = await self._decide(f"Objective: {values[USER_INPUT]}", ctx)
        if isinstance(decided, PlaitError):
            yield ctx.event(error=decided)
            return
        reply, _, args = decided
        values[PLAN] = {"steps": [str(s) for s in args["steps"]]}
        values[EXECUTED_STEPS] = []
        yield ctx.event(message=reply)


class _Replanner(_Deciding):
    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Run on `input` in `ctx` (see the class docstring)."""
        return self._events(input, inside(ctx))

    async def _events(self, input: AgentInput, ctx: Frame) -> AsyncGenerator[AgentEvent, None]:
        """Record the step just done, then revise the plan or respond and break the loop."""
        values = ctx.session_values
        steps = _steps(values)
        done = list(values.get(EXECUTED_STEPS) or [])
        done.append({"step": steps[0] if steps else "", "result": values.get(EXECUTED_STEP, "")})
        values[EXECUTED_STEPS] = done
        prompt = (
            f"Objective: {values.get(USER_INPUT, '')}\n\nOriginal plan:\n"
            + "\n".join(f"- {s}" for s in steps)
            + f"\n\nDone so far:\n{_render_done(values)}"
        )
        decided = await self._decide(prompt, ctx)
        if isinstance(decided, PlaitError):
            yield ctx.event(error=decided)
            return
        reply, name, args = decided
        if name == "respond":
            yield ctx.event(message=Message.assistant(args["response"], usage=reply.usage))
            yield ctx.event(action=AgentAction(break_loop=BreakLoopAction(from_agent=self.name)))
            return
        values[PLAN] = {"steps": [str(s) for s in args["steps"]]}
        yield ctx.event(message=reply)


def planner(
    model: ChatModel | str, *, instruction: str = PLANNER_INSTRUCTION, name: str = "planner"
) -> Agent:
    """Build a planner: one model call that must call `plan(steps)`."""
    return _Planner(name, model, [PLAN_TOOL], instruction)


def replanner(
    model: ChatModel | str, *, instruction: str = REPLANNER_INSTRUCTION, name: str = "replanner"
) -> Agent:
    """Build a replanner: one model call that must call `plan(steps)` or `respond(response)`."""
    return _Replanner(name, model, [PLAN_TOOL, RESPOND_TOOL], instruction)


def _executor_input(instruction: str, input: AgentInput, ctx: AgentContext) -> list[Message]:
    values = ctx.session_values
    steps = _steps(values)
    prompt = (
        f"Objective: {values.get(USER_INPUT, '')}\n\nPlan:\n"
        + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
        + f"\n\nDone so far:\n{_render_done(values)}\nDo this step now: {steps[0] if steps else ''}"
    )
    return [Message.system(instruction), Message.user(prompt)]


def executor(
    model: ChatModel | str,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    *,
    instruction: str = EXECUTOR_INSTRUCTION,
    name: str = "executor",
    max_iterations: int = 20,
) -> ChatModelAgent:
    """Build an executor: a ReAct agent that does the plan's first step with `tools`."""
    return ChatModelAgent(
        name,
        model,
        instruction=instruction,
        tools=tools,
        gen_model_input=_executor_input,
        output_key=EXECUTED_STEP,
        max_iterations=max_iterations,
    )
