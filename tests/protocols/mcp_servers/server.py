"""An MCP server for the tests: stdio by default, streamable HTTP with `--http PORT`."""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("plait-test", log_level="ERROR")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@app.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@app.tool()
def fail(reason: str) -> str:
    """Fail with the reason."""
    raise ToolError(reason)


@app.tool()
def pid() -> int:
    """Return the server's process id."""
    return os.getpid()


@app.tool()
def env(name: str) -> str:
    """Return the environment variable `name` of the server process."""
    return os.environ.get(name, "")


@app.tool()
def die() -> str:
    """Exit the server process at once."""
    os._exit(3)


@app.tool()
def huge(chars: int) -> str:
    """Return `chars` characters."""
    return "x" * chars


@app.tool()
async def hang() -> str:
    """Never answer."""
    await anyio.sleep_forever()
    return ""


@app.tool()
def header(name: str, ctx: Context) -> str:
    """Return the HTTP request's header `name` (empty on stdio)."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    return "" if headers is None else str(headers.get(name, ""))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        import uvicorn

        http = app.streamable_http_app()
        uvicorn.run(http, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        app.run()
