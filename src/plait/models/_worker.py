"""The engine process behind `LocalModel`: `python -m plait.models._worker`.

It reads one JSON request per line on stdin and answers with JSON lines on stdout:

- `{"op": "load", "path", "n_ctx", "n_threads", "n_threads_batch"}` → `{"loaded": seconds}`;
- `{"op": "step", "id", "step", "max_tokens", "temperature"}` → `{"text": piece}` lines as the
  step is decoded, then `{"usage": [prompt tokens, decoded tokens]}` and `{"done": id}`;
- `{"op": "cancel", "id"}` stops that step at its next token (it still ends with `done`);
- any failure → `{"error": message, "kind": "model" | "usage"}`.

It exits when stdin closes, so it never outlives the process that started it.
"""

from __future__ import annotations

import json
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import IO, Any

__all__ = ["main", "run_step"]

_ANSWER = "answer"
_REQUEST_TOKENS = 48  # the longest request scored, in tokens


def run_step(
    engine: Any, step: dict[str, Any], max_tokens: int, temperature: float
) -> Iterator[tuple[str, Any]]:
    """Run one step; yield ("text", piece) as the step's JSON `[name, value]` is decoded,
    then ("usage", [prompt tokens, decoded tokens]).

    `step` holds the prompt (ending with "Step:"), `keep` (how many of its characters are
    fixed for this agent), `options` (name → the schema of its value), `scored`, the
    `request` the options are scored against and their `labels`.
    """
    options: dict[str, Any] = step["options"]
    read = 0
    candidates = _candidates(options, step["scored"])
    if len(candidates) == 1:
        chosen = candidates[0]
    elif step["scored"]:
        chosen, read = _best(engine, candidates, step)
    else:
        chosen = None
    if chosen is not None and chosen[1] is not None:  # one enum argument, already chosen
        name, (key, value) = chosen[0], chosen[1]
        yield "text", " " + json.dumps([name, {key: value}], ensure_ascii=False)
        yield "usage", [read, 0]
        return
    prompt: str = step["prompt"]
    if chosen is None:  # one grammar over every option: the model chooses
        schema: dict[str, Any] = {
            "anyOf": [
                {"type": "array", "prefixItems": [{"const": n}, s], "items": False}
                for n, s in options.items()
            ]
        }
        close = ""
    else:
        head = f" [{json.dumps(chosen[0])},"
        yield "text", head
        prompt += head
        schema, close = options[chosen[0]], "]"
    tokens = engine.tokenize(prompt, True)
    if engine.n_ctx - len(tokens) < max_tokens:
        raise _Refused(
            f"LocalModel: the prompt takes {len(tokens)} of the {engine.n_ctx}-token "
            f"context, leaving less than max_tokens={max_tokens}; pass a larger n_ctx"
        )
    fixed = engine.tokenize(prompt[: step["keep"]], True) if step["keep"] else []
    keep = len(fixed) if fixed and tokens[: len(fixed)] == fixed else 0
    for text in engine.decode(tokens, keep, engine.rules(schema, close), max_tokens, temperature):
        if text:
            yield "text", text
    yield "usage", [read + len(tokens), engine.decoded]  # not the flush of the last bytes


Candidate = tuple[str, tuple[str, str] | None]


def _candidates(options: dict[str, Any], scored: bool) -> list[Candidate]:
    """Return the choices of a step: an option, or an option with its enum value."""
    out: list[Candidate] = []
    for name, schema in options.items():
        choice = _enum_choice(schema)
        if choice is None or (not scored and len(options) > 1):
            out.append((name, None))
            continue
        key, values = choice
        out += [(name, (key, value)) for value in values]
    return out


def _enum_choice(schema: Any) -> tuple[str, list[str]] | None:
    """Return (name, values) when `schema` is an object of one required string enum."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    properties = schema.get("properties") or {}
    if len(properties) != 1:
        return None
    ((key, spec),) = properties.items()
    values = spec.get("enum") if isinstance(spec, dict) else None
    if not values or not all(isinstance(v, str) for v in values):
        return None
    return key, list(values)


def _best(
    engine: Any, candidates: Sequence[Candidate], step: dict[str, Any]
) -> tuple[Candidate, int]:
    """Return the choice under whose label the request is likeliest, and the tokens read.

    Each choice is scored by log P(request | its label): the option that best explains the
    request wins (noisy-channel scoring). An option with several labels takes its best one.
    Every label is evaluated in one batch.
    """
    labels: dict[str, str | list[str]] = step["labels"]
    request = engine.tokenize(" " + step["request"], False)[:_REQUEST_TOKENS]
    request = request or engine.tokenize(" ?", False)
    options = [enum[1] if enum is not None else name for name, enum in candidates]
    # A choice that includes answering is shown worked examples of routing first.
    examples = step["route_examples"] if _ANSWER in options else ""
    owners: list[int] = []  # which option each prefix scores
    prefixes: list[list[int]] = []
    for i, option in enumerate(options):
        texts = labels.get(option, option)
        for text in [texts] if isinstance(texts, str) else texts:
            owners.append(i)
            prefixes.append(engine.tokenize(f"{examples}{text}\nA request for {option}:", True))
    bias: dict[str, float] = step["bias"]
    scores = [-math.inf] * len(options)
    for owner, score in zip(owners, engine.score(prefixes, request), strict=True):
        scores[owner] = max(scores[owner], score + bias.get(options[owner], 0.0))
    best = max(range(len(candidates)), key=lambda i: (scores[i], -i))
    read = sum(len(p) + len(request) - 1 for p in prefixes)
    if not math.isfinite(scores[best]):
        best = 0
    return candidates[best], read


class _Refused(Exception):
    """A step the engine refuses (a `ModelError` in the user's process)."""


def _serve(requests: queue.Queue[dict[str, Any] | None], out: IO[str], cancelled: set[int]) -> None:
    from plait.models._llama import Cancelled, Engine, EngineFailure

    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, ensure_ascii=False) + "\n")
        out.flush()

    engine: Any = None
    while (request := requests.get()) is not None:
        try:
            if request["op"] == "load":
                started = time.perf_counter()
                if engine is not None:
                    engine.close()
                engine = Engine(
                    request["path"],
                    request["n_ctx"],
                    request["n_threads"],
                    request["n_threads_batch"],
                    request.get("prompt_dir"),
                )
                send({"loaded": time.perf_counter() - started})
            elif request["op"] == "step":
                if engine is None:
                    raise _Refused("no model loaded")
                step_id = request["id"]
                started, evaluated = time.perf_counter(), engine.evaluated
                engine.stop = lambda step_id=step_id: step_id in cancelled
                steps = run_step(
                    engine, request["step"], request["max_tokens"], request["temperature"]
                )
                decoded = 0
                try:
                    for kind, value in steps:
                        if step_id in cancelled:
                            break
                        send({kind: value})
                        decoded = value[1] if kind == "usage" else decoded + 1
                except Cancelled:
                    pass
                cancelled.difference_update([i for i in cancelled if i <= step_id])
                send(
                    {
                        "done": step_id,
                        "evaluated": engine.evaluated - evaluated,
                        "decoded": decoded,
                        "seconds": time.perf_counter() - started,
                    }
                )
        except (_Refused, EngineFailure) as exc:
            send({"error": str(exc), "kind": "model"})
        except Exception as exc:
            send({"error": f"{type(exc).__name__}: {exc}", "kind": "model"})


def main() -> None:
    """Serve requests from stdin until it closes."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")  # the protocol's own copy of stdout
    os.dup2(2, 1)  # anything native code prints goes to stderr, not into the protocol
    sys.stdout = sys.stderr
    requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
    cancelled: set[int] = set()

    def read() -> None:
        for line in sys.stdin:
            message = json.loads(line)
            if message.get("op") == "cancel":
                cancelled.add(message["id"])
            else:
                requests.put(message)
        requests.put(None)

    threading.Thread(target=read, name="plait-engine-stdin", daemon=True).start()
    _serve(requests, out, cancelled)


if __name__ == "__main__":
    main()
