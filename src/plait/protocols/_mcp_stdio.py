"""The stdio transport of `MCPToolset`: a server process in a process group of its own, and
how it is stopped.

A server's command often starts other processes (`npx` runs npm, which runs the server's
node; a shell script runs its program). The server is started as the leader of a new
process group, and stopping it ends the whole group, whether the leader has exited by
then or not: its stdin is closed first (how MCP asks a stdio server to exit), and after
`GRACE` seconds whatever of the group is left gets SIGTERM, then after `GRACE` more
SIGKILL. A stop that is itself cut short (the event loop ends) kills the group at once.
Windows has no process groups: there the SDK's own stdio transport is used (a Job Object
ends the tree).

Messages cross as the SDK's stdio transport carries them: one JSON-RPC message per line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import anyio

if TYPE_CHECKING:
    from anyio.abc import Process
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["GRACE", "stdio_transport"]

#: Seconds a server has to exit after its stdin closes, and after SIGTERM.
GRACE = 2.0
_POLL = 0.01  # how often a stop looks whether the group is gone


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str, args: Sequence[str], env: Mapping[str, str], errlog: TextIO
) -> AsyncIterator[tuple[Any, Any]]:
    """Start `command` with `args` as a process group of its own and yield the read and
    write streams of its JSON-RPC messages; on leaving, stop the whole group.

    `env` is added to the SDK's small inherited environment (PATH, HOME, ...).

    Raises:
        OSError: The command cannot be started (not found, not executable).
    """
    from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
    from mcp.shared.message import SessionMessage

    if sys.platform == "win32":  # pragma: no cover - no process groups there
        params = StdioServerParameters(command=command, args=list(args), env=dict(env))
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams
        return
    with anyio.CancelScope(shield=True):  # once started, it is always stopped below
        process = await anyio.open_process(
            [command, *args],
            env=get_default_environment() | dict(env),
            stderr=errlog,
            start_new_session=True,
        )
    try:
        read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_read, process, read_in)
            tasks.start_soon(_write, process, write_out, read_in)
            try:
                yield read_out, write_in
            finally:
                for stream in (read_out, write_in):
                    stream.close()
                tasks.cancel_scope.cancel()
    finally:
        try:
            with anyio.CancelScope(shield=True):
                await stop_group(process)
        except BaseException:  # the stop was cut short (the event loop ends): kill now
            _signal_group(process.pid, signal.SIGKILL)
            raise


async def _read(process: Process, sink: MemoryObjectSendStream[Any]) -> None:
    """Pass each line the server writes on, as a message (or the error parsing it), until
    its stdout ends or nobody reads."""
    from anyio.streams.text import TextReceiveStream

    assert process.stdout is not None
    buffer = ""
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        async with sink:
            async for chunk in TextReceiveStream(process.stdout, errors="replace"):
                lines = (buffer + chunk).split("\n")
                buffer = lines.pop()
                for line in lines:
                    if line.strip():
                        await sink.send(_parse(line))


async def _write(
    process: Process, source: MemoryObjectReceiveStream[Any], sink: MemoryObjectSendStream[Any]
) -> None:
    """Write each message to the server's stdin, one line each; when the server cannot be
    written to, end the read stream too, so the session sees the connection end."""
    assert process.stdin is not None
    try:
        async with source:
            async for message in source:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send((text + "\n").encode())
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await sink.aclose()


def _parse(line: str) -> Any:
    """Return one line as a `SessionMessage`, or the error that it is not a JSON-RPC one."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc
    return SessionMessage(message)


async def stop_group(process: Process) -> None:
    """Stop a server started by `stdio_transport`: close its stdin, give it `GRACE`
    seconds to exit, then SIGTERM whatever is left of its process group, and SIGKILL it
    `GRACE` seconds later."""
    group = process.pid  # a new session's leader: its pid is the group's id
    if process.stdin is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    await _wait(lambda: process.returncode is not None, GRACE)
    if _group_alive(group, process):
        _signal_group(group, signal.SIGTERM)
        if not await _wait(lambda: not _group_alive(group, process), GRACE):
            _signal_group(group, signal.SIGKILL)
    with anyio.move_on_after(GRACE):  # closes its pipes, waits for its exit status
        await process.aclose()


async def _wait(done: Any, seconds: float) -> bool:
    """Poll `done()` until it is true (True) or `seconds` have passed (False)."""
    with anyio.move_on_after(seconds):
        while not done():  # noqa: ASYNC110 - a process's exit has no event to wait on
            await anyio.sleep(_POLL)
        return True
    return False


def _group_alive(group: int, process: Process) -> bool:
    """Whether a process of the group is left (reading `returncode` reaps the leader)."""
    _ = process.returncode
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(group: int, signum: int) -> None:
    """Send `signum` to every process of the group (none left: nothing to do)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)
