"""Whether the router example's final answers are right on the embedded LocalModel.

Each request of a held-out set is run end to end through `demo_team()` on the embedded
model (Router -> WeatherAgent / MathAgent, their tools; the Router only routes), exactly as
`plait run plait.examples.router:demo_team` runs it. The first set has 20 requests (weather,
arithmetic, and requests for neither); the second (`--set held-out`) has 36: percentages and
decimals, cities with and without a report, two-part requests, requests for neither. The
final answer is then judged:

- weather: `get_weather` was called for the city asked about; if it returned a temperature,
  that number is in the answer; if it had no report, the answer says so ("no report",
  "not available", ...) and states no temperature;
- arithmetic: the right value (computed here, not taken from the tool) is in the answer;
- two parts (weather and arithmetic in one request): both parts are answered as above, or
  one is and the answer says it cannot do the other ("can only", "cannot", ...);
- neither: the answer is the Router's fixed reply (`UNSUPPORTED`) and no specialist's tool
  was called.

Every answer is also checked for invented values: a number in the answer that neither a tool
returned nor the user wrote (`42` and `42.0` are the same number). An answer with an
invented value is never right.

Each set was written before the model was tuned for right answers on it and none of its
requests was used to tune it; the README's example ("Calculate 2 * 21") is in the first.

Run: `python bench/answers.py [--set held-out]` (needs `pip install "plait[local]"`).
Prints a table, the score, the invented values, and a final JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import time
from dataclasses import dataclass, field

from plait import Runner
from plait.examples.router import UNSUPPORTED, demo_team

# (kind, request, what the answer must state: the city asked about or the right value)
REQUESTS: list[tuple[str, str, str]] = [
    ("weather", "What's the weather in Oslo?", "Oslo"),
    ("weather", "How hot is it in Beijing today?", "Beijing"),
    ("weather", "Is it raining in Paris?", "Paris"),
    ("weather", "Tell me the weather for London", "London"),
    ("weather", "Weather in Tokyo please", "Tokyo"),
    ("weather", "What is the temperature in New York?", "New York"),
    ("weather", "Is it sunny in Beijing?", "Beijing"),
    ("math", "Calculate 2 * 21", "42"),
    ("math", "3+4", "7"),
    ("math", "What is 12 times 12?", "144"),
    ("math", "What's 100 divided by 8?", "12.5"),
    ("math", "Add 250 and 375", "625"),
    ("math", "Compute (4 + 6) * 7", "70"),
    ("math", "How much is 1000 minus 37?", "963"),
    ("math", "What is 3.5 * 4?", "14"),
    ("neither", "What's the capital of Spain?", ""),
    ("neither", "Tell me a joke", ""),
    ("neither", "Who wrote Pride and Prejudice?", ""),
    ("neither", "How do I bake bread?", ""),
    ("neither", "What is the tallest mountain in the world?", ""),
]

# A second held-out set, written before the model was tuned on the first set's failures:
# percentages and decimals, cities with and without a report, two-part requests (the city
# and the value, "|"-separated) and requests for neither specialist. `--set held-out` runs it.
HELD_OUT: list[tuple[str, str, str]] = [
    ("math", "What is 15% of 80?", "12"),
    ("math", "Calculate 20 percent of 150", "30"),
    ("math", "What is 25% of 360?", "90"),
    ("math", "How much is 8% of 1250?", "100"),
    ("math", "What is 2.5 times 4.2?", "10.5"),
    ("math", "What's 7.5 + 2.25?", "9.75"),
    ("math", "Divide 9 by 4", "2.25"),
    ("math", "What is 45 minus 12.5?", "32.5"),
    ("math", "Multiply 13 by 17", "221"),
    ("math", "How much is 0.5 * 18?", "9"),
    ("weather", "What's the weather in Paris today?", "Paris"),
    ("weather", "Is it cold in Tokyo?", "Tokyo"),
    ("weather", "Do I need an umbrella in Paris?", "Paris"),
    ("weather", "How warm is it in Beijing right now?", "Beijing"),
    ("weather", "What's the weather in Madrid?", "Madrid"),
    ("weather", "Is it snowing in Moscow?", "Moscow"),
    ("weather", "How hot is it in Cairo?", "Cairo"),
    ("weather", "Weather for Sydney please", "Sydney"),
    ("weather", "Is it windy in Chicago today?", "Chicago"),
    ("weather", "What's the forecast for Rome?", "Rome"),
    ("two", "What's the weather in Tokyo and what is 5*5?", "Tokyo|25"),
    ("two", "Tell me the weather in Paris and add 10 and 20", "Paris|30"),
    ("two", "What is 9 times 9, and is it sunny in Beijing?", "Beijing|81"),
    ("two", "How hot is Cairo, and what is 2+2?", "Cairo|4"),
    ("two", "Is it raining in Berlin? Also, what is 6 * 7?", "Berlin|42"),
    ("neither", "What's the capital of Italy?", ""),
    ("neither", "Write a haiku about the sea", ""),
    ("neither", "Who painted the Mona Lisa?", ""),
    ("neither", "Translate 'good morning' into French", ""),
    ("neither", "In which year did the Second World War end?", ""),
    ("neither", "Can you recommend a good book?", ""),
    ("neither", "What is the speed of light?", ""),
    ("neither", "How many legs does a spider have?", ""),
    ("neither", "Hello! How are you?", ""),
    ("neither", "What does DNA stand for?", ""),
    ("neither", "Give me a synonym for happy", ""),
]
_KINDS = ("weather", "math", "two", "neither")
_SPECIALIST_TOOLS = {"get_weather", "calculator"}
_NO_REPORT = ("no report", "not available", "no weather", "unavailable", "don't have", "no data")
# An answer that covers one part of a two-part request says it cannot do the other.
_DECLINED = ("can only", "cannot", "can't", "one question", "one request", "only help")
_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*")


@dataclass
class Judged:
    """One request's run and the verdict on its final answer."""

    kind: str
    request: str
    answer: str
    calls: list[tuple[str, dict[str, object]]] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    named_results: list[tuple[str, str]] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)
    right: bool = False
    why: str = ""
    seconds: float = 0.0


def numbers(text: str) -> set[float]:
    """Return the numbers written in `text` ("1,000" and "1000" alike)."""
    found = set()
    for raw in _NUMBER.findall(text):
        try:
            found.add(float(raw.replace(",", "")))
        except ValueError:
            continue
    return found


def _has(text: str, value: str) -> bool:
    return float(value) in numbers(text)


def _weather_part(city: str, answer: str, done: Judged) -> tuple[bool, str]:
    """Whether `answer` states what `get_weather` returned for `city` (why not, if not)."""
    asked = [str(a.get("city", "")) for n, a in done.calls if n == "get_weather"]
    if not any(c.strip().lower() == city.lower() for c in asked):
        return False, f"get_weather({asked})" if asked else "no get_weather call"
    reports = [r for n, r in done.named_results if n == "get_weather"]
    if not reports:
        return False, "no tool result"
    try:
        report = json.loads(reports[-1])
    except ValueError:
        report = {}
    temperature = str(report.get("temperature", "")) if isinstance(report, dict) else ""
    if temperature:
        value = _NUMBER.search(temperature)
        right = value is not None and _has(answer, value.group())
        return right, "" if right else f"{temperature} not stated"
    said = any(p in answer.lower() for p in _NO_REPORT)
    return said, "" if said else "no report not stated"


def _math_part(value: str, answer: str, done: Judged) -> tuple[bool, str]:
    """Whether `answer` states the right `value` after a calculator call."""
    if not any(name == "calculator" for name, _ in done.calls):
        return False, "no calculator call"
    right = _has(answer, value)
    return right, "" if right else f"{value} not stated"


def judge(kind: str, request: str, expected: str, answer: str, done: Judged) -> None:
    """Fill in `done`'s verdict for the final `answer` to `request`."""
    allowed = numbers(request) | {n for r in done.results for n in numbers(r)}
    done.invented = [
        raw for raw in _NUMBER.findall(answer) if float(raw.replace(",", "")) not in allowed
    ]
    tools = [name for name, _ in done.calls if name in _SPECIALIST_TOOLS]
    if kind == "neither":
        done.right = answer.strip() == UNSUPPORTED and not tools
        done.why = "" if done.right else ("called " + ", ".join(tools) if tools else "answered")
    elif kind == "weather":
        done.right, done.why = _weather_part(expected, answer, done)
        if done.right and not numbers(_weather_reports(done)) and numbers(answer):
            done.right, done.why = False, "a number for a city with no report"
    elif kind == "math":
        done.right, done.why = _math_part(expected, answer, done)
    else:  # two parts: both answered, or one answered and the other declined
        city, value = expected.split("|")
        weather, why_weather = _weather_part(city, answer, done)
        math, why_math = _math_part(value, answer, done)
        declined = any(p in answer.lower() for p in _DECLINED)
        done.right = (weather and math) or ((weather or math) and declined)
        done.why = "" if done.right else "; ".join(w for w in (why_weather, why_math) if w)
    if done.invented:
        done.right = False
        done.why = (done.why + "; " if done.why else "") + "invented " + ", ".join(done.invented)


def _weather_reports(done: Judged) -> str:
    return " ".join(r for n, r in done.named_results if n == "get_weather")


async def _run(runner: Runner, kind: str, request: str, expected: str) -> Judged:
    started = time.perf_counter()
    result = await runner.query(request).collect()
    done = Judged(kind, request, "")
    for event in result.events:
        message = event.output.message.message if event.output and event.output.message else None
        if message is None:
            continue
        for call in message.tool_calls:
            try:
                arguments = json.loads(call.arguments or "{}")
            except ValueError:
                arguments = {"raw": call.arguments}
            done.calls.append((call.name, arguments if isinstance(arguments, dict) else {}))
        if message.role == "tool" and message.name in _SPECIALIST_TOOLS:
            done.results.append(message.content)
            done.named_results.append((message.name, message.content))
    if result.error is not None:
        done.answer = f"<{type(result.error).__name__}: {result.error}>"
    else:
        done.answer = str(result.final_output or "")
    done.seconds = time.perf_counter() - started
    judge(kind, request, expected, done.answer, done)
    if result.error is not None:
        done.right = False
        done.why = "the run failed"
    return done


async def _main(requests: list[tuple[str, str, str]]) -> list[Judged]:
    os.environ.pop("PLAIT_MODEL", None)  # the embedded model, as the README example runs it
    runner = Runner(demo_team())
    judged = []
    for kind, request, expected in requests:
        done = await _run(runner, kind, request, expected)
        judged.append(done)
        mark = "ok " if done.right else "BAD"
        tool = "; ".join(f"{n}({json.dumps(a, ensure_ascii=False)})" for n, a in done.calls)
        print(f"{mark} {kind:8} {request!r:48} → {done.answer!r}")
        print(f"    calls: {tool or '-'}  results: {done.results or '-'}  {done.why}")
    return judged


def main() -> None:
    """Run every request, print the table, the score and the invented values."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=("first", "held-out"), default="first")
    chosen = parser.parse_args().set
    started = time.perf_counter()
    judged = asyncio.run(_main(HELD_OUT if chosen == "held-out" else REQUESTS))
    right = sum(j.right for j in judged)
    invented = [j for j in judged if j.invented]
    print(f"\n{'kind':8} {'right':>5} {'of':>3}")
    for kind in _KINDS:
        mine = [j for j in judged if j.kind == kind]
        print(f"{kind:8} {sum(j.right for j in mine):>5} {len(mine):>3}")
    print(f"\nright answers: {right}/{len(judged)}")
    print(f"answers with invented values: {len(invented)}")
    for j in invented:
        print(f"  {j.request!r}: {', '.join(j.invented)} in {j.answer!r}")
    print(f"wall time: {time.perf_counter() - started:.1f} s")
    print(
        json.dumps(
            {
                "right": right,
                "set": chosen,
                "total": len(judged),
                "invented": len(invented),
                "by_kind": {k: sum(j.right for j in judged if j.kind == k) for k in _KINDS},
            }
        )
    )


if __name__ == "__main__":
    main()
