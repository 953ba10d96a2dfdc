"""Record and replay: `Cassette` keeps every model call and tool call of a run in a file of
JSON lines, and answers them from it.

```python
runner = Runner(agent, cassette=Cassette("runs/weather.jsonl", mode="auto"))
```

A cassette has one JSON line per step, numbered from 1 in run order: a model call (`"kind":
"model"`: the agent, its request — messages, tools offered, options — and its reply with
usage, or the error it failed with) or a tool call (`"kind": "tool"`: the agent, the tool's
name, its arguments, and its result and action, or the error it raised). A step is written
when its call finishes, so an agent run as a tool writes its own steps before the call that
ran it. The first step of each run also holds the run's input.

- `mode="record"` starts the file afresh the first time the cassette is used, then appends
  every step of every run and resume made with it. `"replay"` answers model and tool calls
  from the file, calling no model and running no tool; `"auto"` replays when the file exists,
  else records.
- Replaying matches each call to a recorded step by where it is made: a model call by its
  agent's address (`agent:Desk;agent:Billing`), in order, a tool call by its address, which
  holds its tool-call id. So parallel tool calls and parallel agents, which finish in any
  order, find their own steps. A request that differs from the recorded one (its messages,
  the tools offered, a tool's name or arguments; the options are recorded, not compared), or
  a call the cassette does not have, ends the run with `CassetteDivergence` naming the step
  and showing the recorded and the new value of the first difference. It ends the whole run
  from any depth, like a limit.
- An agent run as a tool (`AgentTool`, a coordinator team's member) is not answered from the
  file: it runs, and its agent's own model and tool calls are replayed, so its events come
  again. Its step is still checked.
- A reply is recorded after its tool calls got unique ids, so a replayed run holds the same
  ids. Streamed replies are recorded merged and replayed as one chunk. A failed model call is
  replayed as the same error; a tool that raised is replayed by raising an error of the same
  class name and message (so the model is told the same text).
- A pause is not a step. A run and its resumes through the same `Cassette` object make one
  recording (steps go on being appended) and one replay (steps go on being consumed). On
  replay, a tool that paused by calling `interrupt()` is answered with its recorded result,
  so it does not pause again; a pause made by a hook (an approval) happens again.
- `Cassette(path).fork(step, path=new_path)` replays steps 1 to `step` and makes every later
  call live, recording the whole run (the replayed steps, then the live ones) into
  `new_path`, which then replays on its own; `path` is left as it is. Give the forked run
  another model, instruction or tool (`RunOption`, or other agent objects) to compare what
  follows.
- `Cassette(path, mode="replay", tools_only=True)` answers tool calls only (matched by agent,
  tool name and arguments) and calls the models live: an agent's tools mocked by a
  recording. `as_eval_case()` turns a cassette into an eval case that runs that way.

How it plugs in: a cassette is a `plait.Hooks` among the runner's innermost (inside the
agents' own hooks and the gate of a tool with an approval or a `once` effect, so an approval
is asked and a `once` call journaled as in a live run). Its `wrap_model` and `wrap_tool`
answer a call from the file without calling on, or call on and record what came back; its
`before_run` reads the file. It reads only what every hook is given (`HookContext`: the
call's address, its agent, the tool it runs). Model calls the run makes outside the ReAct
loop (a compaction summary, `Inherit.summary`) go through the same seam
(`HookContext.side_model`), so they are steps like any model call, matched in order with the
other model calls made at their address; an eval's judge is not part of the run and is not
recorded.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from plait.capabilities.cassette_file import (
    STEP,
    ModelStep,
    Raised,
    Request,
    Step,
    ToolStep,
    canonical,
    compare,
    expected_tool,
    first_run,
    make_request,
    message_object,
    parsed,
    plain_messages,
    plain_tools,
    portable,
    portable_action,
    read_steps,
    run_input,
    show,
)
from plait.core.agent import AgentInput
from plait.core.agent_context import HookContext
from plait.core.hooks import Hooks, ModelRequest, end_run
from plait.errors import CassetteDivergence, PlaitError, UsageError
from plait.messages import Message, ToolCall
from plait.models.base import model_error
from plait.tools.base import ToolResult

__all__ = ["Cassette", "Mode"]

Mode = Literal["record", "replay", "auto"]
_MODES = ("record", "replay", "auto")


class Cassette:
    """A recording of a runner's model and tool calls in a JSON-lines file, which replays them.

    `mode` is "record", "replay" or "auto" (replay when the file exists, else record). With
    `tools_only=True` (replaying) only tool calls are answered from the file; models are
    called. Give it to `Runner(..., cassette=...)`; see the module docstring.
    """

    def __init__(
        self, path: str | os.PathLike[str], mode: Mode = "auto", *, tools_only: bool = False
    ) -> None:
        if mode not in _MODES:
            raise UsageError(f"Cassette mode must be 'record', 'replay' or 'auto', got {mode!r}")
        self.path = Path(path)
        self.mode: Mode = mode
        self.replaying = mode == "replay" or (mode == "auto" and self.path.exists())
        if mode == "replay" and not self.path.is_file():
            raise UsageError(f"there is no cassette file '{self.path}' to replay")
        if tools_only and not self.replaying:
            raise UsageError("tools_only=True answers tool calls from a recording: replay one")
        self.tools_only = tools_only
        self.live_after: int | None = None  # a fork: steps after this one are live
        self._steps: list[Step] | None = None  # the recorded steps (read on first use)
        self._out: Path | None = None if self.replaying else self.path  # where steps go
        self._fresh = True  # the output file has not been started
        self._index: dict[tuple[str, ...], deque[Step]] | None = None
        self._count = 0  # steps taken by this cassette's runs so far
        self._input: list[Message] | None = None  # the run's input, written with a step
        self._resuming = False
        self._hooks = _CassetteHooks(self)

    def __repr__(self) -> str:
        return f"Cassette({str(self.path)!r}, mode={self.mode!r})"

    def hooks(self) -> Hooks:
        """Return the hook a runner plugs in (innermost): it reads the file at the start of
        each run and resume, and answers or records each model and tool call."""
        return self._hooks

    def fork(self, step: int, *, path: str | os.PathLike[str]) -> Cassette:
        """Return a cassette that replays steps 1 to `step` of this one, makes every later
        call live, and records the whole run into `path` (this file is not changed).

        Raises:
            CassetteCorrupt: this cassette's file cannot be read.
            UsageError: `step` is not between 0 and the number of steps, or `path` is this
                cassette's own file.
        """
        steps = read_steps(self.path)
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= len(steps):
            raise UsageError(
                f"fork takes a step from 0 to {len(steps)} (the steps of '{self.path}'), "
                f"got {step!r}"
            )
        new = Path(path)
        if new.resolve() == self.path.resolve():
            raise UsageError(f"fork records into a new file, not into '{self.path}' itself")
        forked = Cassette(self.path, "replay")
        forked.path, forked.live_after = new, step
        forked._steps, forked._out = steps, new
        return forked

    def as_eval_case(self, id: str | None = None) -> dict[str, Any]:
        """Return the first run of this cassette as a case of a `plait.eval` eval set.

        The case is `{"id", "input"` (one user message) or `"conversation"` (the input's
        message objects), `"expected_tools"` (every tool call the models asked for, in
        order, as `{"name", "args"}`), `"expected_response"` (the run's last reply, or the
        result of a last tool call that ended it) and `"cassette"` (this file's absolute
        path)`}`. An evaluator runs the case with `Cassette(case["cassette"], mode="replay",
        tools_only=True)`: its tools answered from this recording, its models live.
        `id` defaults to the file's name without its suffix.
        """
        steps = first_run(read_steps(self.path))
        if not steps:
            raise UsageError(f"the cassette '{self.path}' has no steps to make a case of")
        case: dict[str, Any] = {"id": id if id is not None else self.path.stem}
        given = run_input(steps)
        if len(given) == 1 and given[0].role == "user":
            case["input"] = given[0].content
        else:
            case["conversation"] = [message_object(m) for m in given]
        case["expected_tools"] = [
            expected_tool(c.name, c.arguments)
            for s in steps
            if isinstance(s, ModelStep) and s.reply is not None
            for c in s.reply.tool_calls
        ]
        last = steps[-1]
        if isinstance(last, ModelStep):
            case["expected_response"] = None if last.reply is None else last.reply.content
        else:
            case["expected_response"] = last.result
        case["cassette"] = str(self.path.resolve())
        return case

    # --- the calls ------------------------------------------------------------------------

    async def _model_call(
        self, ctx: HookContext, request: ModelRequest, call_next: Callable[..., Awaitable[Any]]
    ) -> Message:
        """Answer a model call from the file, or make it and record the reply (or error)."""
        if self.tools_only:
            reply: Message = await call_next(request)
            return reply
        recorded = make_request(request.messages, request.tools, request.options)
        found = self._replay_model(ctx, recorded)
        if found is not None:
            return found.answer()
        try:
            reply = await call_next(request)
        except Exception as exc:
            error = model_error(ctx.agent_name, exc)
            self._record_model(ctx, recorded, error=error)
            raise error from None if error is exc else exc
        self._record_model(ctx, recorded, reply=reply)
        return reply

    async def _tool_call(
        self, ctx: HookContext, call: ToolCall, call_next: Callable[..., Awaitable[Any]]
    ) -> str | ToolResult:
        """Answer a tool call from the file, or run the tool and record its result (or
        what it raised). A tool that runs an agent always runs: that agent's own calls are
        answered instead."""
        runs_agent = _runs_agent(ctx.tool)
        found = self._replay_tool(ctx, call, runs_agent)
        if found is not None and not runs_agent:
            self._replayed(found)
            return found.answer()
        try:
            result: str | ToolResult = await call_next(call)
        except Exception as exc:
            self._record_tool(ctx, call, exc=exc)
            raise
        self._record_tool(ctx, call, result=result)
        return result

    def _begin(self, given: Sequence[Message] | None) -> None:
        """Start (or resume) a run: read the recording and start the output file; `given`
        is a new run's input."""
        if self.replaying and self._index is None:
            if self._steps is None:
                self._steps = read_steps(self.path)
            self._index = self._build(self._steps)
        if self._out is not None and self._fresh:
            self._out.write_text("", encoding="utf-8")
            self._fresh = False
        self._input = None if given is None else list(given)

    def _build(self, steps: list[Step]) -> dict[tuple[str, ...], deque[Step]]:
        """Index the steps to replay by where their calls are made, each key in order."""
        index: dict[tuple[str, ...], deque[Step]] = {}
        for step in steps:
            if self.live_after is not None and step.step > self.live_after:
                break
            if isinstance(step, ModelStep):
                if self.tools_only:
                    continue
                key: tuple[str, ...] = ("model", step.address)
            elif self.tools_only:
                key = ("tool", step.agent, step.name, canonical(step.arguments))
            else:
                key = ("tool", step.address)
            index.setdefault(key, deque()).append(step)
        return index

    def _take(self, key: tuple[str, ...]) -> Step | None:
        queue = None if self._index is None else self._index.get(key)
        return queue.popleft() if queue else None

    def _missing(self, what: str, recorded: Any, new: Any) -> None:
        """A call the recording does not have: live in a fork (or while recording), else the
        end of the run."""
        if not self.replaying or self.live_after is not None:
            return
        step = self._count + 1
        raise end_run(
            CassetteDivergence(
                f"cassette step {step}: {what}, but the cassette '{self.path}' has "
                f"{'no such call' if recorded is None else 'another'} — recorded: "
                f"{show(recorded)}, new: {show(new)}",
                step=step,
                recorded=recorded,
                new=new,
            )
        )

    def _replay_model(self, ctx: HookContext, request: Request) -> ModelStep | None:
        """Return the recorded step answering this model call (None: call the model)."""
        found = self._take(("model", ctx.address))
        new_messages, new_tools = plain_messages(request.messages), plain_tools(request.tools)
        if found is None:
            what = f"agent '{ctx.agent_name}' made a model call"
            self._missing(what, None, {"messages": new_messages, "tools": new_tools})
            return None
        assert isinstance(found, ModelStep)
        what = f"model call of agent '{ctx.agent_name}'"
        compare(found.step, what, "messages", plain_messages(found.request.messages), new_messages)
        compare(found.step, what, "tools", plain_tools(found.request.tools), new_tools)
        self._replayed(found)
        return found

    def _replay_tool(self, tctx: HookContext, call: ToolCall, runs_agent: bool) -> ToolStep | None:
        """Return the recorded step answering this tool call (None: run the tool)."""
        name, arguments = call.name, call.arguments
        if self.tools_only:
            key: tuple[str, ...] = ("tool", tctx.agent_name, name, canonical(arguments))
        else:
            key = ("tool", tctx.address)
        found = self._take(key)
        if found is None:
            if not runs_agent or not self.tools_only:
                what = f"agent '{tctx.agent_name}' called tool '{name}'"
                new = {"name": name, "arguments": parsed(arguments)}
                self._missing(what, self._next_tool(tctx.agent_name), new)
            return None
        assert isinstance(found, ToolStep)
        what = f"call of tool '{name}' by agent '{tctx.agent_name}'"
        compare(found.step, what, "name", found.name, name)
        compare(found.step, what, "arguments", parsed(found.arguments), parsed(arguments))
        return found

    def _next_tool(self, agent: str) -> dict[str, Any] | None:
        """The first tool call of `agent` still to replay, as `{"name", "arguments"}`."""
        waiting = [
            s
            for queue in (self._index or {}).values()
            for s in queue
            if isinstance(s, ToolStep) and s.agent == agent
        ]
        if not waiting:
            return None
        first = min(waiting, key=lambda s: s.step)
        assert isinstance(first, ToolStep)
        return {"name": first.name, "arguments": parsed(first.arguments)}

    def _replayed(self, step: Step) -> None:
        """Count a replayed step (and copy it into the output file of a fork)."""
        self._count += 1
        if self._out is not None:
            self._write(step.model_copy(update={"step": self._count, "input": None}))

    def _record(self, step: Step) -> None:
        """Count a step that ran live (and write it, when recording)."""
        self._count += 1
        if self._out is not None:
            self._write(step.model_copy(update={"step": self._count}))

    def _write(self, step: Step) -> None:
        if self._input is not None:
            step, self._input = step.model_copy(update={"input": self._input}), None
        line = STEP.dump_json(step, exclude_none=True).decode()
        assert self._out is not None
        with self._out.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    def _record_model(
        self,
        ctx: HookContext,
        request: Request,
        reply: Message | None = None,
        error: PlaitError | None = None,
    ) -> None:
        self._record(
            ModelStep(
                step=0,
                kind="model",
                agent=ctx.agent_name,
                address=ctx.address,
                request=request,
                reply=reply,
                error=None if error is None else portable(error),
            )
        )

    def _record_tool(
        self,
        tctx: HookContext,
        call: ToolCall,
        result: str | ToolResult | None = None,
        exc: Exception | None = None,
    ) -> None:
        step = ToolStep(
            step=0,
            kind="tool",
            agent=tctx.agent_name,
            address=tctx.address,
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
        )
        if isinstance(exc, PlaitError):
            step = step.model_copy(update={"error": portable(exc)})
        elif exc is not None:
            step = step.model_copy(
                update={"raised": Raised(type=type(exc).__name__, message=str(exc))}
            )
        elif isinstance(result, ToolResult):
            step = step.model_copy(
                update={"result": result.content, "action": portable_action(result)}
            )
        else:
            step = step.model_copy(update={"result": result if isinstance(result, str) else ""})
        self._record(step)


class _CassetteHooks(Hooks):
    """The cassette on the seams: it reads the file as a run starts, and answers or records
    each model and tool call."""

    def __init__(self, cassette: Cassette) -> None:
        self._cassette = cassette

    async def on_resume(self, ctx: HookContext, checkpoint_id: str) -> None:
        self._cassette._resuming = True

    async def before_run(self, ctx: HookContext, input: AgentInput) -> None:
        cassette = self._cassette
        resuming, cassette._resuming = cassette._resuming, False
        cassette._begin(None if resuming else input.messages)

    async def wrap_model(
        self, ctx: HookContext, request: ModelRequest, call_next: Callable[..., Awaitable[Any]]
    ) -> Message:
        return await self._cassette._model_call(ctx, request, call_next)

    async def wrap_tool(
        self, ctx: HookContext, call: ToolCall, call_next: Callable[..., Awaitable[Any]]
    ) -> str | ToolResult:
        return await self._cassette._tool_call(ctx, call, call_next)


def _runs_agent(tool: object) -> bool:
    """Whether calling `tool` runs an agent (whose own calls are replayed instead): an
    `AgentTool` says so with `runs_agent`."""
    return getattr(tool, "runs_agent", False) is True
