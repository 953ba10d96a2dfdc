"""`create_app`: plait's HTTP API as a FastAPI app (routes in this module).

Every route but `GET /healthz` runs as the caller's user (from the bearer key, or
`"local"` without keys) against that user's view of the store, so users never see each
other's runs or sessions. Runs are driven by `plait.server.runs`; error bodies come from
`plait.server.limits`. Every request first passes the app's door (`plait.server.door`: the
Host guard, the body limit), which takes a run request of `POST /v1/agents/{name}/runs`
straight to `plait.server.run_route`, the route's own work.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import json
import math
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse

from plait.core.agent import Agent
from plait.errors import CheckpointNotFound, UsageError
from plait.protocols.agent_protocol import (
    RunLogs,
    Scheduler,
    agent_protocol_router,
    stream_shortcut,
)
from plait.protocols.openai_api import OPENAI_PATHS, openai_error, openai_router
from plait.run.time_travel import read_history
from plait.server import collector, run_route
from plait.server.approvals_api import approvals_router
from plait.server.bodies import (
    AgentInfo,
    CancelAccepted,
    ForkRequest,
    Health,
    ResumeRequest,
    RunRequest,
    RunResponse,
    RunSummary,
    SessionDetail,
    SessionInfo,
    StepOut,
    error_responses,
)
from plait.server.caller import CHECKPOINT_HEADER, CallerDep, Server, find_caller
from plait.server.door import Door
from plait.server.eval_api import eval_router
from plait.server.hosts import HostRule, host_rule
from plait.server.leases import DEFAULT_LEASE, WorkerLease
from plait.server.limits import ApiError, add_error_shape, install_error_handlers
from plait.server.memory_api import memory_router
from plait.server.quotas import Quota, Tenants, check_admin_keys, check_quotas
from plait.server.rejoin import kept_relay, rejoin_router
from plait.server.run_route import run_shortcut
from plait.server.run_turn import turn_router
from plait.server.runs import Runs
from plait.server.runs_api import runs_router
from plait.server.spans import RunSpans, run_spans
from plait.server.sse import server_exiting
from plait.server.summary import session_detail
from plait.server.usage_api import usage_router
from plait.server.users import check_api_keys, is_safe_id
from plait.server.webhooks import Webhooks
from plait.stores.base import GuardedStore, Store

__all__ = ["create_app"]

#: Seconds a stopping server gives its runs to reach a safe point before cancelling them.
SHUTDOWN_GRACE = 10.0
#: Seconds between two looks for a stop request of the uvicorn server.
EXIT_POLL = 0.5


#: What each error status means on the app's own routes.
_ERROR_MEANINGS = {
    400: "Bad input or a resume that does not fit the run.",
    401: "No valid API key.",
    404: "Unknown agent, run or session (also one of another user).",
    409: "The run was already resumed, or is being resumed or still running.",
    413: "The request body is over the server's limit.",
    422: "The body does not match the schema.",
    429: "A quota of the user refuses the run (`Retry-After` says when to try again).",
}
_errors = functools.partial(error_responses, _ERROR_MEANINGS)


_RUN_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "With `stream` true (the default): `text/event-stream`, one `agent_event` per "
            "event (data: the event's JSON), then one `run_end` (data: the run summary). "
            "With `stream` false: the run summary with its `events`. The "
            f"`{CHECKPOINT_HEADER}` header holds the run's checkpoint id."
        ),
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
}

# the app's own routes, by the tag the API's documentation lists them under
router = APIRouter()
runs = APIRouter(tags=["runs"])
sessions = APIRouter(tags=["sessions"])


@router.get("/healthz", summary="Health check", response_model=Health, tags=["server"])
async def healthz() -> Health:
    """Answer `{"status": "ok"}` (no API key needed)."""
    return Health()


@router.get(
    "/v1/agents",
    summary="List the agents",
    response_model=list[AgentInfo],
    responses=_errors(401),
    tags=["agents"],
)
async def list_agents(caller: CallerDep) -> list[AgentInfo]:
    """Return the name and description of every agent this server runs."""
    return [
        AgentInfo(name=name, description=agent.description)
        for name, agent in caller.server.agents.items()
    ]


@runs.post(
    "/v1/agents/{name}/runs",
    summary="Run an agent",
    response_model=RunResponse,
    responses={**_RUN_RESPONSES, **_errors(400, 401, 404, 413, 422, 429)},
)
async def start_run(name: str, body: RunRequest, caller: CallerDep) -> Response:
    """Start a run of agent `name` on `input` (a text, or message objects), optionally in
    a session. The run goes on if the client leaves; read its summary with
    `GET /v1/runs/{checkpoint_id}`."""
    return await run_route.start(caller, name, body)


@runs.post(
    "/v1/runs/{checkpoint_id}/resume",
    summary="Resume a paused run",
    response_model=RunResponse,
    responses={**_RUN_RESPONSES, **_errors(400, 401, 404, 409, 413, 422, 429)},
)
async def resume_run(checkpoint_id: str, body: ResumeRequest, caller: CallerDep) -> Response:
    """Resume a paused (or cancelled) run with answers to its interrupts: `targets` by
    interrupt id, or `value` for its one interrupt. A run that pauses again does so under a
    new checkpoint id (in the summary); the resumed one cannot be resumed again (`409`)."""
    _check_id(checkpoint_id)
    answer = (body.value,) if body.has_value else None
    relay = kept_relay(caller.server.runs, body.deltas)
    run = await caller.server.runs.resume(
        caller.store, checkpoint_id, body.targets, answer, relay=relay
    )
    return await run_route.respond(run, body.stream)


@runs.post(
    "/v1/runs/{checkpoint_id}/cancel",
    summary="Cancel a running run",
    status_code=202,
    response_model=CancelAccepted,
    responses=_errors(401, 404),
)
async def cancel_run(checkpoint_id: str, caller: CallerDep) -> CancelAccepted:
    """Ask a running run to stop at its next safe point, whichever server runs it; it then
    ends "cancelled" with a checkpoint that `resume` continues. A run that is not running
    is left as it is."""
    _check_id(checkpoint_id)
    summary = await caller.server.runs.cancel(caller.store, checkpoint_id)
    return CancelAccepted(checkpoint_id=checkpoint_id, status=summary.status)


@runs.get(
    "/v1/runs/{checkpoint_id}",
    summary="Read a run's summary",
    response_model=RunSummary,
    responses=_errors(401, 404),
)
async def read_run(checkpoint_id: str, caller: CallerDep) -> RunSummary:
    """Return the latest summary of the run started (or resumed) under `checkpoint_id`:
    its status, pending interrupts, output, error, usage and handoffs."""
    _check_id(checkpoint_id)
    return await caller.server.runs.summary(caller.store, checkpoint_id)


@runs.get(
    "/v1/runs/{checkpoint_id}/spans",
    summary="Read a run's spans",
    response_model=RunSpans,
    responses=_errors(401, 404),
)
async def read_run_spans(checkpoint_id: str, caller: CallerDep) -> RunSpans:
    """Return the OpenTelemetry spans of the run started (or resumed) under `checkpoint_id`,
    as this process kept them (`enabled` false when it keeps none: tracing is off, or not on
    an SDK TracerProvider). Spans live in the process that ran the run: behind a load
    balancer, ask the process that served it."""
    _check_id(checkpoint_id)
    await caller.server.runs.summary(caller.store, checkpoint_id)  # the caller's run, or 404
    return run_spans(checkpoint_id)


@runs.get(
    "/v1/runs/{checkpoint_id}/history",
    summary="List a run's kept steps",
    response_model=list[StepOut],
    responses=_errors(401, 404),
)
async def run_history(checkpoint_id: str, caller: CallerDep) -> list[StepOut]:
    """Return the steps the run saved under `checkpoint_id` (its last 100), oldest first:
    each step's number, the agent that took it, the last event before it and the session
    values at it. A run keeps them until its checkpoint expires, also once finished."""
    _check_id(checkpoint_id)
    await caller.server.runs.summary(caller.store, checkpoint_id)  # the user's run, or 404
    steps = await read_history(GuardedStore(caller.store), checkpoint_id)
    return [
        StepOut(
            step=kept.step,
            agent=kept.agent,
            event=None if kept.event is None else json.loads(kept.event.to_json()),
            session_values=kept.session_values,
            state=kept.state,
        )
        for kept in steps
    ]


@runs.post(
    "/v1/runs/{checkpoint_id}/fork",
    summary="Fork a run from one of its steps",
    response_model=RunResponse,
    responses={**_RUN_RESPONSES, **_errors(400, 401, 404, 413, 422, 429)},
)
async def fork_run(checkpoint_id: str, body: ForkRequest, caller: CallerDep) -> Response:
    """Start a new run (a new checkpoint id, in the `x-plait-checkpoint-id` header) from
    step `step` of the run `checkpoint_id`, with `session_values` merged over the step's.
    The run goes on as the original did after that step; the original is left as it is.
    A step the run does not keep is `404`."""
    _check_id(checkpoint_id)
    run = await caller.server.runs.fork(
        caller.store,
        checkpoint_id,
        body.step,
        body.session_values,
        relay=kept_relay(caller.server.runs, False),
    )
    return await run_route.respond(run, body.stream)


@sessions.get(
    "/v1/sessions",
    summary="List your sessions",
    response_model=list[SessionInfo],
    responses=_errors(401),
)
async def list_sessions(caller: CallerDep, agent: str | None = None) -> list[SessionInfo]:
    """Return the caller's sessions, newest first, each with the agent that wrote it last
    (`agent`: only that agent's)."""
    found = await caller.sessions.list(limit=None, agent=agent)
    return [
        SessionInfo(session_id=s.session_id, updated_at=s.updated_at, agent=s.agent) for s in found
    ]


@sessions.get(
    "/v1/sessions/{session_id}",
    summary="Read a session",
    response_model=SessionDetail,
    responses=_errors(401, 404),
)
async def read_session(session_id: str, caller: CallerDep) -> SessionDetail:
    """Return a session's messages (each with its `author`), values and handoffs."""
    document = await caller.sessions.read(session_id) if is_safe_id(session_id) else None
    if document is None:
        raise ApiError(404, f"no session '{session_id[:128]}'")
    return session_detail(session_id, document)


@sessions.delete(
    "/v1/sessions/{session_id}",
    summary="Delete a session",
    status_code=204,
    response_class=Response,
    responses=_errors(401, 404),
)
async def delete_session(session_id: str, caller: CallerDep) -> Response:
    """Delete a session (its runs' summaries stay)."""
    deleted = await caller.sessions.delete(session_id) if is_safe_id(session_id) else False
    if not deleted:
        raise ApiError(404, f"no session '{session_id[:128]}'")
    return Response(status_code=204)


@router.get("/openapi.json", include_in_schema=False)
async def openapi(request: Request, caller: CallerDep) -> JSONResponse:
    """Return the API's OpenAPI schema."""
    return JSONResponse(request.app.openapi())


@router.get("/docs", include_in_schema=False)
async def docs(caller: CallerDep) -> HTMLResponse:
    """Serve the interactive API documentation."""
    return get_swagger_ui_html(openapi_url="/openapi.json", title="plait API")


def _check_id(checkpoint_id: str) -> None:
    """A checkpoint id no run can have (too long, control characters) is not found."""
    if not is_safe_id(checkpoint_id):
        raise CheckpointNotFound(f"no run '{checkpoint_id[:128]}'")


def create_app(
    agents: Agent | Sequence[Agent] | Mapping[str, Agent],
    *,
    store: Store | None = None,
    api_keys: Mapping[str, str] | None = None,
    max_request_bytes: int = 1_048_576,
    ui: bool = False,
    cancel_poll: float = 0.2,
    allowed_hosts: Sequence[str] | None = None,
    a2a: bool = False,
    agent_protocol: bool = True,
    webhook_secret: str | None = None,
    webhook_allow: Sequence[str] | None = None,
    cron_poll: float = 1.0,
    clock: Callable[[], datetime] | None = None,
    quotas: Mapping[str, Quota] | None = None,
    admin_keys: Sequence[str] | None = None,
    run_lease: float = DEFAULT_LEASE,
    gc_young: int | None = collector.DEFAULT_YOUNG,
) -> FastAPI:
    """Return plait's HTTP API for `agents` as a FastAPI app (serve it with uvicorn).

    Args:
        agents: An agent, a sequence of agents (named by `name`), or a mapping name -> agent.
        store: Where runs, checkpoints and sessions are kept; processes sharing one store
            serve each other's runs. Default: `SqliteStore("plait.db")` (closed at the end).
        api_keys: Bearer key -> user id: every route but `GET /healthz` then needs a key;
            without keys every request is user "local".
        max_request_bytes: Larger request bodies are refused with `413`.
        ui: Also serve the dev page at `/` (when this build has `plait.server.page`).
        cancel_poll: Seconds between two looks of a running run for cancel requests.
        allowed_hosts: The host names this server answers besides its loopback names and
            the address a request came in on (a proxy's public name); `["*"]` answers any.
            None: a server without keys answers only those (a page rebinding its name to this
            machine is refused, `403`); a server with keys answers any host.
        a2a: Also serve every agent over A2A at `/a2a/{agent}` (the `a2a` extra).
        agent_protocol: Also serve the Agent Protocol (what the `langgraph-sdk` client
            speaks, `plait.protocols.agent_protocol`), behind the same checks and keys.
        webhook_secret: Signs each webhook body (`x-plait-signature: sha256=<hex HMAC>`,
            `plait.server.webhooks`); None: bodies go unsigned.
        webhook_allow: Hosts a webhook may name though not public or not `https`.
        cron_poll: Seconds between two looks for due crons (`agent_protocol`).
        clock: What returns this moment (crons, quota windows, the ledger's times).
        quotas: User id (or "*": every user without one) -> `plait.server.Quota`, what
            each may spend and start (`plait.server.quotas`); every call is in the ledger.
        admin_keys: Keys of `api_keys` whose callers see every user's `GET /v1/usage`.
        run_lease: Seconds a worker's lease on its runs lasts (`plait.server.leases`).
        gc_young: New objects per young garbage collection while serving (`server.collector`).

    Raises:
        UsageError: A bad argument (agents, keys, limits, hosts, quotas), or no a2a-sdk.
    """
    keys = check_api_keys(api_keys)
    tenancy = check_quotas(quotas), check_admin_keys(admin_keys, keys)
    _check_limits(max_request_bytes, cancel_poll, cron_poll, run_lease, gc_young)
    rule = host_rule(allowed_hosts, keyed=keys is not None)
    timing, hooks = (cancel_poll, run_lease, gc_young), Webhooks(webhook_secret, webhook_allow)
    server = _server(_named_agents(agents), store, keys, timing, hooks, clock, tenancy)
    crons = cron_poll if agent_protocol else None
    return _equip(server, ui, a2a, max_request_bytes, rule, crons)


def _new_app(server: Server) -> FastAPI:
    """Return a FastAPI app of `server`, with its lifespan and no routes yet."""
    from plait import __version__

    app = FastAPI(
        title="plait",
        version=__version__,
        description="Run plait agents over HTTP: runs, interrupts and resumes, sessions.",
        lifespan=_lifespan(server),
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.plait = server
    return app


def _equip(
    server: Server,
    ui: bool,
    a2a: bool,
    max_request_bytes: int,
    rule: HostRule | None,
    cron_poll: float | None,
) -> FastAPI:
    """Return the app of `server` with its error handlers, routes and the door every
    request passes (the run route's shortcut in it); with the Agent Protocol's routes and
    its crons' scheduler unless `cron_poll` is None."""
    agent_protocol = cron_poll is not None
    if cron_poll is not None:
        server.background.append(Scheduler(server, cron_poll).run)
    app = _new_app(server)
    install_error_handlers(app)
    add_error_shape(app, OPENAI_PATHS, openai_error)  # errors as the openai client reads them
    logs = RunLogs() if agent_protocol else None  # the Agent Protocol's runs' events
    _include_routes(app, ui, server if a2a else None, logs)
    shortcuts = [run_shortcut] if logs is None else [run_shortcut, stream_shortcut(logs)]
    app.add_middleware(Door, rule=rule, max_bytes=max_request_bytes, shortcuts=shortcuts)
    return app


#: Held while an app builds its table of routes (see `_include_routes`).
_BUILDING = threading.Lock()


def _include_routes(app: FastAPI, ui: bool, a2a: Server | None, logs: RunLogs | None) -> None:
    """Add the API's routes to `app` (with the dev page's when `ui`, and the A2A routes of
    the agents of `a2a` when given, the Agent Protocol's, keeping their runs' events in
    `logs`, when given), and build
    FastAPI's table of them now.

    FastAPI builds the table at the first request otherwise, and the warning filters it
    sets while it makes a route's fields are process-wide: two apps in one process
    (servers in threads) making theirs at once would see each other's filters. So routes
    are made and built one app at a time, when the app is made.
    """
    nowhere = {"type": "http", "path": "/\x00", "root_path": "", "method": "GET", "headers": []}
    with _BUILDING:
        groups = (
            router,
            runs,
            sessions,
            openai_router(find_caller),
            eval_router(find_caller),
            runs_router(find_caller),
            rejoin_router(find_caller),
            turn_router(find_caller),
            memory_router(find_caller),
            usage_router(find_caller),
        )
        for routes in (*groups, approvals_router(find_caller)):
            app.include_router(routes)
        if logs is not None:
            app.include_router(agent_protocol_router(find_caller, logs))
        _mount_agui(app)
        if a2a is not None:
            _mount_a2a(app, a2a)
        if ui:
            _mount_page(app)
        for route in app.router.routes:
            route.matches(nowhere)  # a path no route matches: every route is looked at


def _check_limits(
    max_request_bytes: object, cancel_poll: float, cron_poll: float, run_lease: float, young: object
) -> None:
    if isinstance(max_request_bytes, bool) or not isinstance(max_request_bytes, int):
        raise UsageError("max_request_bytes must be an int")
    if max_request_bytes < 1 or not cancel_poll > 0 or not cron_poll > 0:
        raise UsageError("max_request_bytes, cancel_poll and cron_poll must be positive")
    if not (run_lease > 0 and math.isfinite(run_lease)):
        raise UsageError("run_lease must be a positive number of seconds")
    if young is not None and (isinstance(young, bool) or not isinstance(young, int) or young < 1):
        raise UsageError(f"gc_young must be a whole number of 1 or more, or None; got {young!r}")


def _lifespan(server: Server) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Return the app's lifespan: watch for the server stopping; at the end stop the runs
    and close the store (when the app opened it)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        young = server.gc_young
        if young is not None:
            collector.hold(young)
        watcher = asyncio.ensure_future(_stop_runs_on_exit(server))
        beside = [asyncio.ensure_future(work()) for work in server.background]
        try:
            yield
        finally:
            if young is not None:
                collector.release(young)
        for task in (watcher, *beside):
            task.cancel()
        await asyncio.gather(*beside, return_exceptions=True)
        await server.runs.shutdown(SHUTDOWN_GRACE)
        await server.webhooks.aclose()
        for close in server.closing:
            await close()
        if server.owns_store:
            await server.store.close()

    return lifespan


async def _stop_runs_on_exit(server: Server) -> None:
    """Once uvicorn is asked to stop, stop the runs: uvicorn waits for open responses
    before it shuts the app down, and a stream ends with its run (now "cancelled")."""
    while not server_exiting():  # noqa: ASYNC110 - uvicorn only sets a flag
        await asyncio.sleep(EXIT_POLL)
    await server.runs.shutdown(SHUTDOWN_GRACE)


def _server(
    agents: dict[str, Agent],
    store: Store | None,
    keys: dict[str, str] | None,
    timing: tuple[float, float, int | None],
    webhooks: Webhooks,
    clock: Callable[[], datetime] | None,
    tenancy: tuple[dict[str, Quota], frozenset[str]],
) -> Server:
    """Return what the app's routes share (`timing`: the cancel poll, the run lease and
    the young garbage collections)."""
    owns = store is None
    if store is None:
        from plait.stores.sqlite import SqliteStore

        store = SqliteStore("plait.db")
    elif not isinstance(store, Store):
        raise UsageError(f"store must be a plait Store, got {type(store).__name__}")
    poll, lease, young = timing
    runs = Runs(agents, cancel_poll=poll, leases=WorkerLease(store, lease))
    server = Server(agents, store, keys, runs, owns, webhooks=webhooks, gc_young=young)
    server.clock = clock or server.clock
    server.runs.tenants = Tenants(store, tenancy[0], server.clock)
    server.admin_keys = tenancy[1]
    return server


def _named_agents(agents: Any) -> dict[str, Agent]:
    """Return {public name: agent} for an agent, a sequence or a mapping of agents."""
    if isinstance(agents, Agent):
        pairs: list[tuple[Any, Any]] = [(agents.name, agents)]
    elif isinstance(agents, Mapping):
        pairs = list(agents.items())
    elif isinstance(agents, Sequence) and not isinstance(agents, str):
        pairs = [(a.name if isinstance(a, Agent) else None, a) for a in agents]
    else:
        raise UsageError(f"create_app takes agents, got {type(agents).__name__}")
    if not pairs:
        raise UsageError("create_app needs at least one agent")
    named: dict[str, Agent] = {}
    for name, agent in pairs:
        if not isinstance(agent, Agent):
            raise UsageError(f"create_app takes agents; {agent!r} is not one")
        if not isinstance(name, str) or not is_safe_id(name) or "/" in name:
            raise UsageError(f"agent name {name!r} must be 1 to 128 characters, no '/'")
        if name in named:
            raise UsageError(f"two agents are named '{name}'; pass a mapping to rename one")
        named[name] = agent
    return named


def _mount_agui(app: FastAPI) -> None:
    """Add `POST /agui/{agent}` (`plait.server.agui`) when `ag-ui-protocol` is installed;
    without it the route answers `501`, saying what to install."""
    if importlib.util.find_spec("ag_ui") is not None:
        app.include_router(importlib.import_module("plait.protocols.agui").router)
        return

    @app.post("/agui/{agent}", include_in_schema=False)
    async def agui_missing(agent: str) -> None:
        raise ApiError(501, 'AG-UI needs the ag-ui-protocol package: pip install "plait[agui]"')


def _mount_a2a(app: FastAPI, server: Server) -> None:
    """Add the A2A routes of every agent (`plait.protocols._a2a_server.a2a_router`); the
    app closes their services when it stops."""
    if importlib.util.find_spec("a2a") is None:
        raise UsageError('create_app(a2a=True) needs the a2a-sdk: pip install "plait[a2a]"')
    module = importlib.import_module("plait.protocols._a2a_server")
    routes, services = module.a2a_router(server.agents, keyed=server.api_keys is not None)
    app.include_router(routes)
    server.closing.extend(service.aclose for service in services)


def _mount_page(app: FastAPI) -> None:
    """Add the dev page: `plait.server.page.mount(app)`, when that module exists."""
    if importlib.util.find_spec("plait.server.page") is None:
        return
    importlib.import_module("plait.server.page").mount(app)
