"""Hooks that act: coroutines at the seams of a run that observe, replace or refuse.

A hook subclasses `Hooks` and overrides the seams it needs; `Runner(hooks=[...])` hooks
every agent of a run, `ChatModelAgent(hooks=[...])` (or `middlewares=`) one agent. Each seam
gets the `HookContext` (an `AgentContext` with more) first. A `before_model`, `after_model`,
`before_tool` or `after_tool` that returns a value replaces what flows on; None leaves it.
Raising a `PlaitError` ends the run with that error (a guardrail, a policy); any other
exception ends it with `HookError`, naming the hook and the seam. `during_model` runs
concurrently with the model call (the input guardrails run there). `wrap_model` and
`wrap_tool` surround the call itself: each is given the next one (`call_next`) and may
answer without calling it, which replaces the call (see `plait.core.wrapped`). Runner hooks
run before agent hooks on the way in and after them on the way out: `before_*` and `wrap_*`
in registration order (the first outermost), `after_*` in reverse.

`HookChain` is how plait calls them: per seam, the tuple of the hooks that override it,
computed once, so a run without hooks pays an emptiness check per seam and nothing more.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeGuard

from plait._util.alongside import all_of
from plait.errors import HookError, PlaitError, UsageError

if TYPE_CHECKING:
    from plait.core.agent import AgentInput
    from plait.core.agent_context import HookContext
    from plait.events import InterruptCtx, RunResult
    from plait.messages import Message, ToolCall, ToolInfo

__all__ = [
    "NO_HOOKS",
    "HookChain",
    "Hooks",
    "ModelRequest",
    "add_global",
    "call_hook",
    "concurrently",
    "end_run",
    "ends_run",
    "notify",
    "remove_global",
    "with_global",
]


@dataclasses.dataclass(frozen=True, slots=True)
class ModelRequest:
    """What one model call sends: the messages, the tools offered and the call's options.

    Change it with `dataclasses.replace(request, messages=(...))`.
    """

    messages: tuple[Message, ...]
    """The messages sent to the model (the agent's history keeps a replacement)."""
    tools: tuple[ToolInfo, ...] = ()
    """The tools offered to the model."""
    options: Mapping[str, Any] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    """The keyword options of the call (`model_options`)."""


class Hooks:
    """Coroutines at the seams of a run; subclass and override the ones you need."""

    async def before_run(self, ctx: HookContext, input: AgentInput) -> None:
        """A run starts (or a resumed run continues) on `input`."""

    async def after_run(self, ctx: HookContext, result: RunResult) -> None:
        """A run ended (finished, paused or failed) with `result`."""

    async def before_agent(self, ctx: HookContext, input: AgentInput) -> None:
        """Agent `ctx.agent_name` starts (or resumes) on `input`."""

    async def after_agent(self, ctx: HookContext, error: PlaitError | None) -> None:
        """Agent `ctx.agent_name` finished, paused or failed (`error`)."""

    async def before_model(self, ctx: HookContext, request: ModelRequest) -> ModelRequest | None:
        """Replace the model request (return None to keep it)."""
        return None

    async def during_model(self, ctx: HookContext, request: ModelRequest) -> None:
        """Run alongside the model call for `request` (after `before_model`): the call's
        reply, or its failure, is held until this returns; raising cancels the call and
        ends the run."""

    async def after_model(
        self, ctx: HookContext, request: ModelRequest, reply: Message
    ) -> Message | None:
        """Replace the model's reply to `request` (return None to keep it)."""
        return None

    async def wrap_model(
        self,
        ctx: HookContext,
        request: ModelRequest,
        call_next: Callable[[ModelRequest], Awaitable[Message]],
    ) -> Message:
        """Surround the model call for `request` (after `before_model`, alongside
        `during_model`, before `after_model`): return `await call_next(request)` (with the
        request changed or not) or a reply of your own, which replaces the call. What this
        raises is the call's failure. In a streamed call, `call_next` streams the model's
        chunks as they come and returns the whole reply; a reply given without calling it
        goes out as one chunk."""
        return await call_next(request)

    async def before_tool(self, ctx: HookContext, call: ToolCall) -> ToolCall | None:
        """Replace a tool call before it runs (return None to keep it)."""
        return None

    async def wrap_tool(
        self, ctx: HookContext, call: ToolCall, call_next: Callable[[ToolCall], Awaitable[Any]]
    ) -> Any:
        """Surround the call of a tool the agent has (after `before_tool`, before
        `after_tool`; `ctx.tool` is the tool): return `await call_next(call)` (a `str` or a
        `ToolResult`, with the actions the tool sent merged in) or a result of your own,
        which replaces the call. What this raises is the tool's failure (told to the model,
        or a `ToolError` with `tool_errors="raise"`)."""
        return await call_next(call)

    async def after_tool(self, ctx: HookContext, call: ToolCall, result: str) -> str | None:
        """Replace a tool's result, the text the model sees (return None to keep it)."""
        return None

    async def on_pause(
        self, ctx: HookContext, interrupts: tuple[InterruptCtx, ...], checkpoint_id: str
    ) -> None:
        """The run paused on `interrupts` and was saved under `checkpoint_id`."""

    async def on_resume(self, ctx: HookContext, checkpoint_id: str) -> None:
        """The run resumes from `checkpoint_id` (the checkpoint is claimed)."""

    async def on_step_saved(self, ctx: HookContext, checkpoint_id: str) -> None:
        """A step checkpoint of the running run was written under `checkpoint_id`."""


Seam = Callable[..., Awaitable[Any]]

_SEAMS = (
    "before_run",
    "after_run",
    "before_agent",
    "after_agent",
    "before_model",
    "during_model",
    "wrap_model",
    "after_model",
    "before_tool",
    "wrap_tool",
    "after_tool",
    "on_pause",
    "on_resume",
    "on_step_saved",
)


class HookChain:
    """The hooks of a run or an agent, per seam: the bound methods that override it, in the
    order they run (`after_*` reversed)."""

    __slots__ = (*_SEAMS, "empty", "last")

    before_run: tuple[Seam, ...]
    after_run: tuple[Seam, ...]
    before_agent: tuple[Seam, ...]
    after_agent: tuple[Seam, ...]
    before_model: tuple[Seam, ...]
    during_model: tuple[Seam, ...]
    wrap_model: tuple[Seam, ...]
    after_model: tuple[Seam, ...]
    before_tool: tuple[Seam, ...]
    wrap_tool: tuple[Seam, ...]
    after_tool: tuple[Seam, ...]
    on_pause: tuple[Seam, ...]
    on_resume: tuple[Seam, ...]
    on_step_saved: tuple[Seam, ...]

    def __init__(self, hooks: Sequence[Hooks] = (), innermost: Sequence[Hooks] = ()) -> None:
        for hook in (*hooks, *innermost):
            if not isinstance(hook, Hooks):
                raise UsageError(f"hooks must subclass plait.Hooks, got {hook!r}")
        self.last: dict[str, tuple[Seam, ...]] = {}  # per seam, the innermost hooks' methods
        # every seam empty, then those some hook overrides (slots: the steps read them fast)
        self.before_run = self.after_run = self.before_agent = self.after_agent = ()
        self.before_model = self.during_model = self.wrap_model = self.after_model = ()
        self.before_tool = self.wrap_tool = self.after_tool = ()
        self.on_pause = self.on_resume = self.on_step_saved = ()
        outer, inner = _by_seam(hooks), _by_seam(innermost)
        self.empty = not (outer or inner)
        for seam in outer.keys() | inner.keys() if inner else outer:
            last = inner.get(seam, ())
            both = outer.get(seam, ()) + last
            setattr(self, seam, both[::-1] if seam.startswith("after") else both)
            if last:
                self.last[seam] = last

    def around(self, inner: HookChain) -> HookChain:
        """Return this chain wrapped around `inner`: this one's `before_*` first, its
        `after_*` last — except its innermost hooks, which run inside `inner`'s (they see
        the request as the agent's hooks leave it)."""
        if inner.empty:
            return self
        if self.empty:
            return inner
        joined = HookChain()
        for seam in _SEAMS:
            outer, own = getattr(self, seam), getattr(inner, seam)
            last = self.last.get(seam, ())
            if seam.startswith("after"):  # outer is (innermost reversed) + (others reversed)
                cut = len(last)
                setattr(joined, seam, outer[:cut] + own + outer[cut:])
            else:
                cut = len(outer) - len(last)
                setattr(joined, seam, outer[:cut] + own + outer[cut:])
        # the innermost stay innermost when this chain is wrapped again
        for seam in set(self.last) | set(inner.last):
            joined.last[seam] = inner.last.get(seam, ()) + self.last.get(seam, ())
        joined.empty = False
        return joined

    def add_inner(self, seam: str, fn: Seam) -> tuple[Seam, ...]:
        """Return the hooks of `seam` with `fn` added inside every one but the innermost
        (the runner's, such as a cassette): an agent's own innermost hook, such as the gate
        in front of a tool's calls."""
        fns: tuple[Seam, ...] = getattr(self, seam)
        cut = len(fns) - len(self.last.get(seam, ()))
        return (*fns[:cut], fn, *fns[cut:])


def _by_seam(hooks: Sequence[Hooks]) -> dict[str, tuple[Seam, ...]]:
    """Return, per seam some of `hooks` override, their bound methods of it, in order."""
    found: dict[str, tuple[Seam, ...]] = {}
    for hook in hooks:
        for seam in _overridden(type(hook)):
            found[seam] = (*found.get(seam, ()), getattr(hook, seam))
    return found


_OVERRIDDEN: weakref.WeakKeyDictionary[type, tuple[str, ...]] = weakref.WeakKeyDictionary()


def _overridden(kind: type[Hooks]) -> tuple[str, ...]:
    """Return the seams that the hook class `kind` overrides (looked at once per class)."""
    found = _OVERRIDDEN.get(kind)
    if found is None:
        found = tuple(s for s in _SEAMS if getattr(kind, s) is not getattr(Hooks, s))
        _OVERRIDDEN[kind] = found
    return found


NO_HOOKS = HookChain()

# Hooks on every run of the process, outside every runner's own (`plait.tracing` adds its
# hook here); `_GLOBAL_CHAIN` is their chain, NO_HOOKS while there are none.
_GLOBAL: list[Hooks] = []
_GLOBAL_CHAIN = NO_HOOKS


def add_global(hook: Hooks) -> None:
    """Hook every run of the process, outermost (around the runner's and agents' hooks),
    from the next run on."""
    global _GLOBAL_CHAIN
    _GLOBAL.append(hook)
    _GLOBAL_CHAIN = HookChain(_GLOBAL)


def remove_global(hook: Hooks) -> None:
    """Stop hooking runs with `hook` (runs under way keep it); no error if it is not there."""
    global _GLOBAL_CHAIN
    if hook in _GLOBAL:
        _GLOBAL.remove(hook)
        _GLOBAL_CHAIN = HookChain(_GLOBAL) if _GLOBAL else NO_HOOKS


def with_global(chain: HookChain) -> HookChain:
    """Return `chain` wrapped in the process-wide hooks (`chain` itself when there are none)."""
    outer = _GLOBAL_CHAIN
    return chain if outer.empty else outer.around(chain)


_ENDS_RUN = "_plait_hook_refusal"  # set on an error a hook raised


async def call_hook(fn: Seam, seam: str, *args: Any) -> Any:
    """Await one hook at `seam`; an exception other than a `PlaitError` becomes a
    `HookError`."""
    try:
        return await fn(*args)
    except PlaitError as exc:
        setattr(exc, _ENDS_RUN, True)  # a refusal ends the run, even in an agent run as a tool
        raise
    except Exception as exc:
        hook = type(getattr(fn, "__self__", fn)).__name__
        err = HookError(
            f"hook {hook}.{seam} raised {type(exc).__name__}: {exc}", hook=hook, seam=seam
        )
        setattr(err, _ENDS_RUN, True)
        raise err from exc


def end_run(exc: PlaitError) -> PlaitError:
    """Mark `exc` to end the whole run from any depth, as a hook's refusal does; return it."""
    setattr(exc, _ENDS_RUN, True)
    return exc


def ends_run(exc: BaseException) -> TypeGuard[PlaitError]:
    """Whether `exc` was raised by a hook (it ends the whole run, at any depth)."""
    return isinstance(exc, PlaitError) and exc.__dict__.get(_ENDS_RUN, False) is True


async def notify(fns: tuple[Seam, ...], seam: str, *args: Any) -> PlaitError | None:
    """Await each of `fns` at `seam` (one that only observes); return the error that
    stopped them."""
    try:
        for fn in fns:
            await call_hook(fn, seam, *args)
    except PlaitError as exc:
        return exc
    return None


async def concurrently(fns: tuple[Seam, ...], seam: str, *args: Any) -> None:
    """Await each of `fns` at `seam` concurrently; the first to raise cancels the others and
    its error stands."""
    await all_of([functools.partial(call_hook, fn, seam, *args) for fn in fns])
