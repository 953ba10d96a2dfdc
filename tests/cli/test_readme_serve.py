"""The README's "Serve it" section is true: its TARGET loads offline, its `curl` fits the API,
and the command it shows, run for real, answers that `curl` and more runs."""

from __future__ import annotations

import json
import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from plait.cli.target import load_target
from tests.cli.support import ROOT, ServeProcess, sqlite_url, sse_items

README = (ROOT / "README.md").read_text()


def _serve_it() -> list[str]:
    section = README.split("## Serve it", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_serve_it_comes_right_after_the_quickstart() -> None:
    headings = re.findall(r"^## (.+)$", README, re.M)
    assert headings[headings.index("Quickstart") + 1] == "Serve it"


def _target() -> str:
    serve, _ = _serve_it()
    command = shlex.split(serve.split("&&")[-1])
    assert command[0].endswith("plait") and command[1] == "serve"
    (target,) = command[2:]  # default host and port: http://127.0.0.1:8000
    return target


def _curl_body() -> dict[str, Any]:
    _, curl = _serve_it()
    words = shlex.split(curl)
    body: dict[str, Any] = json.loads(words[words.index("-d") + 1])
    return body


def test_serve_it_is_one_serve_command_and_one_curl_that_streams_a_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, curl = _serve_it()
    target = _target()
    # no model, extra or key: the served team is on scripted models
    for name in ("PLAIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    agent = load_target(target)
    words = shlex.split(curl)
    assert words[:2] == ["curl", "-N"]  # -N: print the events as they come
    assert words[2] == f"http://127.0.0.1:8000/v1/agents/{agent.name}/runs"
    body = _curl_body()
    assert isinstance(body["input"], str) and body.get("stream", True) is True
    pytest.importorskip("fastapi")
    from plait.server.bodies import RunRequest

    RunRequest.model_validate(body)


def _stream(http: Any, name: str, body: dict[str, Any]) -> dict[str, Any]:
    with http.stream("POST", f"/v1/agents/{name}/runs", json=body) as response:
        assert response.status_code == 200
        items = list(sse_items(response.iter_lines()))
    assert items[-1][0] == "run_end"
    summary: dict[str, Any] = items[-1][1]
    return summary


def test_the_served_example_answers_the_curl_and_more_runs(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    httpx = pytest.importorskip("httpx")
    target = _target()
    store = ("--store", sqlite_url(tmp_path / "plait.db"))
    with (
        ServeProcess([target, *store], tmp_path / "logs") as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        (agent,) = http.get("/v1/agents").json()
        weather = _stream(http, agent["name"], _curl_body())
        assert weather["status"] == "completed"
        assert weather["final_output"] == "It is cloudy in Tokyo, 18°C."
        math = _stream(http, agent["name"], {"input": "Calculate 156 * 789 + 234"})
        assert math["final_output"] == "156 * 789 + 234 = 123318"
        again = _stream(http, agent["name"], _curl_body())
        assert again["final_output"] == weather["final_output"]
        bodies = [{"input": "What is 6 * 7?"}, {"input": "Weather in Paris?"}]
        with ThreadPoolExecutor(2) as pool:  # two runs at once
            both = list(pool.map(lambda body: _stream(http, agent["name"], body), bodies))
        assert [s["final_output"] for s in both] == [
            "6 * 7 = 42",
            "It is light rain in Paris, 15°C.",
        ]
