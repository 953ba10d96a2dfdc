"""`plait demo`: the router example, printed event by event."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from rich.console import Console

from plait import AgentEvent, Runner
from plait.examples.router import QUERIES, build_router, scripted_models
from plait.stores import SqliteStore

__all__ = ["run_demo"]


async def _show(console: Console, event: AgentEvent) -> None:
    who = event.agent_name
    if event.error is not None:
        console.print(f"  [red]error[/red] [{who}] {type(event.error).__name__}: {event.error}")
        return
    variant = event.message
    if variant is not None:
        message = await variant.get_message()
        if message.role == "tool":
            console.print(f"  [dim]\\[{who}][/dim] {variant.tool_name} → {message.content}")
        for tc in message.tool_calls:
            console.print(f"  [dim]\\[{who}][/dim] calls [cyan]{tc.name}[/cyan]({tc.arguments})")
        if message.role == "assistant" and message.content:
            console.print(f"  [dim]\\[{who}][/dim] [bold]{message.content}[/bold]")
    action = event.action
    if action is not None and action.transfer_to_agent is not None:
        target = action.transfer_to_agent.dest_agent_name
        console.print(f"  [magenta]transfer[/magenta] {who} → {target}")
    if action is not None and action.exit:
        console.print(f"  [magenta]exit[/magenta] {who}")


def run_demo(*, streaming: bool = False, console: Console | None = None) -> int:
    """Run the router example on its three queries; return the exit code."""
    console = console or Console()
    console.print(
        "[yellow]plait demo — scripted model:[/yellow] the models' replies are replayed from a "
        "script, no model is called. The agents, tools, transfers and runner are real."
    )
    values = {"user_id": "user123", "session_id": "session456"}

    async def main(path: Path) -> int:
        failures = 0
        async with SqliteStore(path) as store:
            runner = Runner(
                build_router(*scripted_models()), store=store, enable_streaming=streaming
            )
            for i, query in enumerate(QUERIES, 1):
                console.print(f"\n[green]=== case {i}: {query}[/green]")
                stream = runner.query(query, session_id="demo", session_values=values)
                async for event in stream:
                    await _show(console, event)
                result = await stream.collect()
                failures += result.error is not None
                console.print(f"  [green]answer:[/green] {result.final_output}")
            saved = json.loads(await store.get_session("demo") or b"{}")
        turns = sum(1 for author, _ in saved.get("messages", []) if author == "user")
        console.print(f"\n[dim]session 'demo': {turns} turns kept in SQLite ({path.name})[/dim]")
        return 1 if failures else 0

    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(main(Path(tmp) / "plait-demo.db"))
