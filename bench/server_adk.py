"""Google ADK's own API server on the same zero-latency workload as `bench/server_app.py`.

Run by `bench/server.py` with the Python of a separate environment that has `google-adk`
(it does not import plait):

    /tmp/venv-adk/bin/python bench/server_adk.py --port 8001 --dir /tmp/x [--sessions memory]

It writes an agents directory into `--dir` (one agent, `bench_agent`, whose model is a
`BaseLlm` subclass answering as a pure function of the request: one `add` tool call, then
50 words), builds ADK's FastAPI app with `google.adk.cli.fast_api.get_fast_api_app` (what
`adk api_server` serves) and runs it with uvicorn. Sessions: ADK's default (local SQLite
under the agents directory), or `memory://` with `--sessions memory`.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

AGENT = '''
"""The benchmark's agent: one `add` tool call, then 50 words, from a zero-latency model."""

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.genai import types

TEXT_50 = " ".join(f"word{i}" for i in range(50))
STEPS = 1
_USAGE = types.GenerateContentResponseUsageMetadata(
    prompt_token_count=1, candidates_token_count=1, total_token_count=2
)


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


class ScriptedLlm(BaseLlm):
    """Answers as a pure function of the request, so one instance serves concurrent runs."""

    async def generate_content_async(self, llm_request, stream=False):
        done = sum(
            1
            for content in llm_request.contents
            for part in content.parts or ()
            if part.function_response is not None
        )
        if done < STEPS:
            call = types.FunctionCall(name="add", args={"a": done, "b": 1}, id=f"call_{done}")
            part = types.Part(function_call=call)
        else:
            part = types.Part(text=TEXT_50)
        content = types.Content(role="model", parts=[part])
        yield LlmResponse(content=content, usage_metadata=_USAGE)


root_agent = LlmAgent(
    name="assistant",
    model=ScriptedLlm(model="scripted"),
    instruction="You are helpful.",
    tools=[add],
)
'''


def write_agents(root: Path) -> Path:
    """Write the agents directory (one agent, `bench_agent`) under `root`; return it."""
    agents = root / "agents"
    package = agents / "bench_agent"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("from . import agent\n")
    (package / "agent.py").write_text(textwrap.dedent(AGENT).lstrip())
    return agents


def main() -> None:
    """Serve ADK's API server on 127.0.0.1:`--port` until stopped."""
    import uvicorn
    from google.adk.cli.fast_api import get_fast_api_app

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True, help="where to write the agents")
    parser.add_argument("--sessions", choices=["default", "memory"], default="default")
    parser.add_argument("--keep-alive", type=int, default=5, help="uvicorn's timeout_keep_alive")
    args = parser.parse_args()
    agents = write_agents(args.dir)
    uri = "memory://" if args.sessions == "memory" else None
    app = get_fast_api_app(
        agents_dir=str(agents), session_service_uri=uri, web=False, port=args.port
    )
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        access_log=False,
        log_level="warning",
        timeout_keep_alive=args.keep_alive,
    )


if __name__ == "__main__":
    main()
