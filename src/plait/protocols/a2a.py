"""A2A (Agent2Agent): serve a plait agent to A2A clients, and call remote A2A agents.

`app(agent)` returns an ASGI app (the official `a2a-sdk`'s server) that serves `agent` with
its agent card to A2A 1.0 and 0.3 clients (`create_app(..., a2a=True)` serves every agent of
plait's server the same way, at `/a2a/{agent}`); `RemoteAgent(url)` is a plait `Agent` that
runs a remote A2A agent. Both need the `a2a` extra (`pip install "plait[a2a]"`); importing
this module does not, and without it they raise a `UsageError` saying what to install.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plait.core.agent import Agent, AgentInput
from plait.core.agent_context import AgentContext
from plait.errors import UsageError
from plait.events import AgentEvent

if TYPE_CHECKING:
    from a2a.server.tasks import TaskStore
    from a2a.types import AgentCard
    from starlette.applications import Starlette

    from plait.stores.base import Store

__all__ = ["RemoteAgent", "app"]

DEFAULT_TIMEOUT = 10.0


def _require_sdk(*, serving: bool = False) -> None:
    """Raise a `UsageError` naming the extra when the a2a-sdk (or, `serving`, the server
    it runs behind) is missing."""
    try:
        import a2a.client
        import a2a.server.routes  # noqa: F401
        import httpx  # noqa: F401
        import starlette  # noqa: F401

        if serving:
            import fastapi  # noqa: F401
    except ImportError as exc:
        raise UsageError(
            f'plait.protocols.a2a needs the a2a-sdk: pip install "plait[a2a]" ({exc})'
        ) from exc


def app(
    agent: Agent,
    *,
    url: str | None = None,
    store: Store | None = None,
    task_store: TaskStore | None = None,
    streaming: bool = True,
    version: str = "1.0.0",
    allowed_hosts: Sequence[str] | None = None,
    max_request_bytes: int = 1_048_576,
) -> Starlette:
    """Return an ASGI app that serves `agent` over A2A (JSON-RPC, 1.0 and 0.3), with its card.

    The card is at `/.well-known/agent-card.json`: the agent's name and description, one
    skill describing it, `capabilities.streaming`, and the JSON-RPC endpoint at `url`
    (None: the URL each request came to), for A2A 1.0 and 0.3 clients alike. Each task is
    an ordinary plait run: `working` while it runs, its text streamed as the `answer`
    artifact in chunks (at most about 4 KB or 50 ms of text each), `input-required` at an
    interrupt, `completed` with the final answer as that artifact, `failed` with the error,
    `canceled` when the client cancels it or leaves before its answer is complete (the run
    is stopped). A message to an `input-required` task resumes the run with the message's
    data part or text. The context id is the plait session id. `store` keeps the runs'
    checkpoints and sessions (default: in memory), `task_store` the A2A tasks (default: the
    SDK's in-memory one); give persistent ones together, since a paused task finds its
    checkpoint through its metadata.

    The app answers only requests addressed to a loopback name, its own address, the host
    of `url`, or a name in `allowed_hosts` (`["*"]`: any), as `plait.server.create_app`
    does, and refuses bodies over `max_request_bytes` with `413`.
    """
    _require_sdk(serving=True)
    from plait.protocols._a2a_server import build_app

    return build_app(
        agent,
        url=url,
        store=store,
        task_store=task_store,
        streaming=streaming,
        version=version,
        allowed_hosts=allowed_hosts,
        max_request_bytes=max_request_bytes,
    )


class RemoteAgent:
    """A plait `Agent` that runs a remote A2A agent.

    `url` is the remote's base URL (its card is at `{url}/.well-known/agent-card.json`).
    Without `name` or `description`, the card is fetched here (a blocking call of at most
    `timeout` seconds) and gives them. Each run sends the trailing user messages of its
    input as one message (in the remote context of the run's session, when it has one) and
    yields the remote's answer; with a streaming card the text arrives as it is produced (a
    streaming message when the run streams). A remote task that asks for input pauses the
    run (`interrupt()` with what the remote asked); the resume value is sent to that task.
    A remote task that fails, a remote that cannot be reached or is silent for `timeout`
    seconds, and a card or answer that is not A2A end the run with a `RemoteAgentError`.
    `headers` are sent with every request (an API key, for instance).
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        _require_sdk()
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise UsageError(f"RemoteAgent needs an http(s) URL, got {url!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise UsageError(f"RemoteAgent timeout must be a positive number, got {timeout!r}")
        for given, what in ((name, "name"), (description, "description")):
            if given is not None and not isinstance(given, str):
                raise UsageError(f"RemoteAgent {what} must be a str, got {given!r}")
        from plait.protocols._a2a_client import Remote

        self.url = url.rstrip("/")
        self.timeout = float(timeout)
        self.headers = dict(headers or {})
        self._remote = Remote(self.url, self.timeout, self.headers)
        card: AgentCard | None = None
        if name is None or description is None:
            card = self._remote.fetch_card_sync(name)
        self.name: str = name if name is not None else _card_name(card, self.url)
        self.description: str = (
            description if description is not None else card.description if card else ""
        )

    def run(self, input: AgentInput, ctx: AgentContext) -> AsyncIterator[AgentEvent]:
        """Send the input to the remote agent and yield its answer."""
        return self._remote.run(self.name, input, ctx)

    def __repr__(self) -> str:
        return f"RemoteAgent(name={self.name!r}, url={self.url!r})"


def _card_name(card: Any, url: str) -> str:
    from plait.errors import RemoteAgentError

    name = getattr(card, "name", "")
    if not name:
        raise RemoteAgentError(
            f"the agent card at {url} has no name; give RemoteAgent(name=...)", url=url
        )
    return str(name)
