"""The model engine of `LocalModel`, run in a child process of its own.

llama.cpp is native code: built for another CPU (an instruction this machine does not run,
or AMX that a virtual machine advertises but does not allow) it dies with a signal, and in
the user's process it would take that process down with it. So the engine runs in a child
process (`python -m plait.models._worker`), one per model file, context size and thread
count, started on first use and shared by every `LocalModel` on it. If it dies, the step
fails with a `ModelError` that names the signal, the cause and the fix, and the next step
starts a new engine. The child exits when this process closes its stdin (at exit, or when
this process dies).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from plait.errors import ModelError

__all__ = ["EngineProcess", "EngineStats", "REBUILD", "engine_for"]

REBUILD = (
    'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --no-cache-dir --force-reinstall --no-deps '
    "llama-cpp-python"
)


@dataclass
class EngineStats:
    """What an engine has done: tokens evaluated and decoded, and the time its steps took."""

    steps: int = 0
    evaluated: int = 0
    decoded: int = 0
    seconds: float = 0.0
    load_seconds: float = 0.0


@dataclass(eq=False)
class EngineProcess:
    """One engine child process; `step` runs one step in it, one at a time."""

    path: Path
    n_ctx: int
    n_threads: int
    n_threads_batch: int
    prompt_dir: Path | None = None  # where evaluated prompt beginnings are kept (None: not)
    lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    stats: EngineStats = field(default_factory=EngineStats, init=False)
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _stdout: IO[bytes] | None = field(default=None, init=False)
    _stderr: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=20), init=False
    )
    _ids: int = field(default=0, init=False)
    _current: tuple[int, threading.Event] | None = field(default=None, init=False)  # running
    _write: threading.Lock = field(default_factory=threading.Lock, init=False)
    _doing: str = field(default="starting", init=False)

    @property
    def pid(self) -> int | None:
        """The engine process's id, when one runs."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def load(self) -> None:
        """Start the engine process and load the model, if not done yet."""
        with self.lock:
            self._ensure()

    def step(
        self, step: dict[str, Any], max_tokens: int, temperature: float, stop: threading.Event
    ) -> Iterator[tuple[str, Any]]:
        """Run one step; yield ("text", piece) then ("usage", [prompt, decoded]).

        Setting `stop` cancels the step at its next token.
        """
        with self.lock:
            self._ensure()
            self._ids += 1
            step_id = self._ids
            self._send(
                {
                    "op": "step",
                    "id": step_id,
                    "step": step,
                    "max_tokens": max_tokens,
                    "temperature": temperature,
                }
            )
            self._doing = "during a step"
            self._current = (step_id, stop)
            try:
                yield from self._results(step_id, stop)
            finally:
                self._current = None

    def cancel(self, stop: threading.Event) -> None:
        """Stop the step that `stop` belongs to now, if it runs (from any thread).

        The engine sees it between chunks of the prompt or between tokens.
        """
        current = self._current
        if current is not None and current[1] is stop:
            with contextlib.suppress(ModelError):
                self._send({"op": "cancel", "id": current[0]})

    def _results(self, step_id: int, stop: threading.Event) -> Iterator[tuple[str, Any]]:
        cancelled = False
        while True:
            message = self._receive()
            if stop.is_set() and not cancelled:
                self._send({"op": "cancel", "id": step_id})
                cancelled = True
            if "text" in message:
                if not cancelled:
                    yield "text", message["text"]
            elif "usage" in message:
                if not cancelled:
                    yield "usage", message["usage"]
            elif "done" in message:
                self.stats.steps += 1
                self.stats.evaluated += message["evaluated"]
                self.stats.decoded += message["decoded"]
                self.stats.seconds += message["seconds"]
                return
            else:
                raise ModelError(f"LocalModel: {message.get('error')}")

    def close(self) -> None:
        """Stop the engine process (it exits when its stdin closes)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        _close_pipes(proc)

    # --- the child process ----------------------------------------------------------------

    def _ensure(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self._stderr.clear()
        env = dict(os.environ)
        # Idle OpenMP threads sleep rather than spin: on a small machine spinning threads
        # slow everything else many times over. Read when the library loads.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self._doing = "while starting"
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "plait.models._worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self._stdout = self._proc.stdout
        threading.Thread(
            target=self._drain, args=(self._proc,), name="plait-engine-stderr", daemon=True
        ).start()
        self._doing = "while loading the model"
        self._send(
            {
                "op": "load",
                "path": str(self.path),
                "n_ctx": self.n_ctx,
                "n_threads": self.n_threads,
                "n_threads_batch": self.n_threads_batch,
                "prompt_dir": str(self.prompt_dir) if self.prompt_dir is not None else None,
            }
        )
        message = self._receive()
        if "loaded" not in message:
            self.close()
            raise ModelError(f"LocalModel cannot load {self.path}: {message.get('error')}")
        self.stats.load_seconds = message["loaded"]

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        with proc.stderr:
            for line in proc.stderr:
                self._stderr.append(line.decode("utf-8", "replace").rstrip())

    def _send(self, message: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise ModelError("LocalModel: the engine process is not running")
        try:
            with self._write:
                proc.stdin.write(json.dumps(message).encode() + b"\n")
                proc.stdin.flush()
        except (OSError, ValueError):
            raise self._crashed() from None

    def _receive(self) -> dict[str, Any]:
        assert self._stdout is not None
        line = self._stdout.readline()
        if not line:
            raise self._crashed()
        message: dict[str, Any] = json.loads(line)
        return message

    def _crashed(self) -> ModelError:
        """Return the error for an engine process that died; the next step starts a new one."""
        proc, self._proc = self._proc, None
        code: int | None = None
        if proc is not None:
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            _close_pipes(proc)
        time.sleep(0.05)  # let the stderr reader take the last lines
        how = f"exited with code {code}"
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        native = code is not None and -code in (signal.SIGSEGV, signal.SIGILL, signal.SIGBUS)
        cause = (
            "llama.cpp ran an instruction this CPU cannot run: llama-cpp-python was built "
            "for another CPU (by default pip builds it for the CPU it builds on, and a "
            "virtual machine may advertise AMX or AVX-512 it does not allow)"
            if native
            else "the engine process ended unexpectedly"
        )
        tail = " | ".join(line for line in self._stderr if line)[-600:]
        return ModelError(
            f"LocalModel: the model engine {how} {self._doing}. {cause}. "
            f"Fix: rebuild it for any x86-64 CPU with AVX2: {REBUILD}"
            + (f". Engine output: {tail}" if tail else ""),
            fix=REBUILD,
        )


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    """Close the pipes to a process that has ended (its stderr closes with its reader)."""
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


_ENGINES: dict[tuple[str, int, int, str], EngineProcess] = {}
_ENGINES_LOCK = threading.Lock()


def engine_for(
    path: Path, n_ctx: int, n_threads: int, prompt_dir: Path | None = None
) -> EngineProcess:
    """Return the shared engine process for this model file, context size, threads and
    folder of kept prompt beginnings."""
    key = (str(path), n_ctx, n_threads, str(prompt_dir))
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            batch_threads = max(n_threads, os.cpu_count() or 1)
            engine = _ENGINES[key] = EngineProcess(
                path, n_ctx, n_threads, batch_threads, prompt_dir
            )
        return engine


@atexit.register
def _close_engines() -> None:
    """Stop every engine process when this process exits."""
    with _ENGINES_LOCK:
        engines = list(_ENGINES.values())
    for engine in engines:
        engine.close()
