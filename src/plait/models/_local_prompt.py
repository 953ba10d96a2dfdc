"""How `LocalModel` puts one step to its model: the options it may take and the prompt.

A step is rendered as a few-shot completion prompt (a log of steps, each one JSON array)
from the agent's instruction, its tools and the history. Its options are the tools it may
call and, when it may answer, the final answer, each with the schema of its value: a tool's
parameters with every string bounded; an answer as one sentence, held after a tool result
to what the result says (`steer=True`), or the agent's output schema. The engine process
scores the options against the user's request, under the labels given here, and decodes the
chosen one's value under the grammar of its schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plait.errors import UsageError
from plait.messages import Message
from plait.models.base import OutputSchema
from plait.tools.base import TRANSFER_TOOL, ToolInfo

__all__ = ["ANSWER", "Step", "answer_schema", "build_step"]

ANSWER = "answer"
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

UnitsAgent: Converts between units of measure
A request for UnitsAgent: 3 km in miles

{_ANSWER_LABEL}
A request for answer: How many strings does a violin have?

TrafficAgent: Gives road traffic conditions
A request for TrafficAgent: Is the highway to Lyon busy right now?

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


@dataclass
class Step:
    """One step as the engine process takes it (it is sent there as a dict)."""

    prompt: str  # the log so far, ending with "Step:"
    keep: int  # how many leading characters of the prompt are fixed for this agent
    options: dict[str, Any]  # name -> the schema of its value (ANSWER: the answer string)
    scored: bool  # choose among several options by scoring (else one grammar admits all)
    request: str  # what the options are scored against: the user's latest request
    labels: dict[str, str | list[str]]  # option or enum value -> the text(s) it is scored under
    route_examples: str = _ROUTE_EXAMPLES  # shown before the labels when answering is an option
    bias: dict[str, float] = field(default_factory=lambda: {ANSWER: _ANSWER_BIAS})


def build_step(
    messages: Sequence[Message],
    tools: Sequence[ToolInfo],
    tool_choice: Any,
    output: OutputSchema | None,
    *,
    steer: bool,
    answer_chars: int,
    string_chars: int,
) -> Step:
    """Choose the options of this step and render the prompt (the answer is JSON for
    `output`'s schema when it is given)."""
    offered = {t.name: t for t in tools}
    if ANSWER in offered:
        raise UsageError(f"LocalModel reserves the tool name {ANSWER!r} for final answers")
    names, answer = _choices(messages, offered, tool_choice, steer)
    options = {name: _bounded(offered[name].parameters, string_chars) for name in names}
    if answer:
        if output is not None:
            options[ANSWER] = _bounded(answer_schema(output.schema), string_chars)
        elif steer and messages and messages[-1].role == "tool":
            options[ANSWER] = _grounded(answer_chars, _results(messages), _request(messages))
        else:
            options[ANSWER] = _sentence(answer_chars)
    labels: dict[str, str | list[str]] = {
        t.name: f"{t.name}: {_one_line(t.description)}" for t in tools
    }
    labels.update(_agent_labels(tools))
    labels[ANSWER] = _ANSWER_LABELS
    prompt, keep = _render(messages, tools)
    return Step(prompt, keep, options, steer, _request(messages), labels)


def _choices(
    messages: Sequence[Message], offered: Mapping[str, ToolInfo], tool_choice: Any, steer: bool
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
    if not steer:
        return tuple(offered), True
    if messages and messages[-1].role == "tool":
        return (), True
    own = tuple(name for name in offered if name not in (TRANSFER_TOOL, _EXIT_TOOL))
    if own:
        return own, False
    if TRANSFER_TOOL in offered:  # a router: transfer, or answer itself
        return (TRANSFER_TOOL,), True
    return (), True


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
                lines.append(f"Step: {json.dumps([ANSWER, _one_line(message.content)])}")
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


_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_TEXT_CHARS = 60  # the longest text value of a result an answer is made to quote
_BEFORE, _AFTER = 8, 4  # the most words an answer may have before and after what it states
# Words an answer may use besides those of the request and the results: it words what the
# tool returned, and nothing else can enter it (no city, figure or fact of its own).
_GLUE_TEXT = (
    "a an the is are was it it's its there this that in of and at for on with to as by "
    "now today currently right so sorry no equals here times plus minus divided percent "
    "weather"
)
_GLUE = _GLUE_TEXT.split()
_NUMERIC = re.compile(r"[0-9+*/%=-]")
_ATOM = re.compile(r"[^\s\"{}\[\],:;!?()]+")


def _grounded(chars: int, results: str, request: str) -> dict[str, Any]:
    """The schema of an answer after a tool result: one sentence that states the result.

    Its words are the results', the request's numbers and expressions, and a few words that
    join them (the request's other words would let it claim what was asked), and when the
    result holds a number the answer writes one of the result's words that carry it (or,
    without one, quotes a text of the result, such as an error's message): the model words
    the sentence, the grammar keeps it to what the tool returned.
    """
    atoms = _atoms(results) | {a for a in _atoms(request) if _NUMERIC.search(a)}
    words = _alternatives(atoms | set(_GLUE) | {w.capitalize() for w in _GLUE})
    gap = "(, | )"
    stated = _alternatives({a for a in _atoms(results) if _NUMBER.search(a)})
    if stated:
        before, after = f"({words}{gap}){{0,{_BEFORE}}}", f"({gap}{words}){{0,{_AFTER}}}"
        return {"type": "string", "pattern": f"^{before}{stated}{after}[.]$"}
    texts = _alternatives(_texts(results, request))
    if texts:  # no number: a text of the result (such as an error's), nearly as it is
        lead, after = "((Sorry|sorry), )?((There|there) is )?", f"({gap}{words}){{0,2}}"
        return {"type": "string", "pattern": f"^{lead}{texts}{after}[.]$"}
    return {"type": "string", "pattern": f"^{words}({gap}{words}){{0,{_BEFORE}}}[.]$"}


def _atoms(text: str) -> set[str]:
    """The words of `text` (a request, or tool results: their JSON values), as an answer
    may write them, capitalised or not."""
    found: set[str] = set()
    for raw in _ATOM.findall(_plain(text)):
        word = raw.rstrip(".'") if not _NUMBER.fullmatch(raw) else raw
        word = word.lstrip("'")
        if word and len(word) <= _TEXT_CHARS:
            found |= {word, word.lower(), word[:1].upper() + word[1:]}
    return found


def _values(text: str) -> list[Any]:
    """The values of each JSON line of `text`, nested ones one by one (a line that is not
    JSON is one string value; keys are names, not what a tool said)."""
    out: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict | list):
            for item in value.values() if isinstance(value, dict) else value:
                walk(item)
        else:
            out.append(value)

    for line in text.splitlines():
        try:
            walk(json.loads(line))
        except ValueError:
            out.append(line)
    return out


def _plain(text: str) -> str:
    """`text` with each JSON line replaced by its values, one after the other."""
    return " ".join(str(value) for value in _values(text))


def _texts(results: str, request: str) -> set[str]:
    """The text values of JSON results that say something the request does not (such as
    an error's message), short enough to be written whole."""
    found: set[str] = set()
    for line in results.splitlines():
        try:
            json.loads(line)
        except ValueError:
            continue
        for value in _values(line):
            text = _one_line(value) if isinstance(value, str) else ""
            if (
                0 < len(text) <= _TEXT_CHARS
                and text.lower() not in request.lower()
                and not any(c in text for c in '"\\.')
                and not _NUMBER.search(text)
            ):
                found.add(text)
    return found


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
