"""Prompt beginnings kept on disk for `LocalModel`: evaluated once, loaded after that.

The engine keeps the fixed beginning of each agent's prompt (the examples, its instruction
and tools) and the routing examples in its KV cache while it runs. This module keeps them
across processes too: after such a beginning is evaluated, the KV state of its sequence is
written to a file named by its tokens, under a folder named by the model file and the
llama.cpp build; a later engine process loads the file instead of evaluating the tokens
again. A file that does not load (written by another build, cut short, corrupt) is deleted
and the tokens are evaluated as if there were none. At most `LIMIT` files are kept, the
least recently used are deleted first.

Only the engine process imports this module (it needs `llama_cpp`).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
from array import array
from pathlib import Path
from typing import Any

import llama_cpp

__all__ = ["LIMIT", "PromptFiles"]

LIMIT = 24  # the most files kept in one model's folder


class PromptFiles:
    """The kept prompt beginnings of one model file, in `root`."""

    def __init__(self, root: str, model_path: str) -> None:
        info = os.stat(model_path)
        identity = f"{os.path.realpath(model_path)}|{info.st_size}|{info.st_mtime_ns}"
        identity += f"|{llama_cpp.__version__}"
        self.folder = Path(root) / hashlib.sha256(identity.encode()).hexdigest()[:16]

    def _file(self, tokens: list[int]) -> Path:
        digest = hashlib.sha256(array("i", tokens).tobytes()).hexdigest()[:32]
        return self.folder / f"{digest}.kv"

    def load(self, ctx: Any, memory: Any, seq: int, tokens: list[int]) -> bool:
        """Load the state of `tokens` into sequence `seq`; return whether it was there.

        The file is moved aside while it loads, so a file that crashes the engine is gone
        when the engine starts again.
        """
        path = self._file(tokens)
        loading = path.with_suffix(f".{os.getpid()}.loading")
        try:
            os.replace(path, loading)
        except OSError:
            return False
        out = (llama_cpp.llama_token * len(tokens))()
        count = ctypes.c_size_t(0)
        size = llama_cpp.llama_state_seq_load_file(
            ctx, os.fsencode(loading), seq, out, len(tokens), ctypes.byref(count)
        )
        if size == 0 or count.value != len(tokens) or list(out[: count.value]) != tokens:
            llama_cpp.llama_memory_seq_rm(memory, seq, -1, -1)
            loading.unlink(missing_ok=True)
            return False
        try:
            os.replace(loading, path)
            os.utime(path)  # recently used
        except OSError:
            loading.unlink(missing_ok=True)
        return True

    def save(self, ctx: Any, seq: int, tokens: list[int]) -> None:
        """Write the state of sequence `seq`, which holds `tokens`, unless it is kept."""
        path = self._file(tokens)
        if path.exists():
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return
        writing = path.with_suffix(f".{os.getpid()}.writing")
        held = (llama_cpp.llama_token * len(tokens))(*tokens)
        if llama_cpp.llama_state_seq_save_file(ctx, os.fsencode(writing), seq, held, len(tokens)):
            with contextlib.suppress(OSError):
                os.replace(writing, path)
        writing.unlink(missing_ok=True)
        self._trim()

    def _trim(self) -> None:
        """Delete the least recently used files beyond `LIMIT`."""
        try:
            kept = sorted(self.folder.glob("*.kv"), key=lambda p: p.stat().st_mtime_ns)
        except OSError:
            return
        for old in kept[: max(len(kept) - LIMIT, 0)]:
            old.unlink(missing_ok=True)
