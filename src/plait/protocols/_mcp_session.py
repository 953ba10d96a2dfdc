"""One session of `MCPToolset` with its server (`Connection`), kept by a task of its own.

The task enters and leaves the SDK's context managers (their cancel scopes must be left in
the task that entered them); tool calls go over the session from any task. The SDK's
`Client` negotiates the protocol: with `protocol="auto"` it asks the server for 2026-07-28
(`server/discover`) and falls back to the 2025-11-25 handshake when the server does not
know it; `"legacy"` goes straight to the handshake. Whatever the server sends is bounded:
the time it takes to start, the number of tools and their schemas.

Giving up on a server that does not start in time stops it before the run gets its error
(for a stdio server, its whole process group: `plait.protocols._mcp_stdio`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from plait._util.quote import quote
from plait.core.agent_context import AgentContext
from plait.errors import ToolError
from plait.protocols._mcp_asks import CURRENT_CALL, Call, ask_callbacks
from plait.tools.base import Tool

if TYPE_CHECKING:
    from mcp import Client, ClientSession
    from mcp.types import Tool as MCPTool

__all__ = ["MAX_TOOLS", "Connection", "Target", "describe"]

#: The most tools a server may list.
MAX_TOOLS = 1000
_STOP_TIMEOUT = 10.0  # stopping a stdio server is bounded below this (`_mcp_stdio.GRACE`)
_MAX_PAGES = 100


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """What a session needs of its toolset: the server as messages name it, how to reach
    it, what the client answers, and which of the listed tools to offer."""

    name: str
    connect_timeout: float
    transport: Callable[[], AbstractAsyncContextManager[Any]]
    protocol: str
    sampling: bool
    elicitation: bool
    offer: Callable[[list[MCPTool], Connection], list[Tool]]

    def error(self, problem: str, tool_name: str | None = None) -> ToolError:
        """A failure of the server as a whole: a `ToolError` naming it."""
        return ToolError(
            f"MCP server {quote(self.name, 200)} {problem}", tool_name=tool_name or self.name
        )


class Connection:
    """One session with an MCP server, kept by a task that owns the SDK's context managers
    (they are entered and left in that task)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.client: Client | None = None
        self.tools: list[Tool] = []
        self.failure: str | None = None  # why the session ended, if it broke
        self.calls: list[Call] = []  # the tool calls in flight
        self._turn: asyncio.Lock | None = None  # one call at a time, when the server may ask
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self._scope: anyio.CancelScope | None = None
        self._task: asyncio.Task[None] | None = None
        self._tap: _Tap | None = None

    @classmethod
    async def open(cls, target: Target) -> Connection:
        """Start the server, shake hands and list its tools, within the connect timeout; a
        server given up on is stopped before the error is raised.

        Raises:
            ToolError: The server did not start, answer or list valid tools in time.
        """
        connection = cls(target)
        connection._task = asyncio.get_running_loop().create_task(connection._keep())
        limit = target.connect_timeout
        try:
            async with asyncio.timeout(limit):
                await connection._ready.wait()
        except TimeoutError:
            await connection.close()
            raise target.error(
                f"did not start and list its tools within {limit:g} s; a server slow to "
                "start (npx fetching it on first use, say) needs a larger "
                "MCPToolset(connect_timeout=...)"
            ) from None
        except BaseException:
            await connection.close()
            raise
        error = connection._error
        if error is not None:
            await connection.close()
            if isinstance(error, ToolError):
                raise error
            raise target.error(f"could not start or list its tools: {describe(error)}") from error
        return connection

    @property
    def modern(self) -> bool:
        """Whether the session speaks 2026-07-28 or later (else the handshake's versions)."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        client = self.client
        return client is not None and client.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def answers(self) -> bool:
        """Whether the session is open, has not broken, and the server answers within the
        connect timeout (a ping; with 2026-07-28, which has none, `server/discover`); if
        not, it is marked broken."""
        client = self.client
        if client is None or self.failure is not None:
            return False
        try:
            async with asyncio.timeout(self.target.connect_timeout):
                if self.modern:
                    await client.session.send_discover(client.protocol_version)
                else:
                    await client.session.send_ping()
        except Exception:
            self.broke("the server did not answer")
            return False
        return True

    @contextlib.asynccontextmanager
    async def calling(
        self, ctx: AgentContext, tool: str, arguments: dict[str, Any]
    ) -> AsyncIterator[Call]:
        """Keep a tool call in flight for its duration, so the server's questions reach it;
        with the handshake's protocol a server that may elicit gets one call at a time (its
        questions name no call)."""
        call = Call(
            ctx,
            server=self.target.name,
            tool=tool,
            arguments=arguments,
            elicitation=self.target.elicitation,
        )
        turn = None
        if self.target.elicitation and not self.modern:
            turn = self._turn = self._turn or asyncio.Lock()
            await turn.acquire()
        self.calls.append(call)
        token = CURRENT_CALL.set(call)
        try:
            yield call
        finally:
            CURRENT_CALL.reset(token)
            self.calls.remove(call)
            if turn is not None:
                turn.release()

    def _find(self, kind: str) -> Call | None:
        """The call a 2025-11-25 request belongs to: the one in flight (for sampling, any
        of several made by one agent's model)."""
        calls = self.calls
        if len(calls) == 1:
            return calls[0]
        if kind == "sampling" and calls and all(c.model is calls[0].model for c in calls):
            return calls[0]
        return None

    async def _keep(self) -> None:
        """Open the session, list the tools, and hold the session until `close`."""
        from mcp import Client
        from mcp.types import Implementation

        from plait import __version__

        target = self.target
        sampling, elicitation = ask_callbacks(self._find)
        try:
            with anyio.CancelScope() as self._scope:
                async with Client(
                    self._tapped(),
                    mode=target.protocol,
                    sampling_callback=sampling if target.sampling else None,
                    elicitation_callback=elicitation if target.elicitation else None,
                    client_info=Implementation(name="plait", version=__version__),
                    cache=None,
                ) as client:
                    assert self._tap is not None
                    listed = await _list_tools(client.session, target, self._tap)
                    self.tools = target.offer(listed, self)
                    self.client = client
                    self._ready.set()
                    await self._stop.wait()
        except Exception as exc:
            self._error = _unwrap(exc)
        finally:
            self.client = None
            self.failure = self.failure or "the session ended"
            self._ready.set()

    @contextlib.asynccontextmanager
    async def _tapped(self) -> AsyncIterator[tuple[Any, Any]]:
        """The toolset's transport, its read stream tapped (`_Tap`)."""
        async with self.target.transport() as (read, write):
            self._tap = _Tap(read)
            yield self._tap, write

    def broke(self, why: str) -> None:
        """Mark the session broken (the server died or the connection failed)."""
        self.failure = why

    async def close(self) -> None:
        """End the session and stop the server (cancelling the task if it hangs)."""
        task = self._task
        if task is None or task.done():
            return
        self._stop.set()
        if not self._ready.is_set():  # still connecting: nothing to wind down gently
            if self._scope is not None:
                self._scope.cancel()  # the SDK's shielded shutdown still runs
            else:
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
                _winding_down.add(task)
                task.add_done_callback(_winding_down.discard)
                raise


_winding_down: set[asyncio.Task[None]] = set()  # connections closing after their caller left


async def _list_tools(session: ClientSession, target: Target, tap: _Tap) -> list[MCPTool]:
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
            raise target.error(f"lists a tool that is not valid MCP: {_invalid(exc, tap)}") from exc
        tools.extend(page.tools)
        if len(tools) > MAX_TOOLS:
            raise target.error(f"lists more than {MAX_TOOLS} tools")
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise target.error(f"lists its tools over more than {_MAX_PAGES} pages")


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


def _unwrap(exc: BaseException) -> BaseException:
    """Return the error inside exception groups that hold one error (the SDK's task groups
    wrap what they raise)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """Name an error briefly, looking inside exception groups that hold one error."""
    exc = _unwrap(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_devnull: list[Any] = []


def errlog() -> Any:
    """Where a stdio server's stderr goes: ours when it is a real file, else nowhere."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        if not _devnull:
            _devnull.append(open(os.devnull, "w"))  # noqa: SIM115 - kept for the process
        return _devnull[0]
    return sys.stderr
