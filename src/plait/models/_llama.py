"""llama.cpp underneath `LocalModel`, in the engine process: load, evaluate, decode, score.

This module runs only in the engine's own process (`plait.models._worker`), never in the
user's: a native crash there becomes a `ModelError` in the user's process (see `_engine`).
It drives llama.cpp through its C API (the `llama_cpp` bindings) so that it can keep several
sequences in one KV cache:

- sequence 0 is the prompt being worked on;
- a few sequences keep the fixed prefixes of recent prompts (the examples, an agent's
  instruction and tools), so a later step evaluates only what follows its prefix: copying
  a prefix into sequence 0 shares its cache cells and costs nothing;
- the options of a scored choice are evaluated side by side in one batch, each in its own
  sequence.
"""

from __future__ import annotations

import codecs
import ctypes
import json
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp
import numpy as np

from plait.models._grammar import schema_to_gbnf
from plait.models._kv_files import PromptFiles

__all__ = ["Engine", "EngineFailure"]

_TOP_TOKENS = 32  # how many likely tokens are tried against the grammar before all of them
_TOKEN_DATA = [("id", "<i4"), ("logit", "<f4"), ("p", "<f4")]  # llama_token_data
_PREFIX_SLOTS = 6  # sequences 1..6 keep prefixes
_SCORE_SEQS = 8  # sequences 7..14 score options side by side
_SCORE_BASE = 1 + _PREFIX_SLOTS + _SCORE_SEQS  # sequence 15: their common beginning
_N_SEQ = _SCORE_BASE + 1
_N_BATCH = 512
_FEED_CHUNK = 256  # prompt tokens evaluated between two looks at a cancel
_LOG_ERROR = 4  # GGML_LOG_LEVEL_ERROR


class EngineFailure(Exception):
    """llama.cpp refused something (a file it cannot load, a grammar, a full cache)."""


class Cancelled(Exception):
    """The step was cancelled while its prompt was evaluated."""


@dataclass
class _Batch:
    """A reusable `llama_batch` for up to `size` tokens, one sequence id each."""

    raw: Any
    size: int

    def fill(self, entries: Sequence[tuple[int, int, int, bool]]) -> None:
        """Set the batch to `entries`: (token, position, sequence, wants logits)."""
        raw = self.raw
        for i, (token, pos, seq, logits) in enumerate(entries):
            raw.token[i] = token
            raw.pos[i] = pos
            raw.n_seq_id[i] = 1
            raw.seq_id[i][0] = seq
            raw.logits[i] = logits
        raw.n_tokens = len(entries)


class Engine:
    """A loaded GGUF model and its context, with prefix reuse across steps."""

    def __init__(
        self,
        path: str,
        n_ctx: int,
        n_threads: int,
        n_threads_batch: int,
        prompt_dir: str | None = None,
    ) -> None:
        llama_cpp.llama_backend_init()
        llama_cpp.llama_log_set(_NO_LOG, ctypes.c_void_p(0))
        model_params = llama_cpp.llama_model_default_params()
        self.model = llama_cpp.llama_model_load_from_file(path.encode(), model_params)
        if not self.model:
            raise EngineFailure(f"llama.cpp cannot load {path} (not a GGUF model file?)")
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx * 2  # one prompt, plus room for the kept prefixes and scoring
        params.n_batch = params.n_ubatch = _N_BATCH
        params.n_seq_max = _N_SEQ
        params.n_threads = n_threads
        params.n_threads_batch = n_threads_batch
        params.kv_unified = True  # the sequences share cells: a copied prefix costs nothing
        params.swa_full = True  # keep whole prefixes in the sliding-window layers too
        params.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(self.model, params)
        if not self.ctx:
            llama_cpp.llama_model_free(self.model)
            raise EngineFailure(f"llama.cpp cannot create a context for {path}")
        self.n_ctx = n_ctx
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self._batch = _Batch(llama_cpp.llama_batch_init(_N_BATCH, 0, 1), _N_BATCH)
        self._seqs: dict[int, list[int]] = {0: []}  # the tokens each sequence holds
        self._lru: list[int] = []  # prefix slots, least recently used first
        self._grammars: dict[str, str] = {}
        self._rng = np.random.default_rng()
        self.evaluated = 0  # tokens evaluated, for the figures
        self.decoded = 0  # tokens the last `decode` produced (its end-of-generation one aside)
        self.stop: Callable[[], bool] = lambda: False  # checked between chunks of a prompt
        self.files = PromptFiles(prompt_dir, path) if prompt_dir else None

    def close(self) -> None:
        """Free the context and the model."""
        llama_cpp.llama_batch_free(self._batch.raw)
        llama_cpp.llama_free(self.ctx)
        llama_cpp.llama_model_free(self.model)

    # --- tokens ---------------------------------------------------------------------------

    def tokenize(self, text: str, bos: bool) -> list[int]:
        """Return the tokens of `text` (with the model's BOS token first when `bos`)."""
        data = text.encode("utf-8")
        size = len(data) + 8
        out = (llama_cpp.llama_token * size)()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), out, size, bos, False)
        if n < 0:
            raise EngineFailure("llama.cpp could not tokenize the prompt")
        return list(out[:n])

    def piece(self, token: int) -> bytes:
        """Return the bytes of one token."""
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, 64, 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, -n, 0, False)
        return buf.raw[:n]

    # --- evaluation -----------------------------------------------------------------------

    def _decode(self, entries: Sequence[tuple[int, int, int, bool]], step: int = _N_BATCH) -> None:
        for start in range(0, len(entries), step):
            chunk = entries[start : start + step]
            self._batch.fill(chunk)
            code = llama_cpp.llama_decode(self.ctx, self._batch.raw)
            if code == 1:  # no room in the cache: drop the kept prefixes and try once more
                self._forget_prefixes()
                code = llama_cpp.llama_decode(self.ctx, self._batch.raw)
            if code != 0:
                raise EngineFailure(f"llama.cpp could not evaluate the prompt (code {code})")
            self.evaluated += len(chunk)

    def _forget_prefixes(self) -> None:
        for seq in self._lru:
            llama_cpp.llama_memory_seq_rm(self.memory, seq, -1, -1)
            self._seqs.pop(seq, None)
        self._lru.clear()

    def logits(self, index: int = -1) -> Any:
        """Return the logits of output `index` of the last batch (a view; copy to keep)."""
        raw = llama_cpp.llama_get_logits_ith(self.ctx, index)
        return np.ctypeslib.as_array(raw, shape=(self.n_vocab,))

    def feed(self, tokens: list[int], keep: int = 0) -> None:
        """Evaluate `tokens` in sequence 0, reusing the longest prefix any sequence holds.

        When `keep` > 0, the first `keep` tokens are kept as a prefix for later prompts.
        """
        limit = len(tokens) - 1  # always evaluate one token: its logits are needed
        source, reuse = 0, _common(self._seqs[0], tokens, limit)
        for seq in self._lru:
            shared = _common(self._seqs[seq], tokens, limit)
            if shared > reuse:
                source, reuse = seq, shared
        if reuse < keep <= limit and (slot := self._load_prefix(tokens[:keep], source)):
            source, reuse = slot, keep
        if source:
            llama_cpp.llama_memory_seq_rm(self.memory, 0, -1, -1)
            llama_cpp.llama_memory_seq_cp(self.memory, source, 0, 0, reuse)
            self._lru.remove(source)
            self._lru.append(source)
        elif not llama_cpp.llama_memory_seq_rm(self.memory, 0, reuse, -1):
            llama_cpp.llama_memory_seq_rm(self.memory, 0, -1, -1)
            reuse = 0
        rest = tokens[reuse:]
        last = len(rest) - 1
        entries = [(t, reuse + i, 0, i == last) for i, t in enumerate(rest)]
        self._seqs[0] = list(tokens[:reuse])
        for start in range(0, len(entries), _FEED_CHUNK):  # a cancel is seen between chunks
            if self.stop():
                raise Cancelled
            self._decode(entries[start : start + _FEED_CHUNK])
            self._seqs[0] = list(tokens[: reuse + start + _FEED_CHUNK])
        if keep > 0 and not any(self._seqs[s][:keep] == tokens[:keep] for s in self._lru):
            self._keep(tokens[:keep])

    def _keep(self, prefix: list[int]) -> None:
        slot = self._free_slot()
        llama_cpp.llama_memory_seq_cp(self.memory, 0, slot, 0, len(prefix))
        self._seqs[slot] = prefix
        self._lru.append(slot)
        if self.files is not None:
            self.files.save(self.ctx, slot, prefix)

    def _free_slot(self, avoid: int = 0) -> int:
        """Empty a prefix slot (a free one, else the least recently used but `avoid`)."""
        free = [s for s in range(1, 1 + _PREFIX_SLOTS) if s not in self._lru]
        slot = free[0] if free else next(s for s in self._lru if s != avoid)
        if slot in self._lru:
            self._lru.remove(slot)
        llama_cpp.llama_memory_seq_rm(self.memory, slot, -1, -1)
        self._seqs.pop(slot, None)
        return slot

    def _load_prefix(self, prefix: list[int], avoid: int) -> int:
        """Load `prefix` from a kept file into a prefix slot other than `avoid`; return the
        slot (0 when no file holds it)."""
        if self.files is None:
            return 0
        slot = self._free_slot(avoid)
        if not self.files.load(self.ctx, self.memory, slot, prefix):
            return 0
        self._seqs[slot] = prefix
        self._lru.append(slot)
        return slot

    def advance(self, token: int) -> None:
        """Evaluate one more token in sequence 0."""
        seq = self._seqs[0]
        self._decode([(token, len(seq), 0, True)])
        seq.append(token)

    def score(self, prefixes: Sequence[list[int]], tokens: list[int]) -> list[float]:
        """Return log P(tokens | prefix) for each prefix, evaluated side by side.

        The prefixes' common beginning is evaluated once (and kept for the next call), then
        shared by every option's sequence.
        """
        shared = min(_common(prefixes[0], p, len(p) - 1) for p in prefixes)
        base = self._shared_prefix(prefixes[0][:shared])
        scores: list[float] = []
        first = 1 + _PREFIX_SLOTS
        for start in range(0, len(prefixes), _SCORE_SEQS):
            group = prefixes[start : start + _SCORE_SEQS]
            entries: list[tuple[int, int, int, bool]] = []
            wanted: list[list[int]] = []  # per option: the batch indexes whose logits count
            for k, prefix in enumerate(group):
                seq = first + k
                llama_cpp.llama_memory_seq_rm(self.memory, seq, -1, -1)
                if base:
                    llama_cpp.llama_memory_seq_cp(self.memory, _SCORE_BASE, seq, 0, base)
                sequence = prefix + tokens
                for pos in range(base, len(sequence) - 1):
                    if pos == len(prefix) - 1:
                        wanted.append([])
                    if pos >= len(prefix) - 1:
                        wanted[-1].append(len(entries))
                    entries.append((sequence[pos], pos, seq, pos >= len(prefix) - 1))
            if len(entries) > _N_BATCH:
                raise EngineFailure("the options to score do not fit one batch")
            self._decode(entries)
            for indexes in wanted:
                total = 0.0
                for token, index in zip(tokens, indexes, strict=True):
                    row = self.logits(index)
                    top = float(row.max())
                    total += float(row[token]) - top - math.log(float(np.exp(row - top).sum()))
                scores.append(total)
            for k in range(len(group)):
                llama_cpp.llama_memory_seq_rm(self.memory, first + k, -1, -1)
        return scores

    def _shared_prefix(self, prefix: list[int]) -> int:
        """Hold `prefix` in the scoring base sequence; return how many tokens it holds."""
        held = self._seqs.get(_SCORE_BASE, [])
        if held == prefix:
            return len(prefix)
        llama_cpp.llama_memory_seq_rm(self.memory, _SCORE_BASE, -1, -1)
        self._seqs[_SCORE_BASE] = []
        if len(prefix) < 2:
            return 0
        files = self.files
        if files is None or not files.load(self.ctx, self.memory, _SCORE_BASE, prefix):
            self._decode([(t, i, _SCORE_BASE, False) for i, t in enumerate(prefix)])
            if files is not None:
                files.save(self.ctx, _SCORE_BASE, prefix)
        self._seqs[_SCORE_BASE] = list(prefix)
        return len(prefix)

    # --- grammar-bound decoding -----------------------------------------------------------

    def rules(self, schema: Mapping[str, Any], close: str = "") -> str:
        """Return the GBNF rules of " " + a value of `schema` + `close` (converted once)."""
        key = json.dumps(schema, sort_keys=True) + close
        rules = self._grammars.get(key)
        if rules is None:
            rules = schema_to_gbnf(schema)
            # The prompt ends just before a value the examples show after a space, so the
            # value starts with that space and the model sees the tokens it was shown; the
            # closing "]" of a step is the grammar's too, as the model writes it with the
            # value's last character in one token.
            ending = f" {json.dumps(close)}" if close else ""
            rules = rules.replace("root ::=", "value ::=", 1) + f'\nroot ::= " " value{ending}\n'
            self._grammars[key] = rules
        return rules

    def decode(
        self, tokens: list[int], keep: int, rules: str, max_tokens: int, temperature: float
    ) -> Iterator[str]:
        """Decode under `rules` after `tokens`; yield the text of each token.

        At temperature 0 the likeliest allowed token is taken: the grammar is checked
        against the likeliest tokens first, one at a time, and against the whole vocabulary
        only when none of them fits. Above 0, one is drawn from the allowed likely tokens.
        """
        sampler = llama_cpp.llama_sampler_init_grammar(self.vocab, rules.encode(), b"root")
        if not sampler:
            raise EngineFailure("llama.cpp rejected the step's grammar")
        one = (llama_cpp.llama_token_data * 1)()
        single = llama_cpp.llama_token_data_array(
            data=ctypes.cast(one, llama_cpp.llama_token_data_p), size=1, selected=-1, sorted=False
        )
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.decoded = 0
        try:
            self.feed(tokens, keep)
            for _ in range(max_tokens):
                logits = self.logits()
                allowed = _allowed_top(sampler, logits, one, single, temperature <= 0)
                if not allowed:
                    allowed = self._allowed_all(sampler, logits)
                token = self._pick(allowed, logits, temperature)
                llama_cpp.llama_sampler_accept(sampler, token)
                if llama_cpp.llama_vocab_is_eog(self.vocab, token):
                    break
                self.decoded += 1
                yield decoder.decode(self.piece(token))
                self.advance(token)
            yield decoder.decode(b"", final=True)
        finally:
            llama_cpp.llama_sampler_free(sampler)

    def _pick(self, allowed: list[int], logits: Any, temperature: float) -> int:
        if temperature <= 0 or len(allowed) == 1:
            return allowed[0]
        weights = np.array([logits[t] for t in allowed], dtype=np.float64) / temperature
        weights = np.exp(weights - weights.max())
        return int(self._rng.choice(allowed, p=weights / weights.sum()))

    def _allowed_all(self, sampler: Any, logits: Any) -> list[int]:
        """Return the allowed tokens, likeliest first, filtering the whole vocabulary."""
        count = len(logits)
        data = (llama_cpp.llama_token_data * count)()
        view = np.frombuffer(memoryview(data), dtype=_TOKEN_DATA)
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
        finite = np.flatnonzero(np.isfinite(view["logit"]))
        if not len(finite):
            raise EngineFailure("the grammar allows no token here")
        order = finite[np.argsort(-view["logit"][finite])][:_TOP_TOKENS]
        return [int(t) for t in order]


def _allowed_top(sampler: Any, logits: Any, one: Any, single: Any, first: bool) -> list[int]:
    """Return the likeliest tokens the grammar allows (only the first when `first`)."""
    top = np.argpartition(-logits, _TOP_TOKENS)[:_TOP_TOKENS]
    allowed = []
    for candidate in top[np.argsort(-logits[top])]:
        one[0].id, one[0].logit, one[0].p = int(candidate), float(logits[candidate]), 0.0
        single.size, single.selected = 1, -1
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(single))
        if one[0].logit != -math.inf:
            allowed.append(int(candidate))
            if first:
                break
    return allowed


def _common(held: list[int], tokens: list[int], limit: int) -> int:
    """Return how many leading tokens `held` and `tokens` share (at most `limit`)."""
    n = min(len(held), limit)
    i = 0
    while i < n and held[i] == tokens[i]:
        i += 1
    return i


@llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
def _NO_LOG(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    """Pass on llama.cpp's errors only (the engine's stderr goes into crash reports)."""
    if level == _LOG_ERROR:
        sys.stderr.write(text.decode("utf-8", "replace"))
