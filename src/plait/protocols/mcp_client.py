"""`MCPToolset`: the tools of an MCP server, offered to an agent (extra `plait[mcp]`).

The server is a command started on stdio, or a streamable HTTP URL. Its session is kept by
a task of its own, which enters and leaves the SDK's context managers (their cancel scopes
must be left in the task that entered them); tool calls go over that session from any task.
Whatever the server sends is bounded: the number of tools, their schemas, the size of a
result and the time a call may take.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any

from plait._util.quote import quote
from plait.core.agent_context import AgentContext
from plait.errors import InvalidToolArguments, ToolError, UsageError
from plait.tools.base import Tool, ToolInfo, check_timeout

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult
    from mcp.types import Tool as MCPTool

__all__ = ["MCPToolset"]

#: Seconds a server may take to start, answer the handshake and list its tools.
CONNECT_TIMEOUT = 10.0
#: Seconds one tool call may take, unless `timeout=` says otherwise.
CALL_TIMEOUT = 60.0
#: The most tools a server may list.
MAX_TOOLS = 1000
#: The most characters of a tool's result the model is shown; the rest is cut.
MAX_RESULT_CHARS = 1_000_000
_STOP_TIMEOUT = 10.0  # the SDK's own shutdown of a stdio server is bounded below this
_MAX_PAGES = 100

ToolFilter = Sequence[str] | Callable[[str], bool]


def require_mcp() -> None:
    """Raise a `UsageError` saying how to install the MCP SDK, if it is missing."""
    if importlib.util.find_spec("mcp") is None:
        raise UsageError("MCP needs the official MCP SDK: pip install 'plait[mcp]'")


class MCPToolset:
    """The tools of an MCP server, for `ChatModelAgent(tools=[MCPToolset(...)])`.

    Give `command` (with `args`, and `env` added to a minimal environment: PATH, HOME…) to
    start the server on stdio, or `url` (with `headers`) for streamable HTTP — exactly one.
    The session opens when a run of the agent starts and closes when it ends; inside
    `async with toolset:` one session serves every run (each run pings it first, and starts
    the server again if it is gone).

    Options:
        tool_filter: the names of the server's tools to offer, or a predicate on the name.
        prefix: offer each tool as `{prefix}_{name}` (the filter sees the server's name).
        timeout: seconds each call may take (None: the agent's `tool_timeout`); past it the
            call is a `ToolTimeout` failure.
        connect_timeout: seconds the server may take to start and list its tools.

    A server that cannot start or list its tools ends the run with a `ToolError` naming
    the command or URL, as do more than `MAX_TOOLS` tools, or a tool whose input schema is
    not a JSON object schema. A call's error (`isError`), a server that exits or breaks the
    connection during a call, a call past its timeout: each fails that call, which the model
    is told (or the run ends, with `tool_errors="raise"`). A result longer than
    `MAX_RESULT_CHARS` is cut, with a note saying so.
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
    ) -> None:
        if (command is None) == (url is None):
            raise UsageError("MCPToolset takes exactly one of command= (stdio) and url= (HTTP)")
        if command is not None and (not isinstance(command, str) or not command):
            raise UsageError(f"MCPToolset: command must be a non-empty string, not {command!r}")
        if url is not None and (
            not isinstance(url, str) or not url.startswith(("http://", "https://"))
        ):
            raise UsageError(f"MCPToolset: url must be an http:// or https:// URL, not {url!r}")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise UsageError("MCPToolset: args must be a list of strings")
        if command is None and (args or env):
            raise UsageError("MCPToolset: args= and env= go with command=, not url=")
        if url is None and headers:
            raise UsageError("MCPToolset: headers= go with url=, not command=")
        if prefix is not None and (not isinstance(prefix, str) or not prefix):
            raise UsageError(f"MCPToolset: prefix must be a non-empty string, not {prefix!r}")
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
        self._shared: _Connection | None = None
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
        connection = await _Connection.open(self)
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

    async def _shared_connection(self) -> _Connection:
        """Return the session `async with` keeps, starting it (again) if it is not alive."""
        lock = self._lock = self._lock or asyncio.Lock()
        async with lock:
            shared = self._shared
            if shared is None or not await shared.answers():
                self._shared = None
                if shared is not None:
                    await shared.close()
                shared = self._shared = await _Connection.open(self)
            return shared

    def _offered(self, listed: Sequence[MCPTool], connection: _Connection) -> list[Tool]:
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

    def _error(self, problem: str, tool_name: str | None = None) -> ToolError:
        """A failure of the server as a whole: a `ToolError` naming it."""
        return ToolError(
            f"MCP server {quote(self.target, 200)} {problem}", tool_name=tool_name or self.target
        )

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        """The SDK's transport to the server: a stdio process or a streamable HTTP client."""
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
        from mcp import StdioServerParameters, stdio_client

        assert self.command is not None
        params = StdioServerParameters(command=self.command, args=list(self.args), env=self.env)
        return stdio_client(params, errlog=_errlog())


class _Connection:
    """One session with an MCP server, kept by a task that owns the SDK's context managers
    (they are entered and left in that task)."""

    def __init__(self, toolset: MCPToolset) -> None:
        self.toolset = toolset
        self.session: ClientSession | None = None
        self.tools: list[Tool] = []
        self.failure: str | None = None  # why the session ended, if it broke
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, toolset: MCPToolset) -> _Connection:
        """Start the server, shake hands and list its tools, within the connect timeout.

        Raises:
            ToolError: The server did not start, answer or list valid tools in time.
        """
        connection = cls(toolset)
        connection._task = asyncio.get_running_loop().create_task(connection._keep())
        limit = toolset.connect_timeout
        try:
            async with asyncio.timeout(limit):
                await connection._ready.wait()
        except TimeoutError:
            connection.abandon()  # its shutdown finishes after the run has its error
            raise toolset._error(f"did not start and list its tools within {limit:g} s") from None
        except BaseException:
            await connection.close()
            raise
        error = connection._error
        if error is not None:
            await connection.close()
            if isinstance(error, ToolError):
                raise error
            raise toolset._error(
                f"could not start or list its tools: {_describe(error)}"
            ) from error
        return connection

    async def answers(self) -> bool:
        """Whether the session is open, has not broken, and the server answers a ping
        within the connect timeout (else it is marked broken)."""
        session = self.session
        if session is None or self.failure is not None:
            return False
        try:
            async with asyncio.timeout(self.toolset.connect_timeout):
                await session.send_ping()
        except Exception:
            self.broke("the server did not answer a ping")
            return False
        return True

    async def _keep(self) -> None:
        """Open the session, list the tools, and hold the session until `close`."""
        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self.toolset._transport())
                tap = _Tap(read)
                session = await stack.enter_async_context(ClientSession(tap, write))
                await session.initialize()
                listed = await _list_tools(session, self.toolset, tap)
                self.tools = self.toolset._offered(listed, self)
                self.session = session
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:
            self._error = _unwrap(exc)
        finally:
            self.session = None
            self.failure = self.failure or "the session ended"
            self._ready.set()

    def broke(self, why: str) -> None:
        """Mark the session broken (the server died or the connection failed)."""
        self.failure = why

    def abandon(self) -> None:
        """Stop connecting and let the task wind down by itself (the SDK bounds how long
        stopping a server takes); the task is kept until it is done."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            _winding_down.add(task)
            task.add_done_callback(_winding_down.discard)

    async def close(self) -> None:
        """End the session and stop the server (cancelling the task if it hangs)."""
        task = self._task
        if task is None or task.done():
            return
        self._stop.set()
        if not self._ready.is_set():  # still connecting: nothing to wind down gently
            task.cancel()
        try:
            async with asyncio.timeout(_STOP_TIMEOUT):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except asyncio.CancelledError:
            if not task.done():  # the caller was cancelled: let the task wind down alone
                raise


_winding_down: set[asyncio.Task[None]] = set()  # abandoned connections, until they end


class _RemoteTool:
    """One tool of an MCP server, called over its session."""

    def __init__(
        self, info: ToolInfo, remote: str, connection: _Connection, timeout: float | None
    ) -> None:
        self._info = info
        self._remote = remote
        self._connection = connection
        self.timeout = timeout

    def info(self) -> ToolInfo:
        """Describe the tool as the server listed it."""
        return self._info

    async def call(self, arguments_json: str, ctx: AgentContext) -> str:
        """Call the tool on the server; its error, or a broken session, is a `ToolError`."""
        from mcp import MCPError

        name = self._info.name
        arguments = _arguments(arguments_json, name)
        connection = self._connection
        session = connection.session
        target = quote(connection.toolset.target, 200)
        if session is None or connection.failure is not None:
            why = connection.failure or "it is not running"
            raise ToolError(f"MCP server {target} cannot be called: {why}", tool_name=name)
        try:
            result = await session.call_tool(self._remote, arguments)
        except MCPError as exc:
            if _closed(exc):
                connection.broke(f"the connection closed during a call of {quote(name)}")
                raise ToolError(
                    f"MCP server {target} closed the connection (did it exit?) during the call",
                    tool_name=name,
                ) from exc
            raise ToolError(f"MCP server {target} answered: {exc.message}", tool_name=name) from exc
        except Exception as exc:
            connection.broke(f"a call failed with {type(exc).__name__}")
            raise ToolError(
                f"MCP server {target} failed during the call: {_describe(exc)}", tool_name=name
            ) from exc
        text = _text(result)
        if result.is_error:
            raise ToolError(text or "the MCP tool reported an error", tool_name=name)
        return text


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


async def _list_tools(session: ClientSession, toolset: MCPToolset, tap: _Tap) -> list[MCPTool]:
    """List every tool of the server (all pages), at most `MAX_TOOLS`."""
    from mcp.types import PaginatedRequestParams
    from pydantic import ValidationError

    tools: list[MCPTool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
        try:
            page = await session.list_tools(params=params)
        except ValidationError as exc:
            raise toolset._error(
                f"lists a tool that is not valid MCP: {_invalid(exc, tap)}"
            ) from exc
        tools.extend(page.tools)
        if len(tools) > MAX_TOOLS:
            raise toolset._error(f"lists more than {MAX_TOOLS} tools")
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise toolset._error(f"lists its tools over more than {_MAX_PAGES} pages")


def _invalid(exc: Any, tap: _Tap) -> str:
    """Say where a listing fails the protocol: the tool and the field of the first error
    (such as an input schema that is not a JSON object schema)."""
    first = exc.errors()[0]
    loc = list(first["loc"])
    where = ".".join(str(p) for p in loc)
    if len(loc) > 2 and loc[0] == "tools" and isinstance(loc[1], int):
        index = loc[1]
        names = tap.tool_names
        name = names[index] if index < len(names) else None
        tool = quote(name) if isinstance(name, str) else f"#{index + 1}"
        where = f"tool {tool}: {'.'.join(str(p) for p in loc[2:])}"
    return f"{where}: {first['msg']}"


class _Tap:
    """The transport's read stream, remembering the tool names of the last listing seen
    (the SDK refuses a listing that breaks the protocol without naming the tool)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.tool_names: list[object] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def __aenter__(self) -> _Tap:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._stream.__aexit__(*exc)

    def __aiter__(self) -> _Tap:
        return self

    async def __anext__(self) -> Any:
        return self._look(await self._stream.__anext__())

    async def receive(self) -> Any:
        return self._look(await self._stream.receive())

    def _look(self, item: Any) -> Any:
        result = getattr(getattr(item, "message", None), "result", None)
        if isinstance(result, dict) and isinstance(result.get("tools"), list):
            self.tool_names = [
                t.get("name") if isinstance(t, dict) else None for t in result["tools"]
            ]
        return item


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


def _unwrap(exc: BaseException) -> BaseException:
    """Return the error inside exception groups that hold one error (the SDK's task groups
    wrap what they raise)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    """Name an error briefly, looking inside exception groups that hold one error."""
    exc = _unwrap(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_devnull: list[Any] = []


def _errlog() -> Any:
    """Where a stdio server's stderr goes: ours when it is a real file, else nowhere."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        if not _devnull:
            _devnull.append(open(os.devnull, "w"))  # noqa: SIM115 - kept for the process
        return _devnull[0]
    return sys.stderr
