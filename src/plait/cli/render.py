"""What `plait run` shows a person: a run's events as they happen.

Each agent's name heads the lines of its events, indented by the event's depth; under it
the streamed text, tool calls with their arguments, tool results, transfers, handoffs and
errors. A custom output (a graph's state, a node's update) is shown as JSON, with each
message in it as its text (`role: content`). The end of a run is one line with its status
and token usage.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_jsonable_python
from rich.console import Console
from rich.markup import escape

from plait.events import AgentEvent, InterruptCtx, MessageVariant, RunResult
from plait.messages import Message

__all__ = ["LiveView", "message_text", "shown_json", "shown_value"]

#: The longest tool result shown, in characters.
RESULT_CHARS = 400


def shown_value(value: Any) -> str:
    """Return a value as a person reads it: a text as it is, anything else as JSON, with a
    `Message` (alone or inside lists and dicts) as its text."""
    if isinstance(value, str):
        return value
    if isinstance(value, Message):
        return message_text(value)
    try:
        return json.dumps(_readable(value), ensure_ascii=False, default=_plain)
    except (TypeError, ValueError):
        return repr(value)


def shown_json(text: str) -> str:
    """Return JSON text (a tool call's arguments, a tool's result) with its characters as
    they are: `"18°C"` where a model or a tool wrote `"18\\u00b0C"`. Text without such
    escapes, or that is not JSON, is returned as it is."""
    if "\\u" not in text:
        return text
    try:
        shown = json.dumps(json.loads(text), ensure_ascii=False)
        shown.encode()  # a lone surrogate ("\\ud83d") stays escaped
    except (ValueError, UnicodeEncodeError):
        return text
    return shown


def message_text(message: Message) -> str:
    """Return a message as one line of text: `role: content`, then its tool calls."""
    parts = [message.content] if message.content else []
    parts += [f"→ {call.name}({shown_json(call.arguments or '{}')})" for call in message.tool_calls]
    return f"{message.role}: {' '.join(parts)}"


def _readable(value: Any) -> Any:
    """Replace the messages inside lists, tuples and dicts by their text."""
    if isinstance(value, Message):
        return message_text(value)
    if isinstance(value, dict):
        return {key: _readable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_readable(item) for item in value]
    return value


def _plain(value: Any) -> Any:
    """JSON data for what `json` cannot encode (a record, a pydantic model), else repr."""
    return to_jsonable_python(value, fallback=repr)


def _clip(text: str, limit: int = RESULT_CHARS) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


class LiveView:
    """Prints a run's events on a console as they come."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._heading: tuple[tuple[str, ...], int] | None = None
        self._last_text = ""
        self._error_shown = False

    def _pad(self, event: AgentEvent) -> str:
        return "  " * event.depth + "  "

    def _head(self, event: AgentEvent) -> None:
        """Print the agent's name when the events come from another agent than before."""
        key = (event.run_path, event.depth)
        if self._heading == key:
            return
        self._heading = key
        self.console.print(f"{'  ' * event.depth}[bold cyan]{escape(event.agent_name)}[/]")

    async def show(self, event: AgentEvent) -> None:
        """Print one event (reading a streamed message chunk by chunk)."""
        self._head(event)
        pad = self._pad(event)
        if event.error is not None:
            error = event.error
            self._error_shown = True
            self.console.print(f"{pad}[red]error {type(error).__name__}:[/] {escape(str(error))}")
            return
        variant = event.message
        if variant is not None:
            await self._message(variant, pad)
        elif event.output is not None and event.output.custom is not None:
            self.console.print(f"{pad}[dim]output[/] {escape(shown_value(event.output.custom))}")
        self._actions(event, pad)

    async def _message(self, variant: MessageVariant, pad: str) -> None:
        try:
            if variant.stream is not None and variant.role == "assistant":
                await self._stream(variant, pad)
            message = await variant.get_message()
        except Exception:  # a failed model stream: the run reports it as its last event
            return
        if message.role == "tool":
            result = escape(_clip(shown_json(message.content)))
            self.console.print(f"{pad}[green]← {escape(variant.tool_name or '')}[/] {result}")
            return
        if variant.stream is None and message.content:
            self._last_text = message.content
            self.console.print(f"{pad}{escape(message.content)}")
        self._calls(message, pad)

    async def _stream(self, variant: MessageVariant, pad: str) -> None:
        assert variant.stream is not None
        started = False
        text: list[str] = []
        try:
            async for chunk in variant.stream:
                if chunk.content:
                    if not started:
                        self.console.print(pad, end="")
                        started = True
                    text.append(chunk.content)
                    self.console.print(escape(chunk.content), end="")
        finally:
            if started:
                self.console.print()
                self._last_text = "".join(text)

    def _calls(self, message: Message, pad: str) -> None:
        for call in message.tool_calls:
            arguments = escape(_clip(shown_json(call.arguments or "{}")))
            self.console.print(f"{pad}[yellow]→ {escape(call.name)}[/]({arguments})")

    def _actions(self, event: AgentEvent, pad: str) -> None:
        action = event.action
        if action is not None and action.transfer_to_agent is not None:
            transfer = action.transfer_to_agent
            why = f": {escape(transfer.reason)}" if transfer.reason else ""
            self.console.print(
                f"{pad}[magenta]transfer → {escape(transfer.dest_agent_name)}[/]{why}"
            )
        if event.handoff is not None:
            self.console.print(f"{pad}[magenta]handoff[/] {escape(event.handoff.render())}")
        if action is not None and action.interrupted is not None:
            for pending in action.interrupted.contexts:
                self.interrupt(pending, pad)

    def interrupt(self, pending: InterruptCtx, pad: str = "") -> None:
        """Print what an interrupt asks, and where it was raised."""
        info = escape(shown_value(pending.info))
        self.console.print(f"{pad}[bold yellow]? {info}[/] [dim]({escape(pending.address)})[/]")

    def end(self, result: RunResult, status: str) -> None:
        """Print the answer (unless it was just shown) and the status and usage line."""
        output = result.final_output
        if output is not None and not (isinstance(output, str) and output == self._last_text):
            self.console.print(f"[green]answer:[/] {escape(shown_value(output))}")
        if result.error is not None and not self._error_shown:
            error = result.error
            self.console.print(f"[red]{type(error).__name__}:[/] {escape(error.message)}")
        usage = result.usage
        colour = {"completed": "green", "paused": "yellow"}.get(status, "red")
        self.console.print(
            f"[{colour}]{status}[/] [dim]· usage: {usage.input_tokens} input + "
            f"{usage.output_tokens} output tokens[/]"
        )
        self._heading = None
        self._last_text = ""
        self._error_shown = False
