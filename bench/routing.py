"""How well the router example routes on the embedded LocalModel: 20 held-out requests.

Each request is run through the whole router example (Router, WeatherAgent, MathAgent, their
tools) on `LocalModel`, and the run's first step tells where it went: a transfer to a
specialist, or the Router answering itself ("neither"). Prints the confusion table, how many
were routed right, and how many "neither" requests reached a specialist's tool (goal: none).

None of the held-out requests was used to choose the router's scoring examples, its answer
labels or its head start for answering.

Run: `python bench/routing.py` (needs `pip install "plait[local]"`); `--tuned` runs the requests
the scoring was tuned on instead. Prints a final JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from plait import Runner
from plait.examples.router import build_router
from plait.models import LocalModel

KINDS = ("weather", "math", "neither")
# Requests the router's scoring was tuned on (the first set measured, then used for tuning).
TUNED = [
    ("weather", "What's the temperature in Beijing right now?"),
    ("weather", "Is it snowing in Oslo?"),
    ("weather", "Will it rain in Paris this weekend?"),
    ("weather", "How windy is it in Chicago today?"),
    ("weather", "Should I wear a jacket in Tokyo tonight?"),
    ("weather", "What's the weather forecast for Sydney?"),
    ("weather", "Is it sunny in Rome?"),
    ("math", "What is 23 times 17?"),
    ("math", "Calculate 1024 / 16"),
    ("math", "How much is 250 plus 175?"),
    ("math", "Subtract 89 from 300"),
    ("math", "What's (12 + 8) * 3?"),
    ("math", "Multiply 45 by 6"),
    ("math", "What is 99 + 1?"),
    ("neither", "What's the capital of Italy?"),
    ("neither", "Who painted the Mona Lisa?"),
    ("neither", "Can you recommend a good book?"),
    ("neither", "Translate 'thank you' into Spanish"),
    ("neither", "What year did World War II end?"),
    ("neither", "Write a haiku about autumn"),
]
# Written before any tuning on TUNED and never used to choose anything.
HELD_OUT = [
    ("weather", "Is it going to be foggy in San Francisco tomorrow morning?"),
    ("weather", "What's the UV index in Madrid today?"),
    ("weather", "How cold will it get in Moscow tonight?"),
    ("weather", "Do I need sunscreen in Dubai this afternoon?"),
    ("weather", "Is there a heatwave in Athens?"),
    ("weather", "What will the weather be like in Berlin on Saturday?"),
    ("weather", "Is it humid in Bangkok right now?"),
    ("math", "What is 48 divided by 6?"),
    ("math", "Add 123 and 456"),
    ("math", "What's 15 times 15?"),
    ("math", "Compute 2 * (7 + 3)"),
    ("math", "How much is 1000 minus 1?"),
    ("math", "What do you get if you multiply 12 by 11?"),
    ("math", "Calculate 81 / 9 + 4"),
    ("neither", "Who discovered penicillin?"),
    ("neither", "Give me a synonym for happy"),
    ("neither", "What's a good name for a cat?"),
    ("neither", "How many continents are there?"),
    ("neither", "Tell me about the Eiffel Tower"),
    ("neither", "What is the meaning of life?"),
]
_AGENTS = {"WeatherAgent": "weather", "MathAgent": "math"}
_TOOLS = {"transfer_to_agent", "exit"}


async def _route(model: LocalModel, query: str) -> tuple[str, list[str]]:
    """Run the router example on `query`; return where it went and the tools it called."""
    result = await Runner(build_router(model, model, model)).query(query).collect()
    result.raise_for_error()
    routed, tools = "neither", []
    for event in result.events:
        message = event.output.message.message if event.output and event.output.message else None
        if message is None:
            continue
        for call in message.tool_calls:
            if call.name == "transfer_to_agent":
                routed = _AGENTS.get(json.loads(call.arguments).get("agent_name"), "?")
            elif call.name not in _TOOLS:
                tools.append(call.name)
    return routed, tools


def main() -> None:
    """Route every held-out request (or, with --tuned, every tuned one) and print the table."""
    requests = TUNED if "--tuned" in sys.argv[1:] else HELD_OUT
    model = LocalModel()
    model.load()
    table = {(k, r): 0 for k in KINDS for r in KINDS}
    neither_tools = 0
    started = time.perf_counter()
    for kind, query in requests:
        routed, tools = asyncio.run(_route(model, query))
        table[(kind, routed)] = table.get((kind, routed), 0) + 1
        neither_tools += kind == "neither" and bool(tools)
        print(f"{kind:8} → {routed:8} {', '.join(tools) or '-':12} {query}")
    right = sum(table[(k, k)] for k in KINDS)
    print(f"\nrequest \\ routed to  {'  '.join(f'{k:>8}' for k in KINDS)}")
    for kind in KINDS:
        print(f"{kind:20} {'  '.join(f'{table[(kind, r)]:>8}' for r in KINDS)}")
    print(f"\nrouted right: {right}/{len(requests)}")
    print(f'"neither" requests that reached a specialist\'s tool: {neither_tools}')
    print(f"wall time: {time.perf_counter() - started:.1f} s")
    print(
        json.dumps(
            {
                "right": right,
                "total": len(requests),
                "neither_tool_calls": neither_tools,
                "table": {f"{k}->{r}": n for (k, r), n in table.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
