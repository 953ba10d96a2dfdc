"""An MCP server whose tools ask the client: for a model's answer (sampling) or for a
person's input (elicitation), on stdio.

The `ask_*` tools ask as 2025-11-25 servers do, with requests of their own in the middle of
the call (`ctx.elicit`, `ctx.session.create_message`); the SDK refuses those on a
2026-07-28 connection. The `resolve_*` tools ask through `Resolve(...)`, which the SDK
turns into a 2026-07-28 "input required" round trip, or into those requests on an older
connection. Each tool says which protocol version it ran under. When `ASKS_LOG` names a
file, each call of a tool appends the tool's name to it.
"""

from __future__ import annotations

import os
import warnings
from typing import Annotated

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import BaseModel

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # sampling is, in 2026

app = MCPServer("asks", log_level="ERROR")


class Name(BaseModel):
    name: str


def _log(tool: str) -> None:
    path = os.environ.get("ASKS_LOG")
    if path:
        with open(path, "a") as log:
            log.write(tool + "\n")


@app.tool()
async def ask_name(ctx: Context) -> str:
    """Greet the user, asking for their name."""
    _log("ask_name")
    asked = await ctx.elicit("What is your name?", Name)
    if asked.action != "accept":
        return f"no name ({asked.action}, {ctx.protocol_version})"
    return f"Hello, {asked.data.name}! ({ctx.protocol_version})"


@app.tool()
async def ask_summary(text: str, ctx: Context) -> str:
    """Summarize a text with the client's model."""
    _log("ask_summary")
    sampled = await ctx.session.create_message(
        messages=[
            types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
        ],
        max_tokens=50,
        system_prompt="Summarize in three words.",
    )
    content = sampled.content
    said = content.text if isinstance(content, types.TextContent) else str(content)
    return f"{said} (by {sampled.model}, {ctx.protocol_version})"


def _name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def _summary(text: str) -> Sample:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    return Sample([message], max_tokens=50, system_prompt="Summarize in three words.")


@app.tool()
async def resolve_name(name: Annotated[Name, Resolve(_name)], ctx: Context) -> str:
    """Greet the user, asking for their name."""
    _log("resolve_name")
    return f"Hello, {name.name}! ({ctx.protocol_version})"


@app.tool()
async def resolve_summary(
    text: str, sampled: Annotated[types.CreateMessageResult, Resolve(_summary)], ctx: Context
) -> str:
    """Summarize a text with the client's model."""
    _log("resolve_summary")
    content = sampled.content
    said = content.text if isinstance(content, types.TextContent) else str(content)
    return f"{said} (by {sampled.model}, {ctx.protocol_version})"


if __name__ == "__main__":
    app.run()
