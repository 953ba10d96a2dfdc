"""`plait run` and `plait resume`: run an agent in the terminal, live.

Events are shown as they come (`plait.cli.render`), or with `--json` printed as JSON lines
(each event's `AgentEvent.to_json()`, then the run summary). At an interrupt the command
shows what it asks and reads the answer from the terminal, then resumes; when stdin is not
a terminal it prints the checkpoint id on stderr and ends with exit code 3.

Exit codes: 0 completed, 1 failed (or cancelled), 2 usage error, 3 paused, 130 stopped
with Ctrl-C (`plait.cli.stop`; when the run was saved, the `plait resume` line is printed).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shlex
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from plait.cli.prompt import LineReader
from plait.cli.render import LiveView
from plait.cli.stop import Stopper
from plait.cli.store import DEFAULT_STORE, open_store, shown_url
from plait.cli.target import load_target
from plait.core.agent import Agent
from plait.core.checkpoint import UNSET
from plait.errors import CheckpointNotFound, UsageError
from plait.events import AgentEvent, AgentOutput, InterruptCtx, MessageVariant, RunResult
from plait.run.runner import Runner, RunStream
from plait.run.summary import Status, event_json, run_status, run_summary

__all__ = ["EXIT_CODES", "parse_answer", "resume_command", "run_command"]

#: The exit code of each way a run ends.
EXIT_CODES: Mapping[Status, int] = {"completed": 0, "failed": 1, "cancelled": 1, "paused": 3}
_LEAVE = frozenset({"exit", "quit", ":q"})


def _approval(info: Any) -> dict[str, Any] | None:
    """Return the question of a tool's approval (docs/approvals.md), or None."""
    asked = info.get("approval") if isinstance(info, dict) else None
    return asked if isinstance(asked, dict) and "fingerprint" in asked else None


def parse_answer(text: str, approval: dict[str, Any] | None = None) -> Any:
    """Return an answer typed by a person: JSON when it parses as JSON, else the text. To a
    tool's `approval`, "y"/"yes" and "n"/"no" answer bound to its fingerprint."""
    if approval is not None and text.lower() in ("y", "yes", "n", "no"):
        return {"approved": text.lower() in ("y", "yes"), "fingerprint": approval["fingerprint"]}
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass
class Terminal:
    """Where a command writes: a person's console (stdout) or JSON lines, and stderr."""

    json_lines: bool
    interactive: bool
    out: Console = field(default_factory=lambda: Console(soft_wrap=True, highlight=False))
    err: Console = field(
        default_factory=lambda: Console(stderr=True, soft_wrap=True, highlight=False)
    )
    lines: LineReader = field(default_factory=LineReader)

    @property
    def human(self) -> Console:
        """The console for what a person reads: stdout, or stderr with `--json`."""
        return self.err if self.json_lines else self.out

    def emit(self, line: str) -> None:
        """Write one JSON line on stdout."""
        typer.echo(line)

    async def ask(self, prompt: str) -> str | None:
        """Read a line from the terminal after `prompt`; None at the end of input.

        The event loop goes on while it waits, so Ctrl-C stops the prompt at once.
        """
        self.human.print(prompt, end="")
        try:
            line = await self.lines.readline()
        except asyncio.CancelledError:  # Ctrl-C: end the prompt's line
            self.human.print()
            raise
        if line is None:
            self.human.print()
        return line


async def whole_event_json(event: AgentEvent) -> str:
    """Return the event as one line of JSON with its message whole, never its chunks (a
    resumed run streams when the run it continues did)."""
    variant = event.message
    if variant is not None and variant.stream is not None and event.output is not None:
        try:
            message = await variant.get_message()
        except Exception:  # the stream's own error is reported by the run
            return await event_json(event)
        whole = MessageVariant(
            is_streaming=False, role=variant.role, tool_name=variant.tool_name, message=message
        )
        output = AgentOutput(message=whole, custom=event.output.custom)
        event = dataclasses.replace(event, output=output)
    return await event_json(event)


class Conversation:
    """One command's runs of one agent: shown live, interrupts answered, resumed."""

    def __init__(
        self,
        runner: Runner,
        terminal: Terminal,
        target: str,
        store_url: str,
        stopper: Stopper | None = None,
    ) -> None:
        self.runner = runner
        self.stopper = stopper or Stopper()
        self.terminal = terminal
        self.view = LiveView(terminal.human)
        self.target = target
        self.store_url = store_url

    async def play(self, stream: RunStream, session_id: str | None) -> RunResult:
        """Show (or print as JSON) the events of one run; return its result."""
        terminal = self.terminal
        with self.stopper.watch(stream):  # Ctrl-C stops the run and saves it
            try:
                async for event in stream:
                    if terminal.json_lines:
                        terminal.emit(await whole_event_json(event))
                    else:
                        await self.view.show(event)
                result = await stream.collect()
            finally:  # a run left going when the command stops ends here, in this task
                await stream.aclose()
        status = run_status(result)
        if terminal.json_lines:
            summary = run_summary(result, agent=self.runner.agent.name, session_id=session_id)
            terminal.emit(json.dumps(summary, ensure_ascii=False))
        else:
            self.view.end(result, status)
        return result

    async def drive(self, stream: RunStream, session_id: str | None) -> Status:
        """Run to the end, answering each pause from the terminal; return how it ended
        (raises `asyncio.CancelledError` when Ctrl-C stops it, after the `plait resume`
        line of a run that was saved)."""
        while True:
            result = await self.play(stream, session_id)
            status = run_status(result)
            if self.stopper.requested:
                if result.checkpoint_id is not None:
                    self.paused_hint(result)
                raise asyncio.CancelledError
            if status != "paused" or result.checkpoint_id is None:
                return status
            try:
                answers = await self.answers(result.interrupts)
            except asyncio.CancelledError:  # Ctrl-C at the question: the run stays paused
                self.paused_hint(result)
                raise
            if answers is None:
                self.paused_hint(result)
                return status
            stream = self.runner.resume(result.checkpoint_id, answers)

    async def answers(self, pending: tuple[InterruptCtx, ...]) -> dict[str, Any] | None:
        """Ask for the answer of each interrupt; None when there is no one to ask (stdin
        is not a terminal, or it ended)."""
        if not self.terminal.interactive:
            return None
        answers: dict[str, Any] = {}
        for interrupt in pending:
            if self.terminal.json_lines or len(pending) > 1:  # else it was just shown
                self.view.interrupt(interrupt)
            asked = _approval(interrupt.info)
            hint = "y to approve, n to reject, or JSON" if asked else "JSON, or plain text"
            line = await self.terminal.ask(f"[bold]answer[/] [dim]({hint})[/]> ")
            if line is None:
                return None
            answers[interrupt.id] = parse_answer(line.strip(), asked)
        return answers

    def paused_hint(self, result: RunResult) -> None:
        """Tell (on stderr) where the run paused (or was stopped) and how to resume it."""
        checkpoint_id = result.checkpoint_id
        store = "" if self.store_url == DEFAULT_STORE else f" --store {shlex.quote(self.store_url)}"
        if not result.interrupts:  # stopped: resuming continues it
            answer = ""
        elif len(result.interrupts) == 1:
            answer = " --value JSON"
        else:
            ids = ", ".join(f'"{i.id}": JSON' for i in result.interrupts)
            answer = f" --targets {shlex.quote('{' + ids + '}')}"
        command = f"plait resume {checkpoint_id} {shlex.quote(self.target)}{store}{answer}"
        err = self.terminal.err
        how = "paused" if result.interrupts else "stopped"
        err.print(f"{how}: checkpoint {checkpoint_id}", markup=False)
        err.print(f"resume it with: {command}", markup=False)

    async def chat(self, session_id: str) -> int:
        """Read requests line by line and run each on the session, until EOF or "exit"."""
        self.terminal.err.print(
            f"[dim]session {escape(session_id)} · type a request; exit or Ctrl-D to leave[/]"
        )
        while True:
            line = await self.terminal.ask("[bold green]you[/]> ")
            text = "" if line is None else line.strip()
            if line is None or text in _LEAVE:
                return 0
            if not text:
                continue
            status = await self.drive(self.runner.query(text, session_id=session_id), session_id)
            if status == "paused":
                return EXIT_CODES[status]


def _terminal(json_lines: bool) -> Terminal:
    return Terminal(json_lines=json_lines, interactive=sys.stdin.isatty())


def run_command(
    target: str,
    query: str | None,
    *,
    session_id: str | None,
    store_url: str,
    json_lines: bool,
) -> int:
    """Run `target` on `query` (or chat with it when there is none); return the exit code.

    Raises:
        UsageError: The target cannot be loaded, or the store cannot be reached.
    """

    async def go(runner: Runner, talk: Conversation) -> int:
        if query is None:
            return await talk.chat(session_id or uuid.uuid4().hex[:12])
        status = await talk.drive(runner.query(query, session_id=session_id), session_id)
        return EXIT_CODES[status]

    return _converse(target, store_url, json_lines, go)


def _converse(
    target: str,
    store_url: str,
    json_lines: bool,
    go: Callable[[Runner, Conversation], Awaitable[int]],
) -> int:
    """Load `target`, open the store and return the exit code of `go(runner, talk)`, its
    conversation on the terminal (Ctrl-C stops it; the store is closed however it ends)."""
    agent: Agent = load_target(target)
    terminal = _terminal(json_lines)
    stopper = Stopper()

    async def main() -> int:
        store = await open_store(store_url)
        try:
            runner = Runner(agent, store=store, enable_streaming=not json_lines)
            return await go(runner, Conversation(runner, terminal, target, store_url, stopper))
        finally:
            await store.close()

    return stopper.run(main)


def resume_answers(value: str | None, targets: str | None) -> tuple[Any, dict[str, Any] | None]:
    """Return (`value=`, `targets`) for the runner from `--value` and `--targets`.

    Raises:
        UsageError: Both are given, or `--targets` is not a JSON object.
    """
    if value is not None and targets is not None:
        raise UsageError("give --value or --targets, not both")
    if targets is None:
        return (UNSET if value is None else parse_answer(value)), None
    try:
        by_id = json.loads(targets)
    except ValueError as exc:
        raise UsageError(
            f"--targets must be a JSON object of interrupt id -> answer: {exc}"
        ) from None
    if not isinstance(by_id, dict):
        raise UsageError("--targets must be a JSON object of interrupt id -> answer")
    return UNSET, by_id


async def _session_of(runner: Runner, checkpoint_id: str, store_url: str) -> str | None:
    """Return the session of a checkpoint.

    Raises:
        CheckpointNotFound: The store has no such checkpoint.
    """
    try:
        return (await runner.read_checkpoint(checkpoint_id)).session_id
    except CheckpointNotFound:
        raise CheckpointNotFound(
            f"no checkpoint {checkpoint_id!r} in the store {shown_url(store_url)}; check the "
            "id, and pass the --store the run was made with"
        ) from None


def resume_command(
    checkpoint_id: str,
    target: str,
    *,
    store_url: str,
    value: str | None,
    targets: str | None,
    json_lines: bool,
) -> int:
    """Resume a paused run of `target` and follow it live; return the exit code.

    Raises:
        UsageError: Bad answers, a target that cannot be loaded, a store out of reach.
        ResumeError: The checkpoint cannot be resumed (unknown, already resumed, its answers
            do not fit).
    """
    answer, by_id = resume_answers(value, targets)

    async def go(runner: Runner, talk: Conversation) -> int:
        session_id = await _session_of(runner, checkpoint_id, store_url)
        stream = runner.resume(checkpoint_id, by_id, value=answer)
        return EXIT_CODES[await talk.drive(stream, session_id)]

    return _converse(target, store_url, json_lines, go)
