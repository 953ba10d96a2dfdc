"""plait's A2A server: an agent served over A2A's JSON-RPC binding, for 1.0 and 0.3 clients.

`A2AService` is one agent's service: its agent card (a 1.0 interface and a 0.3 one at the
same URL, so the card also carries 0.3's `url`, `preferredTransport` and
`protocolVersion`), the a2a-sdk's request handler over `PlaitExecutor`, and its JSON-RPC
dispatcher, which answers 1.0's methods (`SendMessage`, ...) and 0.3's (`message/send`,
`message/stream`, `tasks/get`, `tasks/cancel`, ...) on one endpoint. Each request is
answered by an `Exchange`, which watches the connection: a client that leaves before its
answer is complete stops the run it started.

Two apps use it: `build_app` (the standalone app of `plait.protocols.a2a.app`, behind the
server's Host guard and body limit) and `a2a_router` (`create_app(..., a2a=True)`: every
served agent at `/a2a/{agent}`, behind the server's guard, limit and API keys, each caller
with their own tasks and their own view of the store).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder, ServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import (
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_0_3,
    PROTOCOL_VERSION_1_0,
)
from fastapi import APIRouter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from plait.core.agent import Agent
from plait.errors import UsageError
from plait.protocols._a2a_executor import STATE_KEY, Call, PlaitExecutor
from plait.run.runner import Runner
from plait.server.budget import ledger_hooks
from plait.server.caller import CallerDep
from plait.server.door import Door
from plait.server.hosts import host_rule
from plait.server.limits import ApiError
from plait.stores.base import Store

__all__ = ["A2AService", "Exchange", "a2a_router", "build_app"]

MODES = ["text/plain", "application/json"]
#: The key of a request's `Call` in its ASGI scope (read by `_ContextBuilder`).
SCOPE_KEY = "plait.a2a.call"
_DISCONNECT: Message = {"type": "http.disconnect"}


class A2AService:
    """One agent served over A2A: its card, the SDK's request handler and dispatcher."""

    def __init__(
        self,
        agent: Agent,
        *,
        url: str | None,
        streaming: bool,
        version: str,
        task_store: TaskStore | None,
        keyed: bool = False,
        name: str | None = None,
    ) -> None:
        self.agent = agent
        self.url = url
        named = name if name is not None else agent.name  # the server's public name
        self.card = _card(agent, named, url or "http://localhost/", streaming, version, keyed)
        self.handler = DefaultRequestHandler(
            agent_executor=PlaitExecutor(),
            task_store=task_store if task_store is not None else InMemoryTaskStore(),
            agent_card=self.card,
        )
        self.dispatcher = JsonRpcDispatcher(
            request_handler=self.handler,
            context_builder=_ContextBuilder(),
            enable_v0_3_compat=True,
        )

    def card_response(self, here: str) -> JSONResponse:
        """Return the agent card, naming `here` as its endpoint unless a `url` was given."""
        card = self.card
        if self.url is None:
            card = AgentCard()
            card.CopyFrom(self.card)
            for interface in card.supported_interfaces:
                interface.url = here
        return JSONResponse(agent_card_to_dict(card))

    def exchange(self, runner: Runner, user: str | None = None) -> Exchange:
        """Return the response that answers one JSON-RPC request with `runner` (as `user`)."""
        return Exchange(self.dispatcher, runner, user)

    async def aclose(self) -> None:
        """Stop the tasks still running (the app is shutting down)."""
        await self.handler.aclose()


def _card(
    agent: Agent, name: str, url: str, streaming: bool, version: str, keyed: bool
) -> AgentCard:
    """Return the agent card of `agent` (as `name`), served at `url` over JSON-RPC 1.0 and
    0.3."""
    described = agent.description or name
    card = AgentCard(
        name=name,
        description=described,
        version=version,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=v)
            for v in (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3)
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=MODES,
        default_output_modes=MODES,
        skills=[AgentSkill(id=name, name=name, description=described, tags=["plait"])],
    )
    if keyed:  # the server's API keys: `Authorization: Bearer <key>`
        scheme = HTTPAuthSecurityScheme(scheme="bearer", description="plait API key")
        card.security_schemes["bearer"].CopyFrom(SecurityScheme(http_auth_security_scheme=scheme))
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card


class _User(User):
    """The caller, as the SDK knows users: its task store keeps each user's tasks apart."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        """Whether the server checked who calls (it has API keys)."""
        return True

    @property
    def user_name(self) -> str:
        """The caller's user id."""
        return self._name


class _ContextBuilder(ServerCallContextBuilder):
    """Build the SDK's call context of a request: the SDK's own, with the request's `Call`
    (and its user, when the server has users)."""

    def __init__(self) -> None:
        self._default = DefaultServerCallContextBuilder()

    def build(self, request: Request) -> ServerCallContext:
        """Return the call context of `request`."""
        context = self._default.build(request)
        call, user = request.scope[SCOPE_KEY]
        context.state[STATE_KEY] = call
        if user is not None:
            context.user = _User(user)
        return context


class Exchange(Response):
    """One JSON-RPC request, answered by the SDK's dispatcher.

    The client's connection is watched while it is answered: if it closes before the
    answer is complete (a blocking `message/send` whose client gave up, a `message/stream`
    whose reader left), the run the request started is stopped.
    """

    def __init__(self, dispatcher: JsonRpcDispatcher, runner: Runner, user: str | None) -> None:
        super().__init__()
        self._dispatcher = dispatcher
        self._runner = runner
        self._user = user

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        if body is None:
            return  # the client left while sending its request
        gone = asyncio.Event()
        answered = False
        given = False

        async def replay() -> Message:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return _DISCONNECT

        async def sent(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body"):
                answered = True
            await send(message)

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if not answered:
                gone.set()

        call = Call(runner=self._runner, gone=gone)
        scope = {**scope, SCOPE_KEY: (call, self._user)}
        async with _running(watch()):
            response = await self._dispatcher.handle_requests(Request(scope, replay))
            await response(scope, replay, sent)
        if self.background is not None:
            await self.background()


async def _read_body(receive: Receive) -> bytes | None:
    """Return the request's body, or None if the client left first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


@contextlib.asynccontextmanager
async def _running(work: Any) -> AsyncIterator[None]:
    """Run the coroutine `work` in a task while the block runs; cancel it after."""
    task = asyncio.ensure_future(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def build_app(
    agent: Agent,
    *,
    url: str | None,
    store: Store | None,
    task_store: TaskStore | None,
    streaming: bool,
    version: str,
    allowed_hosts: Sequence[str] | None,
    max_request_bytes: int,
) -> Starlette:
    """Build the Starlette app of `plait.protocols.a2a.app` (arguments checked there)."""
    if not isinstance(agent, Agent):
        raise UsageError(f"a2a.app needs an Agent (name, description, run), got {agent!r}")
    if isinstance(max_request_bytes, bool) or not isinstance(max_request_bytes, int):
        raise UsageError("max_request_bytes must be an int")
    if max_request_bytes < 1:
        raise UsageError("max_request_bytes must be positive")
    rule = host_rule(_hosts(allowed_hosts, url), keyed=False)
    runner = Runner(agent, store=store, enable_streaming=streaming)
    service = A2AService(
        agent, url=url, streaming=streaming, version=version, task_store=task_store
    )

    async def agent_card(request: Request) -> Response:
        return service.card_response(str(request.base_url))

    async def rpc(request: Request) -> Response:
        return service.exchange(runner)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await service.aclose()

    routes = [
        Route(AGENT_CARD_WELL_KNOWN_PATH, agent_card, methods=["GET"]),
        Route("/", rpc, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(Door, rule=rule, max_bytes=max_request_bytes)
    return app


def _hosts(allowed_hosts: Sequence[str] | None, url: str | None) -> Sequence[str] | None:
    """Return the hosts a standalone app answers besides its own: `allowed_hosts`, and the
    host of the public `url` its card names (`host_rule` checks what it is given)."""
    host = urlsplit(url).hostname if url else None
    if host is None or isinstance(allowed_hosts, str):
        return allowed_hosts
    if allowed_hosts is not None and not isinstance(allowed_hosts, Sequence):
        return allowed_hosts
    return [*(allowed_hosts or ()), host]


def a2a_router(agents: Mapping[str, Agent], *, keyed: bool) -> tuple[APIRouter, list[A2AService]]:
    """Return the routes of `create_app(..., a2a=True)`, and the services to close at the
    end: every agent's card at `/a2a/{agent}/.well-known/agent-card.json` and its JSON-RPC
    endpoint at `/a2a/{agent}` (and `/a2a/{agent}/`)."""
    services = {
        name: A2AService(
            agent,
            url=None,
            streaming=True,
            version="1.0.0",
            task_store=None,
            keyed=keyed,
            name=name,
        )
        for name, agent in agents.items()
    }
    router = APIRouter(tags=["a2a"])

    def service_of(agent: str) -> A2AService:
        found = services.get(agent)
        if found is None:
            raise ApiError(404, f"no agent '{agent[:128]}'; GET /v1/agents lists them")
        return found

    @router.get(
        "/a2a/{agent}" + AGENT_CARD_WELL_KNOWN_PATH, summary="Read an agent's A2A agent card"
    )
    async def a2a_card(agent: str, request: Request, caller: CallerDep) -> Response:
        """Return the A2A agent card of `agent` (its JSON-RPC endpoint: `/a2a/{agent}/`)."""
        endpoint = f"{request.base_url}a2a/{quote(agent, safe='')}/"
        return service_of(agent).card_response(endpoint)

    async def a2a_rpc(agent: str, caller: CallerDep) -> Response:
        """Answer one A2A JSON-RPC request to `agent` (1.0's methods and 0.3's `message/send`,
        `message/stream`, `tasks/get`, `tasks/cancel`, ...), as the caller's user."""
        service = service_of(agent)
        store = caller.store.for_agent(agent)
        tenants = caller.server.runs.tenants
        hooks = [] if tenants is None else [ledger_hooks(tenants, caller.user, agent, admit=True)]
        runner = Runner(
            service.agent, store=store, enable_streaming=True, user=caller.user, hooks=hooks
        )
        return service.exchange(runner, caller.user)

    for path in ("/a2a/{agent}", "/a2a/{agent}/"):
        router.add_api_route(
            path,
            a2a_rpc,
            methods=["POST"],
            summary="Call an agent over A2A (JSON-RPC)",
            include_in_schema=path.endswith("}"),
        )
    return router, list(services.values())
