"""plait's HTTP API (`pip install "plait[server]"`): `create_app(agents)` returns a FastAPI app.

```python
import uvicorn
from plait.server import create_app
from plait.stores import from_url

app = create_app([agent], store=from_url("sqlite:///plait.db"), api_keys={"k1": "alice"})
uvicorn.run(app, port=8000)
```

Routes (see docs/server.md): `GET /healthz`, `GET /v1/agents`,
`POST /v1/agents/{name}/runs`, `POST /v1/runs/{checkpoint_id}/resume`,
`POST /v1/runs/{checkpoint_id}/cancel`, `GET /v1/runs/{checkpoint_id}`, `GET /v1/sessions`,
`GET /v1/sessions/{session_id}`, `DELETE /v1/sessions/{session_id}`; OpenAI-compatible
(see docs/protocols.md): `GET /v1/models`, `POST /v1/chat/completions`; with the `agui`
extra, `POST /agui/{agent}` (AG-UI); with `a2a=True` (the `a2a` extra), `POST /a2a/{agent}`
and its card at `GET /a2a/{agent}/.well-known/agent-card.json` (A2A 1.0 and 0.3); the
cost ledger at `GET /v1/usage`. `Quota` bounds each user (`create_app(quotas=...)`).
"""

from __future__ import annotations

from plait.errors import UsageError

try:
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise UsageError(
        f"plait.server needs FastAPI and uvicorn ({exc.name} is missing): "
        'pip install "plait[server]"'
    ) from None

from plait.server.app import create_app
from plait.server.quotas import Quota

__all__ = ["Quota", "create_app"]
