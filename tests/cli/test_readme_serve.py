"""The README's "Serve it" section is true: its TARGET loads, and its `curl` fits the API."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from plait.cli.target import load_target
from tests.cli.support import ROOT

README = (ROOT / "README.md").read_text()


def _serve_it() -> list[str]:
    section = README.split("## Serve it", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_serve_it_comes_right_after_the_quickstart() -> None:
    headings = re.findall(r"^## (.+)$", README, re.M)
    assert headings[headings.index("Quickstart") + 1] == "Serve it"


def test_serve_it_is_one_serve_command_and_one_curl_that_streams_a_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("openai")
    serve, curl = _serve_it()
    command = shlex.split(serve.split("&&")[-1])
    assert command[0].endswith("plait") and command[1] == "serve"
    (target,) = command[2:]  # default host and port: http://127.0.0.1:8000
    monkeypatch.setenv("PLAIT_MODEL", "openai:gpt-4o-mini")  # a model that needs no weights
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = load_target(target)
    words = shlex.split(curl)
    assert words[:2] == ["curl", "-N"]  # -N: print the events as they come
    assert words[2] == f"http://127.0.0.1:8000/v1/agents/{agent.name}/runs"
    body = json.loads(words[words.index("-d") + 1])
    assert isinstance(body["input"], str) and body.get("stream", True) is True
    pytest.importorskip("fastapi")
    from plait.server.bodies import RunRequest

    RunRequest.model_validate(body)
