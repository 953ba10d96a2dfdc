"""`MCPToolset`: the tools of an MCP server, offered to an agent (extra `plait[mcp]`).

The server is a command started on stdio, or a streamable HTTP URL. Its session
(`plait.protocols._mcp_session`) opens when a run of the agent starts, or is kept by
`async with`; its tools are called over it. What the server asks during a call (sampling,
elicitation) is answered by the run (`plait.protocols._mcp_asks`). Whatever the server
sends is bounded: the time it takes to start, the number of tools, their schemas, the size
of a result and the time a call may take.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from plait._util.quote import quote
from plait.core.agent_context import AgentContext
from plait.errors import InvalidToolArguments, ToolError, UsageError
from plait.protocols._mcp_session import MAX_TOOLS, Connection, Target, describe, errlog
from plait.protocols._mcp_stdio import stdio_transport
from plait.tools.base import Tool, ToolInfo, check_timeout

if TYPE_CHECKING:
    from mcp.types import CallToolResult
    from mcp.types import Tool as MCPTool

__all__ = ["CALL_TIMEOUT", "CONNECT_TIMEOUT", "MAX_RESULT_CHARS", "MAX_TOOLS", "MCPToolset"]

#: Seconds a server may take to start, answer the handshake and list its tools (a first
#: `npx -y <server>` downloads it: 20 s is not unusual).
CONNECT_TIMEOUT = 30.0
#: Seconds one tool call may take, unless `timeout=` says otherwise.
CALL_TIMEOUT = 60.0
#: The most characters of a tool's result the model is shown; the rest is cut.
MAX_RESULT_CHARS = 1_000_000

ToolFilter = Sequence[str] | Callable[[str], bool]
Protocol = Literal["auto", "legacy"]
_PROTOCOLS = ("auto", "legacy")


def require_mcp() -> None:
    """Raise a `UsageError` saying how to install the MCP SDK, if it is missing."""
    if importlib.util.find_spec("mcp") is None:
        raise UsageError("MCP needs the official MCP SDK: pip install 'plait[mcp]'")


class MCPToolset:
    """The tools of an MCP server, for `ChatModelAgent(tools=[MCPToolset(...)])`.

    Give `command` (with `args`, and `env` added to a minimal environment: PATH, HOME…) to
    start the server on stdio, or `url` (with `headers`) for streamable HTTP — exactly one.
    The session opens when a run of the agent starts and closes when it ends; inside
    `async with toolset:` one session serves every run (each run checks that the server
    answers first, and starts it again if it is gone).

    Options:
        tool_filter: the names of the server's tools to offer, or a predicate on the name.
        prefix: offer each tool as `{prefix}_{name}` (the filter sees the server's name).
        timeout: seconds each call may take (None: the agent's `tool_timeout`); past it the
            call is a `ToolTimeout` failure.
        connect_timeout: seconds the server may take to start and list its tools (30).
        protocol: "auto" (2026-07-28 when the server speaks it, else the 2025-11-25
            handshake) or "legacy" (the handshake only).
        sampling: answer the server's sampling requests with the agent's model (True).
        elicitation: "interrupt" to pause the run when the server asks for input, the
            resume value being the content asked for (None declines); None (the default)
            tells the server this client does not take elicitation.

    A server that cannot start or list its tools ends the run with a `ToolError` naming
    the command or URL (and `connect_timeout`, when it was too slow), as do more than
    `MAX_TOOLS` tools, or a tool whose input schema is not a JSON object schema. A stdio
    server given up on, or no longer needed, is stopped with its whole process group. A
    call's error (`isError`), a server that exits or breaks the connection during a call, a
    call past its timeout: each fails that call, which the model is told (or the run ends,
    with `tool_errors="raise"`). A result longer than `MAX_RESULT_CHARS` is cut, with a
    note saying so.
    """

    def __init__(
        self,
        command: str | None = None,
        *,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        tool_filter: ToolFilter | None = None,
        prefix: str | None = None,
        timeout: float | None = CALL_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
        protocol: Protocol = "auto",
        sampling: bool = True,
        elicitation: Literal["interrupt"] | None = None,
    ) -> None:
        _check_where(command, args, env, url, headers)
        if prefix is not None and (not isinstance(prefix, str) or not prefix):
            raise UsageError(f"MCPToolset: prefix must be a non-empty string, not {prefix!r}")
        _check_answers(protocol, sampling, elicitation)
        self._filter = _check_filter(tool_filter)
        require_mcp()
        self.command = command
        self.args = tuple(args)
        self.env = dict(env or {})
        self.url = url
        self.headers = dict(headers or {})
        self.prefix = prefix
        self.timeout = check_timeout(timeout, "MCPToolset: timeout")
        connect = check_timeout(connect_timeout, "MCPToolset: connect_timeout")
        self.connect_timeout = CONNECT_TIMEOUT if connect is None else connect
        self.protocol = protocol
        self.sampling = sampling
        self.elicitation = elicitation
        self._shared: Connection | None = None
        self._holders = 0  # how many `async with` blocks are open
        self._lock: asyncio.Lock | None = None

    @property
    def target(self) -> str:
        """The server, as messages name it: its command line or URL."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args])

    def __repr__(self) -> str:
        return f"MCPToolset({quote(self.target, 80)})"

    @contextlib.asynccontextmanager
    async def open_tools(self, ctx: AgentContext) -> AsyncIterator[Sequence[Tool]]:
        """Open the server's session for one run of an agent (or use the one `async with`
        keeps); its value is the tools offered."""
        if self._holders:
            yield (await self._shared_connection()).tools
            return
        connection = await Connection.open(self._session_target())
        try:
            yield connection.tools
        finally:
            await connection.close()

    async def __aenter__(self) -> MCPToolset:
        """Start the server and keep its session open until the block ends."""
        if self._holders == 0:
            self._lock = asyncio.Lock()  # of this event loop
        self._holders += 1
        try:
            await self._shared_connection()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the session when the last `async with` block ends."""
        self._holders -= 1
        if self._holders == 0 and self._shared is not None:
            shared, self._shared = self._shared, None
            await shared.close()

    async def _shared_connection(self) -> Connection:
        """Return the session `async with` keeps, starting it (again) if it is not alive."""
        lock = self._lock = self._lock or asyncio.Lock()
        async with lock:
            shared = self._shared
            if shared is None or not await shared.answers():
                self._shared = None
                if shared is not None:
                    await shared.close()
                shared = self._shared = await Connection.open(self._session_target())
            return shared

    def _session_target(self) -> Target:
        """What a session with the server needs to know of this toolset."""
        return Target(
            name=self.target,
            connect_timeout=self.connect_timeout,
            transport=self._transport,
            protocol=self.protocol,
            sampling=self.sampling,
            elicitation=self.elicitation == "interrupt",
            offer=self._offered,
        )

    def _offered(self, listed: Sequence[MCPTool], connection: Connection) -> list[Tool]:
        """Return the tools to offer from the server's listing, checked."""
        tools: list[Tool] = []
        for remote in listed:
            if not self._filter(remote.name):
                continue
            name = remote.name if self.prefix is None else f"{self.prefix}_{remote.name}"
            info = ToolInfo(
                name=name, description=remote.description or "", parameters=remote.input_schema
            )
            tools.append(_RemoteTool(info, remote.name, connection, self.timeout))
        return tools

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        """The transport to the server: a stdio process group or a streamable HTTP client."""
        if self.url is not None:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            @contextlib.asynccontextmanager
            async def http(url: str) -> AsyncIterator[Any]:
                async with (
                    create_mcp_http_client(headers=self.headers or None) as client,
                    streamable_http_client(url, http_client=client) as streams,
                ):
                    yield streams

            return http(self.url)
        assert self.command is not None
        return stdio_transport(self.command, self.args, self.env, errlog())


class _RemoteTool:
    """One tool of an MCP server, called over its session."""

    def __init__(
        self, info: ToolInfo, remote: str, connection: Connection, timeout: float | None
    ) -> None:
        self._info = info
        self._remote = remote
        self._connection = connection
        self.timeout = timeout

    def info(self) -> ToolInfo:
        """Describe the tool as the server listed it."""
        return self._info

    async def call(self, arguments_json: str, ctx: AgentContext) -> str:
        """Call the tool on the server, answering what it asks meanwhile (`_mcp_asks`); its
        error, or a broken session, is a `ToolError`."""
        name = self._info.name
        arguments = _arguments(arguments_json, name)
        connection = self._connection
        client = connection.client
        if client is None or connection.failure is not None:
            why = connection.failure or "it is not running"
            target = quote(connection.target.name, 200)
            raise ToolError(f"MCP server {target} cannot be called: {why}", tool_name=name)
        async with connection.calling(ctx, name, arguments) as call:
            try:
                result = await call.run(client.call_tool(self._remote, arguments))
            except Exception as exc:
                raise _call_error(exc, connection, name) from exc
        text = _text(result)
        if result.is_error:
            raise ToolError(text or "the MCP tool reported an error", tool_name=name)
        return text


def _call_error(exc: Exception, connection: Connection, name: str) -> ToolError:
    """The `ToolError` a failed call is; a connection that closed or failed is marked
    broken (the run's later calls are told so)."""
    from mcp import InputRequiredRoundsExceededError, MCPError

    target = quote(connection.target.name, 200)
    if isinstance(exc, MCPError):
        if _closed(exc):
            connection.broke(f"the connection closed during a call of {quote(name)}")
            return ToolError(
                f"MCP server {target} closed the connection (did it exit?) during the call",
                tool_name=name,
            )
        return ToolError(f"MCP server {target} answered: {exc.message}", tool_name=name)
    if isinstance(exc, InputRequiredRoundsExceededError):
        return ToolError(f"MCP server {target} kept asking for input: {exc}", tool_name=name)
    connection.broke(f"a call failed with {type(exc).__name__}")
    return ToolError(f"MCP server {target} failed during the call: {describe(exc)}", tool_name=name)


def _check_where(command: object, args: object, env: object, url: object, headers: object) -> None:
    """Refuse a server given by neither or both of a command and a URL, or badly."""
    if (command is None) == (url is None):
        raise UsageError("MCPToolset takes exactly one of command= (stdio) and url= (HTTP)")
    if command is not None and (not isinstance(command, str) or not command):
        raise UsageError(f"MCPToolset: command must be a non-empty string, not {command!r}")
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://"))
    ):
        raise UsageError(f"MCPToolset: url must be an http:// or https:// URL, not {url!r}")
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):  # type: ignore[attr-defined]
        raise UsageError("MCPToolset: args must be a list of strings")
    if command is None and (args or env):
        raise UsageError("MCPToolset: args= and env= go with command=, not url=")
    if url is None and headers:
        raise UsageError("MCPToolset: headers= go with url=, not command=")


def _check_answers(protocol: object, sampling: object, elicitation: object) -> None:
    """Refuse a protocol, sampling or elicitation option plait does not know."""
    if protocol not in _PROTOCOLS:
        raise UsageError(f"MCPToolset: protocol is 'auto' or 'legacy', not {protocol!r}")
    if not isinstance(sampling, bool):
        raise UsageError(f"MCPToolset: sampling is True or False, not {sampling!r}")
    if elicitation not in (None, "interrupt"):
        raise UsageError(f"MCPToolset: elicitation is 'interrupt' or None, not {elicitation!r}")


def _check_filter(tool_filter: ToolFilter | None) -> Callable[[str], bool]:
    """Return `tool_filter` as a predicate on names (None: every tool)."""
    if tool_filter is None:
        return lambda name: True
    if isinstance(tool_filter, str | bytes):
        raise UsageError("MCPToolset: tool_filter is a list of names or a predicate, not a string")
    if callable(tool_filter):
        return tool_filter
    if isinstance(tool_filter, Sequence | set | frozenset) and all(
        isinstance(n, str) for n in tool_filter
    ):
        names = frozenset(tool_filter)
        return names.__contains__
    raise UsageError(
        f"MCPToolset: tool_filter is a list of names or a predicate, not {tool_filter!r}"
    )


def _arguments(arguments_json: str, name: str) -> dict[str, Any]:
    """Return the model's arguments as a JSON object."""
    try:
        arguments = json.loads(arguments_json) if arguments_json.strip() else {}
    except ValueError as exc:
        raise InvalidToolArguments(
            f"the arguments of tool {quote(name)} are not valid JSON: {exc}", tool_name=name
        ) from exc
    if not isinstance(arguments, dict):
        raise InvalidToolArguments(
            f"the arguments of tool {quote(name)} must be a JSON object", tool_name=name
        )
    return arguments


def _text(result: CallToolResult) -> str:
    """Return a tool's result as the text the model is shown (cut past the limit)."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)  # type: ignore[union-attr]
        elif kind == "resource":
            resource = block.resource  # type: ignore[union-attr]
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")  # type: ignore[union-attr]
        else:
            mime = getattr(block, "mime_type", "")
            parts.append(f"[{kind} {mime}]".replace(" ]", "]"))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        cut = len(text) - MAX_RESULT_CHARS
        text = f"{text[:MAX_RESULT_CHARS]}\n[the result was cut here: {cut} more characters]"
    return text


def _closed(exc: Any) -> bool:
    """Whether an `MCPError` says the connection closed."""
    from mcp.types import CONNECTION_CLOSED

    return bool(exc.code == CONNECTION_CLOSED)
