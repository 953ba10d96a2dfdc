"""`plait demo`: the router example, streamed event by event.

The model is, in order: `--scripted` (replies replayed from a script), a spec given with
`--model` or `PLAIT_MODEL` (see `plait.models.infer`), or else the embedded `LocalModel`,
which runs offline on the CPU. The three queries are three turns of one session, kept in a
temporary SQLite store that is deleted when the demo ends (the demo leaves no file behind).
Ctrl-C stops it within a second, with exit code 130 (`plait.cli.stop`).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from plait import AgentEvent, Runner
from plait._util.words import counted
from plait.cli.render import shown_json
from plait.cli.stop import EXIT_STOPPED, Stopper
from plait.errors import PlaitError, UsageError
from plait.examples.router import QUERIES, build_router, routes_only, scripted_models
from plait.messages import Usage
from plait.models import ChatModel
from plait.stores import SqliteStore

__all__ = ["run_demo"]


@dataclass
class _Tally:
    steps: int = 0
    usage: Usage = field(default_factory=Usage)


async def _show(console: Console, event: AgentEvent, tally: _Tally) -> None:
    who = escape(f"[{event.agent_name}]")
    if event.error is not None:
        console.print(
            f"  [red]error[/red] {who} {type(event.error).__name__}: {escape(str(event.error))}"
        )
        return
    variant = event.message
    if variant is not None:
        if variant.role == "assistant" and variant.stream is not None:
            started = False
            async for chunk in variant.stream:
                if chunk.content:
                    if not started:
                        console.print(f"  [dim]{who}[/dim] ", end="")
                        started = True
                    console.print(f"[bold]{escape(chunk.content)}[/bold]", end="")
            if started:
                console.print()
        message = await variant.get_message()
        if message.role == "assistant":
            tally.steps += 1
            if message.usage is not None:
                tally.usage = tally.usage + message.usage
            if message.content and variant.stream is None:
                console.print(f"  [dim]{who}[/dim] [bold]{escape(message.content)}[/bold]")
        if message.role == "tool":
            result = escape(shown_json(message.content))
            console.print(f"  [dim]{who}[/dim] {escape(variant.tool_name or '')} → {result}")
        for tc in message.tool_calls:
            arguments = escape(shown_json(tc.arguments))
            console.print(f"  [dim]{who}[/dim] calls [cyan]{escape(tc.name)}[/cyan]({arguments})")
    action = event.action
    if action is not None and action.transfer_to_agent is not None:
        target = action.transfer_to_agent.dest_agent_name
        console.print(
            f"  [magenta]transfer[/magenta] {escape(event.agent_name)} → {escape(target)}"
        )
    if action is not None and action.exit:
        console.print(f"  [magenta]exit[/magenta] {escape(event.agent_name)}")


def _choose(
    console: Console, scripted: bool, spec: str | None
) -> tuple[str, list[ChatModel], Callable[[], str]]:
    """Return the model's label, the router, weather and math models, and a speed note."""
    if scripted:
        console.print(
            "[yellow]plait demo — scripted model:[/yellow] the models' replies are replayed "
            "from a script, no model is called. The agents, tools, transfers and runner are real."
        )
        return "scripted", list(scripted_models()), str
    spec = spec or os.environ.get("PLAIT_MODEL") or None
    if spec is not None and spec.strip().lower() != "local":
        from plait.models import infer

        model = infer(spec)
        console.print(f"[yellow]plait demo — model {escape(spec)}[/yellow]")
        return spec, [model, model, model], str
    from plait.models.local import LocalModel

    local = LocalModel()
    console.print(
        "[yellow]plait demo — embedded local model:[/yellow] Gemma 3 270M (a tiny base model) "
        "on the CPU, offline, each step decoded under a grammar. It shows plait working end to "
        "end; it is not an assistant: the Router only routes, and says what it can help with "
        "when a request is for neither specialist. Set PLAIT_MODEL (e.g. openai:gpt-4o-mini) "
        "for real work."
    )
    started = time.perf_counter()
    with console.status("loading the local model…"):
        local.load()
    console.print(f"[dim]loaded {local.name} in {time.perf_counter() - started:.1f} s[/dim]")

    def speed() -> str:
        stats = local.stats
        if not stats.seconds:
            return ""
        return (
            f" · model {counted(stats.evaluated, 'token')} evaluated + {stats.decoded} decoded "
            f"in {stats.seconds:.1f} s ({(stats.evaluated + stats.decoded) / stats.seconds:.0f} "
            "tokens/s)"
        )

    return f"local {local.name}", [routes_only(local), local, local], speed


def run_demo(
    *,
    model: str | None = None,
    scripted: bool = False,
    streaming: bool = True,
    console: Console | None = None,
) -> int:
    """Run the router example on its three queries; return the exit code."""
    console = console or Console(soft_wrap=True)
    stopper = Stopper()
    started = time.perf_counter()
    try:
        label, (router, weather, math), speed = _choose(console, scripted, model)
    except (UsageError, PlaitError) as exc:
        message = " ".join(str(exc).split())
        Console(stderr=True, soft_wrap=True).print(
            f"[red]cannot start the demo:[/red] {escape(message)} "
            '(or run it on a scripted model: "plait demo --scripted")'
        )
        return 2
    values = {"user_id": "user123", "session_id": "session456"}
    tally = _Tally()

    async def main(path: Path) -> int:
        failures = 0
        async with SqliteStore(path) as store:
            runner = Runner(
                build_router(router, weather, math), store=store, enable_streaming=streaming
            )
            for i, query in enumerate(QUERIES, 1):
                console.print(f"\n[green]=== case {i}: {query}[/green]")
                stream = runner.query(query, session_id="demo", session_values=values)
                async for event in stream:
                    await _show(console, event, tally)
                result = await stream.collect()
                failures += result.error is not None
                console.print(f"  [green]answer:[/green] {escape(str(result.final_output))}")
            saved = json.loads(await store.get_session("demo") or b"{}")
        turns = sum(1 for author, _ in saved.get("messages", []) if author == "user")
        console.print(
            f"\n[dim]session 'demo': {counted(turns, 'turn')} kept in a temporary SQLite store, "
            "deleted as the demo ends[/dim]"
        )
        return 1 if failures else 0

    with tempfile.TemporaryDirectory() as tmp:
        code = stopper.run(lambda: main(Path(tmp) / "plait-demo.db"))
    if stopper.requested:
        return EXIT_STOPPED
    elapsed = time.perf_counter() - started
    tokens = tally.usage
    console.print(
        f"[bold]summary:[/bold] model {escape(label)} · {counted(tally.steps, 'model step')} · "
        f"{tokens.input_tokens} prompt + {tokens.output_tokens} generated tokens · "
        f"{elapsed:.1f} s{escape(speed())}"
    )
    return code
