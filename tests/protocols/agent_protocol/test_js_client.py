"""The npm SDK of the Agent Protocol (`@langchain/langgraph-sdk`, the version js/package.json
pins) drives agents served by `plait serve` with API keys from node (js/drive.mjs), as
docs/chat-ui.md shows: assistants, threads, a run streamed in the values and messages-tuple
modes (what `useStream` asks for), state and history, a run waited for, an interrupt
resumed with a command (once), the store. The SDK is installed with `npm ci` from
js/package-lock.json into a cache directory, once per lock. And what the page says of
browsers holds: `plait serve` sends no CORS headers."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.support import ServeProcess, sqlite_url

JS = Path(__file__).resolve().parent / "js"
SUPPORT = Path(__file__).resolve().parent / "support.py"
#: Where the SDK is installed (`$PLAIT_NPM_CACHE`, else ~/.cache/plait-tests).
CACHE = Path(os.environ.get("PLAIT_NPM_CACHE") or Path.home() / ".cache" / "plait-tests")


def _tools() -> tuple[str, str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not installed here: the npm SDK cannot run")
    return node, npm


def _installed(npm: str) -> Path:
    """Return the node_modules of the pinned SDK, installing it with `npm ci` if missing."""
    pins = (JS / "package.json").read_bytes() + (JS / "package-lock.json").read_bytes()
    home = CACHE / f"langgraph-sdk-{hashlib.sha256(pins).hexdigest()[:16]}"
    if not (home / "node_modules" / "@langchain" / "langgraph-sdk").is_dir():
        building = home.with_name(f"{home.name}.{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(JS / name, building / name)
        done = subprocess.run(
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=building,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
        try:
            building.rename(home)
        except OSError:  # another test process installed it first
            shutil.rmtree(building, ignore_errors=True)
    return home / "node_modules"


def _drive(node: str, modules: Path, url: str, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """Run js/drive.mjs against `url` as user ann; return its steps by name."""
    work = tmp_path / "js"
    work.mkdir()
    shutil.copy(JS / "drive.mjs", work / "drive.mjs")
    (work / "node_modules").symlink_to(modules, target_is_directory=True)
    env = {**os.environ, "PLAIT_URL": url, "PLAIT_KEY": "key-ann"}
    done = subprocess.run(
        [node, "drive.mjs"], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"node failed:\n{done.stdout}\n{done.stderr}"
    steps = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {step.pop("step"): step for step in steps}


@pytest.mark.timeout(900)  # the first run installs the SDK from the npm registry
def test_the_npm_sdk_drives_a_served_agent(tmp_path: Path) -> None:
    node, npm = _tools()
    modules = _installed(npm)
    keys = tmp_path / "keys.txt"
    keys.write_text("key-ann ann\nkey-bob bob\n")
    args = [
        "plait.examples.teams:offline_router",  # the README's served example (docs/chat-ui.md)
        f"{SUPPORT}:served_asker",
        "--api-keys",
        str(keys),
        "--store",
        sqlite_url(tmp_path / "plait.db"),
    ]
    with ServeProcess(args, tmp_path / "logs") as server:
        steps = _drive(node, modules, server.url, tmp_path)
        asked = {
            "Origin": "http://localhost:3000",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "x-api-key, content-type",
        }
        preflight = httpx.options(f"{server.url}/threads", headers=asked)
    assert "access-control-allow-origin" not in preflight.headers  # no CORS: same origin only
    assert steps["assistants"] == {"graphs": ["Router", "asker"]}
    assert steps["thread"] == {"status": "idle", "metadata": {"from": "node"}}
    stream = steps["stream"]
    assert (stream["first"], stream["last"]) == ("metadata", "end")
    assert stream["modes"] == ["end", "messages", "metadata", "values"]
    assert stream["question"] == "What is the weather like in Tokyo?"
    assert stream["answer"] == "It is cloudy in Tokyo, 18°C."
    assert {"Router", "WeatherAgent"} <= set(stream["nodes"])
    assert steps["state"]["next"] == []
    assert steps["state"]["same"] is True  # the newest of the history is the state now
    assert steps["wait"] == {"answer": "156 * 789 + 234 = 123318", "questions": 2}
    assert steps["paused"] == {"question": "approve pay?", "status": "interrupted"}
    assert steps["resumed"] == {"tool": "pay=yes", "last": "paid", "status": "idle"}
    assert steps["resumed again"] == {"refused": 409}
    assert steps["store"] == {
        "value": {"text": "from node"},
        "namespace": ["notes", "node"],
        "key": "first",
    }
