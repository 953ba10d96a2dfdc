"""llama.cpp underneath `LocalModel`: the loaded model, greedy grammar decoding, scoring.

One `Engine` per model file, context size and thread count is loaded per process and shared;
its lock serialises the steps, which run in worker threads.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import ctypes
import importlib
import json
import math
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from plait.errors import ModelError, UsageError

__all__ = ["INSTALL", "Engine", "import_llama_cpp", "load_engine", "log_likelihood", "sample"]

INSTALL = 'pip install "plait[local]"'
_TOP_TOKENS = 32  # how many likely tokens are tried against the grammar before all of them
_TOKEN_DATA = [("id", "<i4"), ("logit", "<f4"), ("p", "<f4")]  # llama_token_data


def import_llama_cpp() -> ModuleType:
    """Import `llama_cpp` (a `UsageError` naming the extra when it is missing)."""
    # Idle OpenMP threads must sleep rather than spin, or any other load on a small machine
    # slows decoding many times over; the variable is read when the library loads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        return importlib.import_module("llama_cpp")
    except ImportError as exc:
        raise UsageError(f"LocalModel needs llama-cpp-python: {INSTALL}") from exc


@dataclass
class Engine:
    """A loaded model (`llama_cpp.Llama`), its lock and its compiled grammar rules."""

    llama: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    grammars: dict[str, str] = field(default_factory=dict)

    def rules(self, schema: Mapping[str, Any], close: str = "") -> str:
        """Return the GBNF rules of " " + a value of `schema` + `close` (converted once)."""
        key = json.dumps(schema, sort_keys=True) + close
        rules = self.grammars.get(key)
        if rules is None:
            llama_cpp = import_llama_cpp()
            rules = str(llama_cpp.llama_grammar.json_schema_to_gbnf(json.dumps(schema)))
            # The prompt ends just before a value the examples show after a space, so the
            # value starts with that space and the model sees the tokens it was shown; the
            # closing "]" of a step is the grammar's too, as the model writes it with the
            # value's last character in one token.
            ending = f" {json.dumps(close)}" if close else ""
            rules = rules.replace("root ::=", "value ::=", 1) + f'\nroot ::= " " value{ending}\n'
            self.grammars[key] = rules
        return rules

    def feed(self, tokens: list[int]) -> None:
        """Evaluate `tokens`, reusing the longest prefix the cache already holds."""
        llama = self.llama
        cached = llama.input_ids[: llama.n_tokens].tolist()
        keep, limit = 0, min(len(cached), len(tokens) - 1)  # always evaluate one token
        while keep < limit and cached[keep] == tokens[keep]:
            keep += 1
        llama_cpp = import_llama_cpp()
        memory = llama_cpp.llama_get_memory(llama.ctx)
        if keep and llama_cpp.llama_memory_seq_rm(memory, 0, keep, -1):
            llama.n_tokens = keep
        else:
            llama.reset()
            keep = 0
        llama.eval(tokens[keep:])

    def logits(self) -> Any:
        """Return the logits after the last evaluated token (a view; copy to keep)."""
        import numpy as np

        llama_cpp = import_llama_cpp()
        raw = llama_cpp.llama_get_logits(self.llama.ctx)
        return np.ctypeslib.as_array(raw, shape=(self.llama.n_vocab(),))

    def greedy(self, tokens: list[int], rules: str, max_tokens: int) -> Iterator[str]:
        """Decode greedily under `rules` after `tokens`; yield the text of each token.

        The grammar is checked against the most likely tokens first, one at a time, and
        against the whole vocabulary only when none of them fits: the same tokens as
        filtering the whole vocabulary at every step, several times faster.
        """

        llama_cpp = import_llama_cpp()
        llama = self.llama
        vocab = llama_cpp.llama_model_get_vocab(llama.model)
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, rules.encode(), b"root")
        if not sampler:
            raise ModelError("LocalModel: llama.cpp rejected the step's grammar")
        one = (llama_cpp.llama_token_data * 1)()
        single = llama_cpp.llama_token_data_array(
            data=ctypes.cast(one, llama_cpp.llama_token_data_p), size=1, selected=-1, sorted=False
        )
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        try:
            self.feed(tokens)
            for _ in range(max_tokens):
                logits = self.logits()
                token = self._first_allowed(sampler, logits, one, single)
                if token is None:
                    token = self._best_allowed(sampler, logits)
                llama_cpp.llama_sampler_accept(sampler, token)
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    break
                yield decoder.decode(llama.detokenize([token]))
                llama.eval([token])
            yield decoder.decode(b"", final=True)
        finally:
            llama_cpp.llama_sampler_free(sampler)

    @staticmethod
    def _first_allowed(sampler: Any, logits: Any, one: Any, single: Any) -> int | None:
        """Return the most likely of the top tokens the grammar allows, if any."""
        import numpy as np

        llama_cpp = import_llama_cpp()
        top = np.argpartition(-logits, _TOP_TOKENS)[:_TOP_TOKENS]
        for candidate in top[np.argsort(-logits[top])]:
            one[0].id, one[0].logit, one[0].p = int(candidate), float(logits[candidate]), 0.0
            single.size, single.selected = 1, -1
            llama_cpp.llama_sampler_apply(sampler, ctypes.byref(single))
            if one[0].logit != -math.inf:
                return int(candidate)
        return None

    def _best_allowed(self, sampler: Any, logits: Any) -> int:
        """Return the most likely token the grammar allows, filtering the whole vocabulary."""
        import numpy as np

        llama_cpp = import_llama_cpp()
        count = len(logits)
        data = (llama_cpp.llama_token_data * count)()
        view = np.frombuffer(data, dtype=_TOKEN_DATA)
        view["id"] = np.arange(count, dtype=np.int32)
        view["logit"] = logits
        view["p"] = 0.0
        array = llama_cpp.llama_token_data_array(
            data=ctypes.cast(data, llama_cpp.llama_token_data_p),
            size=count,
            selected=-1,
            sorted=False,
        )
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
        return int(np.argmax(view["logit"]))


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null for the duration (C code writes there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


_ENGINES: dict[tuple[str, int, int], Engine] = {}
_ENGINES_LOCK = threading.Lock()


@atexit.register
def _close_engines() -> None:
    """Free the models while the interpreter is whole (llama.cpp's finalizers need it)."""
    with _ENGINES_LOCK:
        engines = list(_ENGINES.values())
        _ENGINES.clear()
    for engine in engines:
        if engine.lock.acquire(timeout=5):  # else a step is still decoding: leave it be
            engine.llama.close()


def load_engine(path: Path, n_ctx: int, n_threads: int) -> Engine:
    key = (str(path), n_ctx, n_threads)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            llama_cpp = import_llama_cpp()
            try:
                with _quiet_stderr():  # llama.cpp prints notes while it loads
                    llama = llama_cpp.Llama(
                        model_path=str(path),
                        n_ctx=n_ctx,
                        n_threads=n_threads,
                        n_threads_batch=n_threads,
                        logits_all=False,
                        verbose=False,
                    )
            except (ValueError, RuntimeError) as exc:
                raise ModelError(f"LocalModel cannot load {path}: {exc}") from exc
            engine = _ENGINES[key] = Engine(llama)
        return engine


def sample(
    engine: Engine, tokens: list[int], rules: str, max_tokens: int, temperature: float
) -> Iterator[str]:
    """Yield the text of each token decoded after `tokens` under `rules`.

    Greedy decoding (temperature 0) is plait's own; otherwise llama.cpp samples.
    """
    if temperature <= 0:
        yield from engine.greedy(tokens, rules, max_tokens)
        return
    llama_cpp = import_llama_cpp()
    grammar = llama_cpp.LlamaGrammar.from_string(rules, verbose=False)
    for chunk in engine.llama.create_completion(
        tokens, max_tokens=max_tokens, temperature=temperature, grammar=grammar, stream=True
    ):
        yield chunk["choices"][0]["text"]


def log_likelihood(engine: Engine, prefix: list[int], tokens: list[int]) -> float:
    """Return log P(tokens | prefix) under the model, reading one token at a time."""
    import numpy as np

    engine.feed(prefix)
    total = 0.0
    for i, token in enumerate(tokens):
        if i:
            engine.llama.eval([tokens[i - 1]])
        logits = engine.logits()
        top = float(logits.max())
        total += float(logits[token]) - top - math.log(float(np.exp(logits - top).sum()))
    return total
