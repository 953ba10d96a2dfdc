"""OpenTelemetry spans for every run of the process, named as the GenAI semantic conventions
name them (extra `plait[otel]`).

```python
from opentelemetry.sdk.trace import TracerProvider
from plait import tracing

tracing.instrument(TracerProvider())  # every run of every Runner, from the next run on
...
tracing.uninstrument()
```

A run gives these spans, nested as the run nests (by run path: a transfer target under the
agent that transferred, a team's members, workflow children and graph nodes' agents under
their composite, an agent run as a tool under its `execute_tool` span):

- `invoke_agent {agent}`: `gen_ai.operation.name` "invoke_agent", `gen_ai.agent.name`;
  events `handoff` (the agent called the transfer tool) and `interrupt` (it paused).
- `chat {model}`: `gen_ai.operation.name` "chat", `gen_ai.request.model`,
  `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens` (ints, 0 when the model reports
  none), `gen_ai.response.finish_reasons`. It is the current span while the model is called,
  so an instrumented HTTP client's span nests under it.
- `execute_tool {tool}`: `gen_ai.operation.name` "execute_tool", `gen_ai.tool.name`,
  `gen_ai.tool.call.id`.

With `capture_content=True` the contents are recorded too, as JSON strings:
`gen_ai.input.messages` and `gen_ai.output.messages` on `chat`, `gen_ai.tool.call.arguments`
and `gen_ai.tool.call.result` on `execute_tool`, `plait.interrupt.info` on `interrupt`. A
failing agent, model call or tool has status ERROR and `error.type` (the error's class name).
The run's root span is its outermost agent's `invoke_agent` span, a child of the span current
where the run started; its W3C `traceparent` is saved with the run's checkpoints, so a
resumed run's root span links to the paused run's, in any process. It is all a
`plait.Hooks`, added to every run outside its own hooks.

With an SDK `TracerProvider`, tracing also keeps the finished spans of the process's last
`keep_runs` runs, by checkpoint id (`run_spans`): the dev page draws them as a timeline.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from typing import TYPE_CHECKING, Any

from plait.capabilities.genai_json import dumps, genai_message, messages_json
from plait.core.hooks import Hooks, ModelRequest, add_global, remove_global
from plait.errors import PlaitError, UsageError
from plait.messages import Message, ToolCall
from plait.tools.base import TRANSFER_TOOL

if TYPE_CHECKING:
    from collections.abc import Mapping
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span, Tracer, TracerProvider

    from plait.capabilities.span_keeper import RunSpans, SpanKeeper
    from plait.core.agent import AgentInput
    from plait.core.agent_context import HookContext
    from plait.events import InterruptCtx, RunResult

__all__ = ["instrument", "run_spans", "uninstrument"]

# The run value (`HookContext.keep_run_value`) holding the W3C `traceparent` of the run's root
# span: saved with its checkpoints, for the link of the run that resumes it.
_TRACEPARENT = "plait.traceparent"

_OP = "gen_ai.operation.name"
_ACTIVE: _Tracing | None = None
# The span keeper added to each SDK provider (once: a provider cannot drop a processor).
_KEEPERS: weakref.WeakKeyDictionary[Any, SpanKeeper] = weakref.WeakKeyDictionary()


def instrument(
    tracer_provider: TracerProvider | None = None,
    *,
    capture_content: bool = False,
    keep_runs: int = 100,
) -> None:
    """Trace every run of the process from the next run on, with a tracer from
    `tracer_provider` (None: the global provider, `opentelemetry.trace.get_tracer_provider()`,
    read now). The global provider is never replaced.

    When the provider is the SDK's `TracerProvider`, plait adds a span processor to it that
    keeps the finished spans of the last `keep_runs` runs of this process (0: none), read
    with `run_spans`.

    Raises:
        UsageError: tracing is on already (call `uninstrument()` first), OpenTelemetry is
            not installed, or `keep_runs` is not an int >= 0.
    """
    global _ACTIVE
    if isinstance(keep_runs, bool) or not isinstance(keep_runs, int) or keep_runs < 0:
        raise UsageError(f"keep_runs must be an int >= 0, got {keep_runs!r}")
    if _ACTIVE is not None:
        raise UsageError(
            "tracing is on already; call plait.tracing.uninstrument() before instrument() "
            "with another provider or capture_content"
        )
    try:
        from opentelemetry import trace
    except ImportError:
        raise UsageError("plait.tracing needs OpenTelemetry: pip install 'plait[otel]'") from None
    from plait import __version__

    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    hook = _Tracing(
        provider.get_tracer("plait", __version__),
        capture_content=capture_content,
        keeper=_keeper(provider, keep_runs),
    )
    add_global(hook)
    _ACTIVE = hook


def uninstrument() -> None:
    """Stop tracing runs that start from now on, and forget the kept spans (no error when
    tracing is off)."""
    global _ACTIVE
    hook, _ACTIVE = _ACTIVE, None
    if hook is not None:
        remove_global(hook)
        if hook.keeper is not None:
            hook.keeper.stop()


def run_spans(checkpoint_id: str) -> list[dict[str, Any]] | None:
    """Return the finished spans this process kept of the run known by `checkpoint_id` (the
    id it was started under or resumes, or the id it paused under), in the order they
    started, as JSON data: `name`, `trace_id`, `span_id`, `parent_id` (None for a span
    without a parent), `kind`, `start_ns` and `end_ns` (ns since the epoch), `duration_ms`,
    `attributes`, `status` (`code` "UNSET", "OK" or "ERROR", and `description`), `events`
    (`name`, `time_ns`, `attributes`) and `links`. A resumed run's spans replace those of the
    run it resumes. [] for a run this process did not trace, or has forgotten; None when
    tracing keeps no spans (it is off, its provider is not the SDK's, or `keep_runs` is 0).
    """
    hook = _ACTIVE
    keeper = None if hook is None else hook.keeper
    if keeper is None:
        return None
    return keeper.spans(checkpoint_id)


def _keeper(provider: object, keep_runs: int) -> SpanKeeper | None:
    """Return the span keeper of an SDK `provider`, added to it on first use (None for any
    other provider, or when no run is to be kept)."""
    if keep_runs == 0:
        return None
    try:
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider

        from plait.capabilities.span_keeper import SpanKeeper
    except ImportError:
        return None
    if not isinstance(provider, SdkTracerProvider):
        return None
    keeper = _KEEPERS.get(provider)
    if keeper is None:
        keeper = _KEEPERS[provider] = SpanKeeper()
        provider.add_span_processor(keeper)
    keeper.start(keep_runs)
    return keeper


class _Node:
    """One agent or tool span of a run, at its place (address) in the run."""

    __slots__ = ("address", "base", "context", "model", "open", "outer", "path", "root", "span")

    def __init__(self, address: str, path: tuple[str, ...], span: Span, base: Context) -> None:
        self.address = address
        self.path = path
        self.span = span
        self.base = base  # the context the run started in
        self.context: Context | None = None  # what its children start in (made when needed)
        self.open = True
        self.outer: _Node | None = None  # an open agent at the same place it runs inside
        self.root = False  # a root span of the run (nothing of the run above it)
        self.model: tuple[object, str] | None = None  # an agent's model and its name


class _Run:
    """The spans of one run."""

    __slots__ = (
        "chats",
        "kept",
        "link",
        "parent",
        "paths",
        "pending",
        "root",
        "spans",
        "tools",
    )

    def __init__(self, parent: Context) -> None:
        self.parent = parent  # where root spans start: the context current at the run's start
        self.kept: RunSpans | None = None  # where the span keeper keeps its finished spans
        self.spans: dict[str, _Node] = {}  # agents (the latest at each place) and tools
        self.paths: dict[tuple[str, ...], _Node] = {}  # agents by run path (the latest)
        self.tools: dict[str, _Node] = {}  # the open tool spans, by address
        # open chat spans, with the token of their context and the task that attached it
        self.chats: dict[str, tuple[Span, Token[Context], object]] = {}
        self.pending: list[tuple[Span, int]] = []  # paused agents' spans: ended at on_pause
        self.link: Link | None = None  # the paused run's root span, when this run resumes it
        self.root: Span | None = None


class _Tracing(Hooks):
    """The hook that makes the spans (one per `instrument()`)."""

    def __init__(
        self, tracer: Tracer, *, capture_content: bool, keeper: SpanKeeper | None = None
    ) -> None:
        from opentelemetry import context as otel_context
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        self._tracer = tracer
        self._capture = capture_content
        self.keeper = keeper
        self._key = f"plait.tracing:{id(self)}"
        self._attach = otel_context.attach
        self._detach = otel_context.detach
        self._current = otel_context.get_current
        self._in_context = trace.set_span_in_context
        self._internal = trace.SpanKind.INTERNAL
        self._client = trace.SpanKind.CLIENT
        self._status = Status
        self._error = StatusCode.ERROR

    # --- the run's spans ------------------------------------------------------------------

    def _run(self, ctx: HookContext) -> _Run:
        extras = ctx.extras
        run: _Run | None = extras.get(self._key)
        if run is None:
            run = extras[self._key] = _Run(self._current())
            keeper = self.keeper
            if keeper is not None:
                run.parent, run.kept = keeper.mark(run.parent)
                if ctx.checkpoint_id is not None:
                    keeper.name(ctx.checkpoint_id, run.kept)
        return run

    def _parent(self, run: _Run, ctx: HookContext) -> _Node | None:
        """The span an agent entering at `ctx` nests under: an agent still open at its place
        (a coordinator that shares its team's), else the closest span above its place (an
        agent, or the tool call that runs it), unless the agent one step up its run path
        (the one that transferred to it) lies under that one."""
        address = ctx.address
        here = run.spans.get(address)
        if here is not None and here.open:
            return here
        above = self._above(run, address)
        path = ctx.run_path
        if len(path) > 1:
            caller = run.paths.get(path[:-1])
            if caller is not None and (
                above is None
                or caller.address == above.address
                or caller.address.startswith(above.address + ";")
            ):
                return caller
        return above

    @staticmethod
    def _above(run: _Run, address: str) -> _Node | None:
        while True:
            address, sep, _ = address.rpartition(";")
            if not sep:
                return None
            found = run.spans.get(address)
            if found is not None:
                return found

    def _context(self, node: _Node) -> Context:
        """The context the children of `node` start in."""
        context = node.context
        if context is None:
            context = node.context = self._in_context(node.span, node.base)
        return context

    def _fail(self, span: Span, error: BaseException) -> None:
        span.set_status(self._status(self._error, f"{type(error).__name__}: {error}"))
        span.set_attribute("error.type", type(error).__name__)
        span.record_exception(error)

    def _leave(self, token: Token[Context], task: object) -> None:
        """Make the context current before a chat span current again, in the task that made
        the span current (a run left unfinished, whose generators the event loop closes as it
        shuts down, ends its spans in another task: that task's context has nothing to undo)."""
        if asyncio.current_task() is task:
            self._detach(token)

    @staticmethod
    def _flush(run: _Run) -> None:
        """End the paused agents' spans, at the times they ended."""
        pending, run.pending = run.pending, []
        for span, ended in pending:
            span.end(end_time=ended)

    # --- seams ------------------------------------------------------------------------------

    async def before_run(self, ctx: HookContext, input: AgentInput) -> None:
        self._run(ctx)

    async def on_resume(self, ctx: HookContext, checkpoint_id: str) -> None:
        run = self._run(ctx)
        run.link = _link(ctx.run_value(_TRACEPARENT), checkpoint_id)
        if run.kept is not None and self.keeper is not None:
            self.keeper.name(checkpoint_id, run.kept)

    async def before_agent(self, ctx: HookContext, input: AgentInput) -> None:
        run = self._run(ctx)
        name = ctx.agent_name
        attributes = {_OP: "invoke_agent", "gen_ai.agent.name": name}
        parent = self._parent(run, ctx)
        if parent is None:
            first = run.root is None
            links = [run.link] if first and run.link is not None else None
            span = self._tracer.start_span(
                f"invoke_agent {name}",
                context=run.parent,
                kind=self._internal,
                attributes=attributes,
                links=links,
            )
            if first:
                run.root = span
                context = span.get_span_context()
                if context.is_valid:
                    ctx.keep_run_value(
                        _TRACEPARENT,
                        f"00-{context.trace_id:032x}-{context.span_id:016x}-"
                        f"{context.trace_flags:02x}",
                    )
        else:
            span = self._tracer.start_span(
                f"invoke_agent {name}",
                context=self._context(parent),
                kind=self._internal,
                attributes=attributes,
            )
        address, path = ctx.address, ctx.run_path
        node = _Node(address, path, span, run.parent)
        node.root = parent is None
        if parent is not None and parent.address == address:
            node.outer = parent  # restored when this one ends
        run.spans[address] = node
        run.paths[path] = node

    async def after_agent(self, ctx: HookContext, error: PlaitError | None) -> None:
        run: _Run | None = ctx.extras.get(self._key)
        if run is None:
            return
        address = ctx.address
        node = run.spans.get(address)
        if node is None or not node.open or address in run.tools:
            return
        chat = run.chats.pop(address, None)
        if chat is not None:  # the model call failed, or was refused (no `after_model`)
            span, token, task = chat
            if error is not None:
                self._fail(span, error)
            self._leave(token, task)
            span.end()
        if run.tools:  # tool calls that failed the run, paused or were stopped
            below = address + ";"
            for key in [k for k in run.tools if k.startswith(below)]:
                tool = run.tools.pop(key)
                run.spans.pop(key, None)
                tool.open = False
                failed = getattr(error, "call_id", None)  # a tool error names its call
                if error is not None and (failed is None or key.endswith(f":{failed}")):
                    self._fail(tool.span, error)
                tool.span.end()
        node.open = False
        outer = node.outer
        if outer is not None:
            run.spans[address] = outer
            run.paths[outer.path] = outer
        span = node.span
        if error is not None:
            self._fail(span, error)
        if node.root:
            span.end()
            self._flush(run)
        elif error is None and ctx.paused:
            run.pending.append((span, time.time_ns()))  # its interrupt event comes first
        else:
            span.end()

    async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
        run = self._run(ctx)
        address = ctx.address
        node = run.spans.get(address)
        if node is None:
            model = _model_name(ctx.model, request.options)
            context = run.parent
        else:
            model = _cached_name(node, ctx.model, request.options)
            context = self._context(node)
        span = self._tracer.start_span(
            f"chat {model}",
            context=context,
            kind=self._client,
            attributes={_OP: "chat", "gen_ai.request.model": model},
        )
        token = self._attach(self._in_context(span))
        run.chats[address] = (span, token, asyncio.current_task())

    async def after_model(self, ctx: HookContext, request: ModelRequest, reply: Message) -> None:
        run: _Run | None = ctx.extras.get(self._key)
        chat = None if run is None else run.chats.pop(ctx.address, None)
        if chat is None:
            return
        span, token, task = chat
        usage = reply.usage
        finish = "tool_calls" if reply.tool_calls else "stop"
        span.set_attributes(
            {
                "gen_ai.usage.input_tokens": usage.input_tokens if usage is not None else 0,
                "gen_ai.usage.output_tokens": usage.output_tokens if usage is not None else 0,
                "gen_ai.response.finish_reasons": (finish,),
            }
        )
        if self._capture:
            span.set_attribute("gen_ai.input.messages", messages_json(request.messages))
            output = [{**genai_message(reply), "finish_reason": finish}]
            span.set_attribute("gen_ai.output.messages", dumps(output))
        self._leave(token, task)
        span.end()

    async def before_tool(self, ctx: HookContext, call: ToolCall) -> None:
        run = self._run(ctx)
        address = ctx.address
        agent = self._above(run, address)
        attributes = {_OP: "execute_tool", "gen_ai.tool.name": call.name}
        if call.id:
            attributes["gen_ai.tool.call.id"] = call.id
        if self._capture:
            attributes["gen_ai.tool.call.arguments"] = call.arguments
        span = self._tracer.start_span(
            f"execute_tool {call.name}",
            context=self._context(agent) if agent is not None else run.parent,
            kind=self._internal,
            attributes=attributes,
        )
        node = _Node(address, ctx.run_path, span, run.parent)
        run.spans[address] = run.tools[address] = node

    async def after_tool(self, ctx: HookContext, call: ToolCall, result: str) -> None:
        run: _Run | None = ctx.extras.get(self._key)
        if run is None:
            return
        address = ctx.address
        node = run.tools.pop(address, None)
        if node is None:
            return
        node.open = False
        run.spans.pop(address, None)  # nothing nests under a finished tool call
        span = node.span
        failure = ctx.tool_error
        if failure is not None:
            self._fail(span, failure)
        if self._capture:
            span.set_attribute("gen_ai.tool.call.result", result)
        span.end()
        if call.name == TRANSFER_TOOL and failure is None:
            agent = self._above(run, address)
            if agent is not None:
                agent.span.add_event(
                    "handoff",
                    {
                        "plait.handoff.from_agent": ctx.agent_name,
                        "plait.handoff.to_agent": _target(call.arguments),
                    },
                )

    async def on_pause(
        self, ctx: HookContext, interrupts: tuple[InterruptCtx, ...], checkpoint_id: str
    ) -> None:
        run: _Run | None = ctx.extras.get(self._key)
        if run is None:
            return
        if run.kept is not None and self.keeper is not None:
            self.keeper.name(checkpoint_id, run.kept)  # a resumed run pauses under a new id
        for interrupt in interrupts:
            span = self._recording_owner(run, interrupt.address)
            if span is None:
                continue
            attributes = {
                "plait.interrupt.id": interrupt.id,
                "plait.interrupt.address": interrupt.address,
                "plait.checkpoint.id": checkpoint_id,
            }
            if self._capture:
                attributes["plait.interrupt.info"] = dumps(interrupt.info)
            span.add_event("interrupt", attributes)
        self._flush(run)

    def _recording_owner(self, run: _Run, address: str) -> Span | None:
        """The span of the agent that paused at `address` (a tool call, a graph node or the
        agent itself), or of the closest agent above it whose span is still open."""
        node = run.spans.get(address)
        if node is None or _is_tool(node):
            node = self._above(run, address)
        while node is not None:
            if not _is_tool(node) and node.span.is_recording():
                return node.span
            node = self._above(run, node.address)
        return None

    async def after_run(self, ctx: HookContext, result: RunResult) -> None:
        run: _Run | None = ctx.extras.get(self._key)
        if run is None:
            return
        for span, token, task in run.chats.values():  # left open by a run that was stopped
            self._leave(token, task)
            span.end()
        run.chats.clear()
        for node in run.tools.values():
            node.span.end()
        run.tools.clear()
        self._flush(run)
        del ctx.extras[self._key]  # the run is over: let its spans go


def _is_tool(node: _Node) -> bool:
    """Whether `node` is a tool call's span (not an agent's)."""
    return node.address.rpartition(";")[2].startswith("tool:")


def _link(traceparent: Any, checkpoint_id: str) -> Link | None:
    """The link to the span a W3C `traceparent` names (None when it names none)."""
    from opentelemetry.trace import Link, SpanContext, TraceFlags

    if not isinstance(traceparent, str):
        return None
    parts = traceparent.split("-")
    if len(parts) != 4:
        return None
    try:
        trace_id, span_id, flags = (int(p, 16) for p in parts[1:])
    except ValueError:
        return None
    context = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))
    if not context.is_valid:
        return None
    return Link(context, {"plait.checkpoint.id": checkpoint_id})


def _model_name(model: object, options: Mapping[str, Any]) -> str:
    """The model's name: the `model` option, else the model's `model` (or `name`)
    attribute, else its class name."""
    given = options.get("model")
    if isinstance(given, str) and given:
        return given
    for attribute in ("model", "model_name", "name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__ if model is not None else "unknown"


def _cached_name(node: _Node, model: object, options: Mapping[str, Any]) -> str:
    """The model's name, kept with the agent's span while the agent keeps its model."""
    if "model" in options:
        return _model_name(model, options)
    cached = node.model
    if cached is None or cached[0] is not model:
        cached = node.model = (model, _model_name(model, options))
    return cached[1]


def _target(arguments: str) -> str:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return ""
    name = parsed.get("agent_name") if isinstance(parsed, dict) else None
    return name if isinstance(name, str) else ""
