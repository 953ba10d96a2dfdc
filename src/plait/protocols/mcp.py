"""Agents as MCP tools: `server(agents)` is an MCP server (extra `plait[mcp]`) with one tool
per agent; `plait mcp TARGET` serves it on stdio, or over streamable HTTP (`http_app`). It
names itself `plait`, with plait's version.

Each tool takes `input`, a string, runs the agent on it (a new run each call) and answers
with the run's final output as text (JSON when the output is not a string). A run that
pauses answers with a text saying what it asks and the checkpoint id to resume it with
(`plait resume CHECKPOINT_ID TARGET`, on the same store); a run that fails is the tool's
error (`isError`), naming the error's type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plait.core.agent import Agent
from plait.errors import UsageError
from plait.events import RunResult
from plait.protocols.mcp_client import require_mcp
from plait.run.runner import Runner
from plait.stores.base import Store

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp

__all__ = ["http_app", "server"]

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def server(
    agents: Agent | Sequence[Agent] | Mapping[str, Agent],
    *,
    name: str = "plait",
    store: Store | None = None,
) -> MCPServer[Any]:
    """Return an MCP server (the SDK's `MCPServer`) with one tool per agent.

    `agents` is an agent, a sequence of agents, or a mapping tool name -> agent. A tool's
    name is the agent's (or the mapping's key: letters, digits, `_`, `-`, `.`), its
    description the agent's. `store` keeps the checkpoints of paused runs (default: in
    memory). Run it with `.run()` (stdio) or `await .run_stdio_async()`.

    Raises:
        UsageError: No agents, something that is not one, a name a tool cannot have, two
            agents of one name, or the MCP SDK is not installed.
    """
    require_mcp()
    from mcp.server.mcpserver import MCPServer

    from plait import __version__

    named = _named(agents)
    mcp = MCPServer(name, version=__version__, log_level="WARNING")
    for tool_name, agent in named.items():
        runner = Runner(agent, store=store)
        description = agent.description or f"Ask the agent '{agent.name}'."
        mcp.add_tool(
            _tool(runner),
            name=tool_name,
            description=f"{description} `input`: the request, in words.",
            structured_output=False,
        )
    return mcp


def http_app(mcp: MCPServer[Any], *, allowed_hosts: Sequence[str] | None = None) -> ASGIApp:
    """Return the ASGI app serving `mcp` over streamable HTTP at `/mcp`, behind the Host
    guard of plait's server (`plait.server.hosts`): it answers only requests addressed to
    a loopback name or the address it listens on, and names in `allowed_hosts` (`["*"]`:
    any). Serve it with uvicorn (`plait mcp TARGET --http PORT` does).

    Raises:
        UsageError: `allowed_hosts` is not a list of host names, or the server extra
            (`plait[server]`, whose Host guard this uses) is not installed.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    try:
        from plait.server.door import Door
        from plait.server.hosts import host_rule
    except UsageError as exc:
        raise UsageError(f"MCP over HTTP uses plait's server: {exc}") from None
    rule = host_rule(allowed_hosts, keyed=False)
    app = mcp.streamable_http_app(  # the SDK's own Host check gives way to plait's
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False)
    )
    return app if rule is None else Door(app, rule=rule)


def _named(agents: object) -> dict[str, Agent]:
    """Return {tool name: agent} for an agent, a sequence or a mapping of agents."""
    if isinstance(agents, Agent):
        pairs: list[tuple[object, object]] = [(agents.name, agents)]
    elif isinstance(agents, Mapping):
        pairs = list(agents.items())
    elif isinstance(agents, Sequence) and not isinstance(agents, str | bytes):
        pairs = [(getattr(a, "name", None), a) for a in agents]
    else:
        raise UsageError(f"the MCP server takes agents, got {type(agents).__name__}")
    if not pairs:
        raise UsageError("the MCP server needs at least one agent")
    named: dict[str, Agent] = {}
    for key, agent in pairs:
        if not isinstance(agent, Agent):
            raise UsageError(f"the MCP server takes agents; {agent!r} is not one")
        if not isinstance(key, str) or not _NAME.fullmatch(key):
            raise UsageError(
                f"{key!r} cannot name an MCP tool (1 to 128 letters, digits, '_', '-', '.'); "
                "pass a mapping to name the agent's tool"
            )
        if key in named:
            raise UsageError(f"two agents are named '{key}'; pass a mapping to rename one")
        named[key] = agent
    return named


def _tool(runner: Runner) -> Callable[[str], Awaitable[str]]:
    """The tool function of one agent: a run on `input`, answered as text."""

    async def run_agent(input: str) -> str:
        result = await runner.query(input).collect()
        return answer(result)

    return run_agent


def answer(result: RunResult) -> str:
    """Return the text a tool answers with for a run's result.

    Raises:
        mcp.server.mcpserver.exceptions.ToolError: The run failed (the tool's error).
    """
    from mcp.server.mcpserver.exceptions import ToolError

    if result.error is not None:
        raise ToolError(f"the run failed with {type(result.error).__name__}: {result.error}")
    if result.interrupts:
        asks = json.dumps([i.info for i in result.interrupts], ensure_ascii=False, default=str)
        return (
            f"The run paused: it asks {asks}. Resume it with checkpoint id {result.checkpoint_id}."
        )
    output = result.final_output
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    return json.dumps(output, ensure_ascii=False, default=str)
