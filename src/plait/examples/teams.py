"""The team examples: a code-review team (coordinator and swarm), a three-level project team,
a research graph with a team as one of its nodes, and the router of `plait demo` offline.

The models are scripted (`ScriptedModel(..., per_run=True)`: the script is replayed for every
run, so a server answers any number of runs, concurrent ones too), the tools are small real
checks, and the teams, handoffs, budgets, depth filter and graph are the real ones. Each
function takes no arguments, so the command line serves it with no model, extra or key:
`plait serve plait.examples.teams:offline_router` (or `plait dev ...`).
Run them all: `python -m plait.examples.teams`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from plait import START, ChatModelAgent, Message, Runner, StateGraph, Team, tool
from plait.examples.router import QUERIES, UNSUPPORTED, build_router
from plait.graph import append
from plait.graph.state_graph import CompiledGraph
from plait.testing import ScriptedModel, call, reply

__all__ = [
    "PR",
    "code_review_coordinator",
    "code_review_swarm",
    "offline_router",
    "project_team",
    "research_graph",
]

PR = 'query = "SELECT * FROM users WHERE name = \'" + name + "\'"\nfor u in users: db.get(u)'


@tool
def sql_injection_checker(code: str) -> str:
    """Look for SQL built by string concatenation.

    Args:
        code: The code to check.
    """
    hits = re.findall(r"SELECT .*\" \+ \w+", code)
    return f"possible SQL injection: {hits[0]!r}" if hits else "no SQL injection found"


@tool
def query_analyzer(code: str) -> str:
    """Look for a query inside a loop (N+1 queries).

    Args:
        code: The code to check.
    """
    return "N+1 query: db.get inside a loop" if re.search(r"for .*db\.get", code) else "ok"


@tool
def linter(code: str) -> str:
    """Check basic style.

    Args:
        code: The code to check.
    """
    long_lines = [n for n, line in enumerate(code.splitlines(), 1) if len(line) > 60]
    return f"lines over 60 characters: {long_lines}" if long_lines else "style ok"


def _scripted(script: list[Any]) -> ScriptedModel:
    """A scripted model that replays `script` for every run (it reads each run's messages)."""
    return ScriptedModel(script, per_run=True)


def _request(messages: list[Message]) -> str:
    """Return the request of this turn: the last user message that is neither context from
    another agent nor a note handed over with a transfer."""
    for message in reversed(messages):
        text = message.content
        if message.role == "user" and not text.startswith(("For context:", _NOTES)):
            return text
    return ""


def _this_turn(messages: list[Message]) -> list[Message]:
    """Return the messages after the last user message (this agent's steps in this turn)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return messages[index + 1 :]
    return messages


def _last_tool_result(messages: list[Message]) -> str:
    return next(m.content for m in reversed(messages) if m.role == "tool")


def _check(tool_name: str) -> Any:
    """A scripted step that calls `tool_name` on the code of this turn's request."""

    def step(messages: list[Message], tools: Any) -> Message:
        return call(tool_name, {"code": _request(messages)})

    return step


def _ask(member: str) -> Any:
    """A scripted step that sends this turn's request to team member `member`."""

    def step(messages: list[Message], tools: Any) -> Message:
        return call(member, {"request": _request(messages)})

    return step


#: The reviewers, in the order a review visits them: name, tool, and the area they report.
_REVIEWERS = (
    ("security_reviewer", sql_injection_checker, "security"),
    ("perf_reviewer", query_analyzer, "performance"),
    ("style_reviewer", linter, "style"),
)


def _reviewers(descriptions: list[str], last_steps: list[Any]) -> list[ChatModelAgent]:
    """Return the three reviewers: each checks the request's code with its tool, then takes
    its step of `last_steps` (the reviewers in `_REVIEWERS` order)."""
    return [
        ChatModelAgent(
            name,
            _scripted([_check(tool_.info().name), last_step]),
            description=description,
            tools=[tool_],
            instruction=f"You are the {name.replace('_', ' ')}. Review only your area.",
        )
        for (name, tool_, _), description, last_step in zip(
            _REVIEWERS, descriptions, last_steps, strict=True
        )
    ]


def _from_tool(prefix: str) -> Any:
    def step(messages: list[Message], tools: Any) -> Message:
        return Message.assistant(f"{prefix}: {_last_tool_result(messages)}")

    return step


def code_review_coordinator() -> Team:
    """A review manager delegating to security, performance and style reviewers.

    Every reviewer checks the code in the request with its tool, so any request gets a
    review built from what the tools found.
    """
    reviewers = _reviewers(
        [
            "Security expert: SQL injection, XSS, auth. Input: code.",
            "Performance expert: queries, memory. Input: code.",
            "Style reviewer: conventions only. Input: code.",
        ],
        [_from_tool(area) for _, _, area in _REVIEWERS],
    )
    manager = ChatModelAgent(
        "review_manager",
        _scripted([*(_ask(name) for name, _, _ in _REVIEWERS), _summary]),
        instruction="You manage code review. Send the PR to the right reviewers, then sum up.",
    )
    return Team.coordinator(manager, reviewers, name="code_review")


def _summary(messages: list[Message], tools: Any) -> Message:
    findings = [m.content for m in _this_turn(messages) if m.role == "tool"]
    return Message.assistant("Review: " + "; ".join(findings))


def _handoff(to: str, message: str) -> Message:
    return call("transfer_to_agent", {"agent_name": to, "message": message})


#: How a swarm reviewer's note to the next one starts.
_NOTES = "Review notes so far: "


def _finding(result: str) -> str:
    """Return a reviewer tool's result in a few words."""
    if result.startswith("possible SQL injection"):
        return "SQL injection"
    if result.startswith("N+1 query"):
        return "N+1 query"
    if result.startswith("lines over"):
        return "long lines"
    return {"ok": "no N+1 query", "no SQL injection found": "no SQL injection"}.get(result, result)


def _notes(messages: list[Message]) -> list[str]:
    """Return the findings noted by the reviewers before this one, then this one's."""
    noted: list[str] = []
    for message in reversed(messages):
        if message.role == "user" and message.content.startswith(_NOTES):
            noted = message.content.removeprefix(_NOTES).split(", ")
            break
        if message.role == "user" and not message.content.startswith("For context:"):
            break  # the request: no reviewer noted anything in this turn before this one
    return [*noted, _finding(_last_tool_result(messages))]


def _hand_on(to: str) -> Any:
    """A scripted step that hands the review to `to` with the findings so far."""

    def step(messages: list[Message], tools: Any) -> Message:
        return _handoff(to, _NOTES + ", ".join(_notes(messages)))

    return step


def _conclude(messages: list[Message], tools: Any) -> Message:
    return reply(f"Review complete: {', '.join(_notes(messages))}.")


def code_review_swarm() -> Team:
    """The same review as a swarm: security hands to performance, performance to style,
    each passing on the findings so far; the style reviewer writes the summary."""
    reviewers = _reviewers(
        ["Security expert.", "Performance expert.", "Style reviewer; writes the final summary."],
        [_hand_on("perf_reviewer"), _hand_on("style_reviewer"), _conclude],
    )
    return Team.swarm(
        "security_reviewer",
        reviewers,
        name="review_swarm",
        max_handoffs=5,
        cross_request=False,  # every request is reviewed from the start
    )


def _worker(name: str, answer: str) -> ChatModelAgent:
    return ChatModelAgent(name, _scripted([reply(answer)]), description=f"{name} work")


def _delegate(member: str, task: str) -> Any:
    """A scripted step that gives `member` the task `task`, for this turn's request."""

    def step(messages: list[Message], tools: Any) -> Message:
        return call(member, {"request": f"{task} (for: {_request(messages)})"})

    return step


def _dev_team() -> Team:
    return Team.coordinator(
        ChatModelAgent(
            "dev_lead",
            _scripted(
                [
                    _delegate("backend_coder", "write the API"),
                    _delegate("db_designer", "design the tables"),
                    reply("development done"),
                ]
            ),
        ),
        [
            _worker("frontend_coder", "form built"),
            _worker("backend_coder", "API done"),
            _worker("db_designer", "table designed"),
        ],
        name="dev_team",
        description="development: frontend, backend, database",
    )


def project_team() -> Team:
    """Three levels: a project manager over dev, QA and design teams over their members."""
    dev = _dev_team()
    qa = Team.coordinator(
        ChatModelAgent(
            "qa_lead",
            _scripted([_delegate("security_auditor", "audit it"), reply("QA passed")]),
        ),
        [_worker("security_auditor", "no issues"), _worker("perf_tester", "fast enough")],
        name="qa_team",
        description="quality: security audit, performance tests",
    )
    design = Team.swarm(
        "ui_designer",
        [
            ChatModelAgent(
                "ui_designer",
                _scripted([lambda messages, tools: _handoff("tech_writer", "document it")]),
                description="UI design",
            ),
            _worker("tech_writer", "docs written"),
        ],
        name="design_team",
        description="design: UI, then documentation",
    )
    manager = ChatModelAgent(
        "project_manager",
        _scripted(
            [
                _delegate("dev_team", "implement it"),
                _delegate("qa_team", "test it"),
                _delegate("design_team", "design and document it"),
                _shipped,
            ]
        ),
        instruction="You are the project manager of dev_team, qa_team and design_team.",
    )
    return Team.coordinator(
        manager,
        [dev, qa, design],
        name="project",
        max_depth=3,
        total_max_steps=50,
        total_token_budget=100_000,
        event_filter=lambda event: event.depth <= 1,
    )


def _shipped(messages: list[Message], tools: Any) -> Message:
    request = _request(messages).strip().rstrip(".!?")
    if "sign-up" in request.lower():
        return reply("Sign-up shipped: built, tested and documented.")
    return reply(f"Done ({request}): built, tested and documented.")


class ResearchState(TypedDict, total=False):
    messages: Annotated[list[Any], append]
    requirements: str
    report: str


def research_graph() -> CompiledGraph:
    """collect_requirements → research team (searcher, analyzer) → generate_report."""
    lead = ChatModelAgent(
        "research_lead",
        _scripted(
            [
                _delegate("searcher", "find sources"),
                _delegate("analyzer", "compare them"),
                reply("Findings: teams and durable pauses are what users miss most."),
            ]
        ),
    )
    team = Team.coordinator(
        lead,
        [_worker("searcher", "5 sources found"), _worker("analyzer", "compared")],
        name="research_team",
    )

    def collect_requirements(state: dict[str, Any]) -> dict[str, Any]:
        return {"requirements": f"topic: {state['messages'][0].content}"}

    def generate_report(state: dict[str, Any]) -> dict[str, Any]:
        return {"report": f"{state['requirements']}\n{state['messages'][-1].content}"}

    graph = StateGraph(ResearchState)
    graph.add_node("collect_requirements", collect_requirements)
    graph.add_node("research", team).add_node("generate_report", generate_report)
    graph.add_edge(START, "collect_requirements").add_edge("collect_requirements", "research")
    graph.add_edge("research", "generate_report")
    return graph.compile(name="research_graph")


_WEATHER_WORDS = re.compile(
    r"\b(weather|temperature|forecast|rain\w*|sunny|cloudy|snow\w*|wind\w*|hot|cold)\b", re.I
)
_MATH_WORDS = re.compile(r"\b(calculate|compute|arithmetic|multiply|divide|add up|sum of)\b", re.I)
_CITY = re.compile(r"\b(?:in|for|at)\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)")
_KNOWN_CITIES = ("Tokyo", "Beijing", "Paris")
_NUMBER_WORDS = {
    "plus": "+",
    "minus": "-",
    "times": "*",
    "divided by": "/",
    "x": "*",
    "\u00d7": "*",
}
_EXPRESSION = re.compile(r"[\d(][\d\s.+\-*/()]*[\d)]")


def _expression(question: str) -> str | None:
    """Return the arithmetic in `question` (such as "156 * 789 + 234"), if it holds any."""
    text = question
    for word, symbol in _NUMBER_WORDS.items():
        text = re.sub(rf"(?<=[\d\s]){re.escape(word)}(?=[\s\d(])", f" {symbol} ", text)
    found = [m.group().strip() for m in _EXPRESSION.finditer(text)]
    found = [f for f in found if re.search(r"\d\s*[+\-*/]\s*[\d(]", f)]
    return " ".join(max(found, key=len).split()) if found else None


def _city(question: str) -> str | None:
    """Return the city `question` asks about, if it names one."""
    for city in _KNOWN_CITIES:
        if re.search(rf"\b{city}\b", question, re.I):
            return city
    found = _CITY.search(question)
    return found.group(1) if found else None


def _route(messages: list[Message], tools: Any) -> Message:
    """The router's one step: transfer weather and arithmetic, answer anything else."""
    question = _request(messages)
    if _WEATHER_WORDS.search(question) or (_city(question) and not _expression(question)):
        return call("transfer_to_agent", {"agent_name": "WeatherAgent"})
    if _expression(question) or _MATH_WORDS.search(question):
        return call("transfer_to_agent", {"agent_name": "MathAgent"})
    return reply(UNSUPPORTED)


def _exit(text: str) -> Message:
    return call("exit", {"final_result": text})


def _use(tool_name: str, argument: str, find: Callable[[str], str | None], ask: str) -> Any:
    """A scripted step that calls `tool_name` with the `argument` that `find` reads in this
    turn's request, or ends the turn asking for it (`ask`) when the request holds none."""

    def step(messages: list[Message], tools: Any) -> Message:
        found = find(_request(messages))
        if found is None:
            return _exit(ask)
        return call(tool_name, {argument: found})

    return step


_look_up_weather = _use(
    "get_weather", "city", _city, "Which city? Ask me, for example, about the weather in Tokyo."
)
_calculate = _use(
    "calculator",
    "expression",
    _expression,
    "Give me the arithmetic to do, such as 156 * 789 + 234.",
)


def _state_weather(messages: list[Message], tools: Any) -> Message:
    data = json.loads(_last_tool_result(messages))
    if "error" in data:
        return _exit(f"I have no weather report for {data['city']}.")
    condition, city, temperature = data["condition"].lower(), data["city"], data["temperature"]
    return _exit(f"It is {condition} in {city}, {temperature}.")


def _state_result(messages: list[Message], tools: Any) -> Message:
    asked = next(m for m in reversed(messages) if m.tool_calls).tool_calls[0]
    expression = json.loads(asked.arguments)["expression"]
    result = _last_tool_result(messages)
    if re.fullmatch(r"-?[\d.]+(e[+-]?\d+)?", result):
        return _exit(f"{expression} = {result}")
    return _exit(f"I could not calculate {expression}: {result}")


def offline_router() -> ChatModelAgent:
    """Return the demo's Router and its specialists on scripted models, for any question.

    The Router transfers weather questions to WeatherAgent and arithmetic to MathAgent, and
    says it can help with those only otherwise; the specialists really call `get_weather`
    and `calculator` and state what the tool returned ("It is cloudy in Tokyo, 18°C.",
    "156 * 789 + 234 = 123318").
    """
    return build_router(
        _scripted([_route]),
        _scripted([_look_up_weather, _state_weather]),
        _scripted([_calculate, _state_result]),
    )


async def main() -> None:
    """Run every example and print what it produced."""
    review = await Runner(code_review_coordinator()).query(f"Review this PR:\n{PR}").collect()
    print("coordinator review:", review.final_output)
    swarm = await Runner(code_review_swarm()).query(f"Review this PR:\n{PR}").collect()
    print("swarm review:", swarm.final_output)
    for log in swarm.handoffs:
        print("  ", log.render())
    project = await Runner(project_team()).query("Ship user sign-up").collect()
    print("project:", project.final_output, f"({len(project.events)} events at depth <= 1)")
    research = await Runner(research_graph()).query("agent frameworks").collect()
    print("research report:", research.final_output["report"])
    router = Runner(offline_router())
    for question in QUERIES:
        print("router:", question, "->", (await router.query(question).collect()).final_output)


if __name__ == "__main__":
    asyncio.run(main())
