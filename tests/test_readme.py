"""The README's Quickstart and examples are true."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _quickstart() -> list[str]:
    section = README.split("## Quickstart", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quickstart_has_exactly_two_commands_demo_then_tests() -> None:
    lines = _quickstart()
    assert len(lines) == 2
    assert lines[0].endswith("plait demo")
    assert "scripts/check.py" in lines[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "sed -n 2p" in ci  # CI runs the README's second line


def test_python_examples_in_the_readme_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert blocks
    for block in blocks:  # run as a script is run: its `__main__` part too
        exec(compile(block, "README.md", "exec", dont_inherit=True), {"__name__": "__main__"})


def _first_agent(tmp_path: Path) -> Path:
    section = README.split("## A first agent", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    path = tmp_path / "first_agent.py"
    path.write_text(block.group(1))
    return path


def test_the_first_agent_runs_with_plait_run_twice(tmp_path: Path) -> None:
    _first_agent(tmp_path)
    for _ in range(2):  # a fresh process each time, each loading the file
        out = subprocess.run(
            [sys.executable, "-m", "plait", "run", "first_agent.py:agent", "What is 2 + 3?"],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert "2 + 3 = 5" in out.stdout


def test_the_first_agent_serves_request_after_request(tmp_path: Path) -> None:
    import runpy

    from plait.server import create_app
    from plait.stores import MemoryStore
    from tests.server.support import ServerThread, client

    agent = runpy.run_path(str(_first_agent(tmp_path)))["agent"]
    app = create_app(agent, store=MemoryStore())
    with ServerThread(app) as server, client(server.url) as http:
        for _ in range(3):
            body = {"input": "What is 2 + 3?", "stream": False}
            answer = http.post("/v1/agents/calculator/runs", json=body).json()
            assert answer["status"] == "completed", answer
            assert answer["final_output"] == "2 + 3 = 5"


def test_a_spent_script_says_how_to_answer_every_run() -> None:
    from plait import ChatModelAgent, Runner
    from plait.testing import ScriptedModel, reply

    runner = Runner(ChatModelAgent("a", ScriptedModel([reply("once")])))
    assert runner.query_sync("one").final_output == "once"
    second = runner.query_sync("two")
    assert second.error is not None and "per_run=True" in str(second.error)


def test_python_examples_in_the_docs_run() -> None:
    ran = 0
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.S):
            exec(compile(block, str(page), "exec", dont_inherit=True), {"__name__": "docs_example"})
            ran += 1
    assert ran >= 1


def _prose(page: Path) -> str:
    """Return the text of `page` outside its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)


def _links(page: Path) -> list[str]:
    """Return the targets of the links of `page` that point inside the repository."""
    found = re.findall(r"\]\(([^)\s]+)\)", _prose(page))
    return [t for t in found if not t.startswith(("http://", "https://", "mailto:"))]


def _anchors(page: Path) -> set[str]:
    """Return the ids GitHub gives the headings of `page` (a repeated one gets `-1`, ...)."""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#+ (.+)$", _prose(page), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        if count:
            seen[f"{slug}-{count}"] = 1
    return set(seen)


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_links_between_the_pages_resolve() -> None:
    broken = []
    for page in _pages():
        for target in _links(page):
            path, _, fragment = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif fragment and dest.suffix == ".md" and fragment not in _anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_the_map_links_every_page() -> None:
    index = ROOT / "docs" / "index.md"
    linked = {(index.parent / t.partition("#")[0]).resolve() for t in _links(index)}
    pages = {p.resolve() for p in (ROOT / "docs").rglob("*.md")} - {index.resolve()}
    assert sorted(str(p.relative_to(ROOT)) for p in pages - linked) == []
    assert (ROOT / "CHANGELOG.md").resolve() in linked


def _demo(*args: str, code: int = 0, **environ: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PLAIT_MODEL", "PLAIT_LOCAL_MODEL")}
    out = subprocess.run(
        [sys.executable, "-m", "plait", "demo", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**env, "COLUMNS": "200", **environ},
    )
    assert out.returncode == code, out.stdout + out.stderr
    return out.stdout + out.stderr


def test_the_scripted_demo_says_so_and_answers_from_its_tools() -> None:
    out = _demo("--scripted")
    assert "scripted model" in out
    assert "transfer Router → WeatherAgent" in out
    assert "answer: It is cloudy in Tokyo, 18°C." in out
    assert "answer: 156 * 789 + 234 = 123318" in out
    assert "answer: The capital of France is Paris." in out


def test_the_demo_runs_offline_on_the_embedded_local_model() -> None:
    out = _demo()
    assert "embedded local model" in out and "loaded gemma-3-270m-q4_k_m.gguf" in out
    weather, math, general = out.split("=== case ")[1:]
    assert "transfer Router → WeatherAgent" in weather
    assert '[WeatherAgent] calls get_weather({"city": "Tokyo"})' in weather
    assert '"condition":"Cloudy"' in weather  # the tool really ran
    assert "transfer Router → MathAgent" in math
    assert '[MathAgent] calls calculator({"expression": "156 * 789 + 234"})' in math
    assert "calculator → 123318" in math
    for case in (weather, math):
        answer = case.split("answer: ", 1)[1].splitlines()[0]
        assert answer.strip() and answer != "None"
    # a request for neither specialist is not transferred, and no tool runs for it
    assert "transfer" not in general and " calls " not in general
    assert "answer: I can only help with weather and math." in general
    summary = re.search(r"summary: model local (\S+) · (\d+) model steps · (\d+) prompt", out)
    assert summary is not None and int(summary.group(2)) == 7
    assert re.search(r"decoded in [\d.]+ s \(\d+ tokens/s\)", out)


def test_the_demo_explains_a_model_it_cannot_start(tmp_path: Path) -> None:
    out = _demo(code=2, PLAIT_LOCAL_MODEL=str(tmp_path / "missing.gguf"))
    assert "cannot start the demo" in out and "no GGUF file" in out
    assert "plait demo --scripted" in out
