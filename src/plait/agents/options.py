"""Per-run options: change what the `ChatModelAgent`s of one run use, leaving them as built.

`RunOption` is Eino's `AgentRunOption` with `DesignateAgent`:

```python
runner.run(messages, options=[
    RunOption(model_options={"temperature": 0}),               # every ChatModelAgent
    RunOption(agent="writer", instruction="Answer in French."),  # only "writer"
])
```

For each agent the options are merged field by field: first those with `agent=None`, then
those naming the agent, each in the order given, so a named option wins over `agent=None` and
a later one over an earlier; a field left None changes nothing. `model_options` are merged key
by key over the agent's own; `extra_tools` add up (every option's, in that order) and are
offered besides the agent's tools; the other fields replace the agent's (`tools=` its tools,
the `exit` tool of `exit_tool=True` and the tools a team adds staying; `output_type=` its
structured output, with the agent's `output_retries`). The JSON-able fields
(`instruction`, a `model` given as a spec string, `model_options`, `max_iterations`) are saved
with the run's checkpoints, so they hold across pauses and resumes; `Runner.resume(...,
options=[...])` adds options after them (tools, extra tools, output types and model objects,
which are not saved: give them again). That
an option gave a model object is saved too: a resume that does not give a model for the same
agents again is refused (`ResumeError`), rather than going on with the agents' own models.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from plait.capabilities.structured import StructuredOutput
from plait.errors import ResumeError, UsageError
from plait.models.base import ChatModel
from plait.models.spec import resolve_model
from plait.tools.base import Tool, Toolset
from plait.tools.function import FunctionTool

__all__ = ["AgentOptions", "RunOption", "RunOptions", "check_options"]

_SAVED = ("instruction", "model", "model_options", "max_iterations")


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class RunOption:
    """One run's change to its `ChatModelAgent`s (see the module's docstring).

    Attributes:
        agent: The name of the agent it applies to; None: every `ChatModelAgent` of the run.
        instruction: The system message instead of the agent's (placeholders filled the
            same way).
        model: A `ChatModel`, or a spec string such as "openai:gpt-4o-mini".
        model_options: Options for every model call, over the agent's own.
        max_iterations: The most model calls the agent makes in one run (at least 1).
        tools: `Tool`s, `Toolset`s or plain functions, instead of the agent's tools.
        extra_tools: `Tool`s, `Toolset`s or plain functions offered besides the agent's
            tools (its own, or those `tools` gives); one named like a tool the agent has is
            a `UsageError` when the agent starts.
        output_type: A pydantic model, dataclass or `TypedDict` the agent's answer must be
            (as `ChatModelAgent(output_type=...)`), instead of the agent's own.
    """

    agent: str | None = None
    instruction: str | None = None
    model: ChatModel | str | None = None
    model_options: Mapping[str, Any] | None = None
    max_iterations: int | None = None
    tools: Sequence[Tool | Toolset | Callable[..., Any]] | None = None
    extra_tools: Sequence[Tool | Toolset | Callable[..., Any]] | None = None
    output_type: Any = None

    def __post_init__(self) -> None:
        if self.agent is not None and (not isinstance(self.agent, str) or not self.agent):
            raise UsageError(
                f"RunOption: agent must be an agent's name or None, not {self.agent!r}"
            )
        if self.instruction is not None and not isinstance(self.instruction, str):
            raise UsageError("RunOption: instruction must be a str")
        options = self.model_options
        if options is not None and (
            not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options)
        ):
            raise UsageError("RunOption: model_options must be a mapping with str keys")
        limit = self.max_iterations
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise UsageError(
                f"RunOption: max_iterations must be an int of at least 1, not {limit!r}"
            )
        for field, tools in (("tools", self.tools), ("extra_tools", self.extra_tools)):
            if tools is not None and (
                isinstance(tools, str | bytes) or not isinstance(tools, Sequence)
            ):
                raise UsageError(f"RunOption: {field} must be a list of tools or functions")
        if self.model is not None and not isinstance(self.model, str):
            resolve_model(self.model, owner="RunOption")  # refuses what is not a model
        StructuredOutput.of(self.output_type, 0, "RunOption")  # refuses an unusable type


def check_options(options: object) -> tuple[RunOption, ...]:
    """Return `options` (a list of `RunOption`, or None) as a tuple.

    Raises:
        UsageError: It is something else.
    """
    if options is None:
        return ()
    if isinstance(options, RunOption | str | bytes) or not isinstance(options, Sequence):
        raise UsageError(f"options takes a list of RunOption, got {type(options).__name__}")
    for index, option in enumerate(options):
        if not isinstance(option, RunOption):
            raise UsageError(f"options[{index}] is {option!r}, not a RunOption")
    return tuple(options)


@dataclasses.dataclass(slots=True)
class AgentOptions:
    """What one agent uses in this run instead of its own settings (None: its own)."""

    instruction: str | None = None
    model: ChatModel | None = None
    model_options: dict[str, Any] | None = None  # merged over the agent's own
    max_iterations: int | None = None
    tools: tuple[Tool | Toolset, ...] | None = None
    extra_tools: tuple[Tool | Toolset, ...] | None = None  # besides the agent's tools
    output_type: Any = None

    def merged(self, later: AgentOptions) -> AgentOptions:
        """Return these options with `later`'s set fields over them (its extra tools after
        these)."""
        options = self.model_options
        if later.model_options is not None:
            options = {**(options or {}), **later.model_options}
        extra = self.extra_tools
        if later.extra_tools is not None:
            extra = (*(extra or ()), *later.extra_tools)
        return AgentOptions(
            instruction=_first(later.instruction, self.instruction),
            model=_first(later.model, self.model),
            model_options=options,
            max_iterations=_first(later.max_iterations, self.max_iterations),
            tools=_first(later.tools, self.tools),
            extra_tools=extra,
            output_type=_first(later.output_type, self.output_type),
        )


def _first(value: Any, default: Any) -> Any:
    return default if value is None else value


def _resolve(option: RunOption) -> AgentOptions:
    """Return an option's settings with its model built and its functions made tools."""
    owner = "RunOption" if option.agent is None else f"RunOption for agent '{option.agent}'"
    model = None if option.model is None else resolve_model(option.model, owner=owner)
    return AgentOptions(
        instruction=option.instruction,
        model=model,
        model_options=None if option.model_options is None else dict(option.model_options),
        max_iterations=option.max_iterations,
        tools=_as_tools(option.tools),
        extra_tools=_as_tools(option.extra_tools),
        output_type=option.output_type,
    )


def _as_tools(
    given: Sequence[Tool | Toolset | Callable[..., Any]] | None,
) -> tuple[Tool | Toolset, ...] | None:
    """Return `given` with its plain functions made tools (None stays None)."""
    if given is None:
        return None
    return tuple(t if isinstance(t, Tool | Toolset) else FunctionTool(t) for t in given)


class RunOptions:
    """The options of one run, resolved once, and merged for each agent on first use."""

    __slots__ = ("_by_agent", "_options", "_resolved")

    def __init__(self, options: Sequence[RunOption]) -> None:
        self._options = tuple(options)
        self._resolved = [_resolve(option) for option in self._options]
        self._by_agent: dict[str, AgentOptions | None] = {}

    @classmethod
    def of(
        cls, options: Sequence[RunOption], saved: Sequence[Mapping[str, Any]] = ()
    ) -> RunOptions | None:
        """Return the run's options: `saved` ones (from a checkpoint) first, then `options`;
        None when there are none.

        Raises:
            UsageError: A model spec cannot be built.
        """
        given = [*(RunOption(**_fields(entry)) for entry in saved), *options]
        return cls(given) if given else None

    @classmethod
    def resumed(
        cls, options: Sequence[RunOption], saved: Sequence[Mapping[str, Any]], checkpoint_id: str
    ) -> RunOptions | None:
        """Return the options of a resumed run: `saved` ones first, then `options`.

        Raises:
            ResumeError: The paused run had a model object that `options` do not give again.
            UsageError: A model spec cannot be built.
        """
        for entry in saved:
            agent = entry.get("agent")
            if entry.get("model_object") and not any(
                o.model is not None and o.agent in (None, agent) for o in options
            ):
                raise ResumeError(_not_given(checkpoint_id, agent), agent_name=agent)
        return cls.of(options, saved)

    def for_agent(self, name: str) -> AgentOptions | None:
        """Return what agent `name` uses in this run, or None when no option applies to it."""
        if name in self._by_agent:
            return self._by_agent[name]
        merged: AgentOptions | None = None
        for wanted in (None, name):
            for option, resolved in zip(self._options, self._resolved, strict=True):
                if option.agent == wanted:
                    merged = resolved if merged is None else merged.merged(resolved)
        self._by_agent[name] = merged
        return merged

    def saved(self) -> list[dict[str, Any]]:
        """Return the JSON-able fields of each option, as a checkpoint keeps them (an option
        with none, such as one of tools or extra tools only, is left out); an option whose
        model object no later option replaces is kept with `model_object` set, so a resume
        asks for it."""
        kept: list[dict[str, Any]] = []
        for index, option in enumerate(self._options):
            entry: dict[str, Any] = {
                "agent": option.agent,
                "instruction": option.instruction,
                "model": option.model if isinstance(option.model, str) else None,
                "model_options": None
                if option.model_options is None
                else dict(option.model_options),
                "max_iterations": option.max_iterations,
            }
            if not isinstance(option.model, str | None) and not self._replaced(index):
                entry["model_object"] = True
            if any(entry[key] is not None for key in _SAVED) or "model_object" in entry:
                kept.append(entry)
        return kept

    def _replaced(self, index: int) -> bool:
        """Whether a later option gives a model to the same agents as option `index`."""
        agent = self._options[index].agent
        return any(o.model is not None and o.agent == agent for o in self._options[index + 1 :])


def _fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Return the `RunOption` fields of a saved option."""
    return {key: value for key, value in entry.items() if key != "model_object"}


def _not_given(checkpoint_id: str, agent: str | None) -> str:
    """Return why a resume without the model object of the paused run is refused."""
    whose = "every agent" if agent is None else f"agent '{agent}'"
    again = "RunOption(model=...)" if agent is None else f"RunOption(agent='{agent}', model=...)"
    return (
        f"checkpoint '{checkpoint_id}' was run with a model object as the option 'model' for "
        f"{whose}, which is not saved: give it again with resume(..., options=[{again}]) "
        "(the run is still paused)"
    )
