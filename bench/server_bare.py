"""The floor `bench/server.py --floor` measures plait's server against: a bare FastAPI app.

It streams the same four SSE events a light plait run streams (three `agent_event`s, one
`run_end`) on the same route, with no agent, no store and no checks: the least a Python
server on FastAPI and uvicorn can spend on such a run. Started by the benchmark as
`python -m uvicorn --factory --app-dir bench server_bare:build --port N`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

_WORDS = " ".join(f"word{i}" for i in range(50))
EVENT = json.dumps(
    {"agent_name": "assistant", "output": {"message": {"role": "assistant", "content": _WORDS}}}
)
END = json.dumps(
    {"status": "completed", "checkpoint_id": None, "final_output": "x"}, separators=(",", ":")
)


def build() -> FastAPI:
    """Return the bare app: `GET /healthz` and the run route, streaming four events."""
    app = FastAPI()

    @app.get("/healthz")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/agents/assistant/runs")
    async def runs(request: Request) -> StreamingResponse:
        await request.json()

        async def events() -> AsyncIterator[bytes]:
            for _ in range(3):
                yield f"event: agent_event\ndata: {EVENT}\n\n".encode()
            yield f"event: run_end\ndata: {END}\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream")

    return app
