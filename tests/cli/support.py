"""What the command-line tests share: the test TARGETs, `plait serve` as a real process, SSE."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TARGETS = Path(__file__).resolve().parent / "targets.py"
WAIT = 30.0  # the longest a test waits for a process to start or stop


def target(name: str) -> str:
    """Return the TARGET of `name` in tests/cli/targets.py."""
    return f"{TARGETS}:{name}"


def plait_env(**extra: str) -> dict[str, str]:
    """Return an environment in which `python -m plait` runs this checkout's plait (`extra`
    may replace its PYTHONPATH and COLUMNS too)."""
    paths = [str(ROOT / "src"), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    env = {k: v for k, v in os.environ.items() if k not in ("PLAIT_MODEL", "PLAIT_LOCAL_MODEL")}
    env.update({"PYTHONPATH": os.pathsep.join(p for p in paths if p), "COLUMNS": "200", **extra})
    return env


def sqlite_url(path: Path) -> str:
    """Return the store URL of a SQLite file at an absolute path."""
    return f"sqlite:///{path}"


class ServeProcess:
    """`python -m plait serve ...` (or `web`) on a free port, in a process of its own."""

    def __init__(
        self,
        args: Iterable[str],
        logs: Path,
        command: str = "serve",
        env: dict[str, str] | None = None,
        cwd: Path = ROOT,
    ) -> None:
        self.args = [sys.executable, "-m", "plait", command, *args, "--port", "0"]
        self.env = plait_env(**(env or {}))
        self.cwd = cwd
        logs.mkdir(parents=True, exist_ok=True)
        self.stderr_path = logs / f"serve-{time.monotonic_ns()}.err"
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    @property
    def stderr(self) -> str:
        """Return what the server wrote on stderr so far."""
        return self.stderr_path.read_text(errors="replace")

    def __enter__(self) -> ServeProcess:
        with self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen(
                self.args, cwd=self.cwd, env=self.env, stdout=subprocess.DEVNULL, stderr=err
            )
        try:
            self.url = self._wait_for_start()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_start(self) -> str:
        assert self.process is not None
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            found = re.search(r"plait: serving .* at (http://\S+) ", self.stderr)
            if found:
                return found.group(1)
            if self.process.poll() is not None:
                raise RuntimeError(f"plait serve exited {self.process.returncode}: {self.stderr}")
            time.sleep(0.05)
        raise RuntimeError(f"plait serve did not start: {self.stderr}")

    def terminate(self) -> int:
        """Send SIGTERM and return the exit code once the process has stopped."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(WAIT)

    def interrupt(self) -> int:
        """Send SIGINT (Ctrl-C) and return the exit code once the process has stopped."""
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(WAIT)

    def stop(self) -> None:
        """Stop the process, killing it if it does not stop in time."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(WAIT)

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sse_items(lines: Iterable[str]) -> Iterator[tuple[str, Any]]:
    """Yield (event name, decoded data) of each server-sent event (comments skipped)."""
    name, data = "message", []
    for line in lines:
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
