"""The agent executor of plait's A2A server: an a2a-sdk `AgentExecutor` over plait runs.

A task is a plait run. Its first message starts the run (the context id is the session
id); the run's text goes out as the task's `answer` artifact as it is produced
(`plait.protocols._a2a_answer`), and the task ends as the run ends: `completed` (the final
answer as the artifact and in the status message), `input-required` (the interrupts as a
data part, and their checkpoint in the task's metadata under `"plait"`), `failed` (the
error), or `canceled` (a `tasks/cancel`, or the client that sent the message left before
its answer was complete: the run is stopped either way). A later message to an
`input-required` task resumes the run from the checkpoint its metadata names, so the
mapping lives exactly as long as the task store keeps the task.

Which runner runs a message, and whether its client is still there, come with the request
(`Call`, in the SDK's call context): the server gives each caller a runner on that
caller's view of the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from a2a.helpers import get_data_parts, get_text_parts
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Task, TaskState, TaskStatus

from plait.errors import PlaitError, ResumeError, RunCancelled, UsageError
from plait.events import AgentEvent, RunResult
from plait.messages import Message as PlaitMessage
from plait.protocols._a2a_answer import AnswerStream
from plait.protocols._a2a_parts import data_part, jsonable, plain, struct_dict, text_of
from plait.run.runner import Runner
from plait.run.stream import RunStream

__all__ = ["META", "STATE_KEY", "Call", "PlaitExecutor"]

#: The key of plait's entries in a task's metadata: `{"checkpoint_id", "interrupts"}`.
META = "plait"
#: The key of the request's `Call` in the SDK's call context (`context.state`).
STATE_KEY = "plait.call"


@dataclass(frozen=True, slots=True)
class Call:
    """What the executor needs of the request that sent a message.

    `runner` runs it (on the caller's view of the store, when the server has users);
    `gone` is set when the client leaves before the answer to that request is complete.
    """

    runner: Runner
    gone: asyncio.Event


@dataclass(slots=True)
class _Live:
    """A task's run in progress: its stream, its answer, whether it was canceled."""

    stream: RunStream
    answer: AnswerStream
    canceled: bool = False


class PlaitExecutor(AgentExecutor):
    """Run a task's messages as plait runs: start one, or resume the paused one."""

    def __init__(self) -> None:
        self._live: dict[str, _Live] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start or resume the run of this task and publish its states."""
        call = _call_of(context)
        task_id = str(context.task_id)
        updater = TaskUpdater(event_queue, task_id, str(context.context_id))
        task = context.current_task
        try:
            stream = await _open(call.runner, updater, context.message or Message(), task)
        except PlaitError as exc:
            await _fail(updater, type(exc).__name__, exc.message)
            return
        await updater.start_work()
        live = self._live[task_id] = _Live(stream, AnswerStream(updater))
        try:
            result = await _drive(live, call.gone)
        except ResumeError as exc:  # the answer did not fit: ask again
            await updater.update_status(
                TaskState.TASK_STATE_INPUT_REQUIRED,
                message=updater.new_agent_message(
                    [
                        Part(text=f"could not resume: {exc.message}"),
                        *_asked_parts(task.metadata if task else None),
                    ]
                ),
            )
            return
        except PlaitError as exc:
            await _fail(updater, type(exc).__name__, exc.message)
            return
        finally:
            self._live.pop(task_id, None)
        if live.canceled:
            return
        if call.gone.is_set() and isinstance(result.error, RunCancelled):
            said = "the client left before the answer was complete; the run was stopped"
            await updater.cancel(updater.new_agent_message([Part(text=said)]))
            return
        await _finish(result, live.answer, updater)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Stop the task's run and mark the task canceled (the SDK then stops `execute`)."""
        task_id = str(context.task_id)
        live = self._live.get(task_id)
        if live is not None:
            live.canceled = True
            live.answer.close()
            live.stream.cancel()
        await TaskUpdater(event_queue, task_id, str(context.context_id)).cancel()


def _call_of(context: RequestContext) -> Call:
    call = context.call_context.state.get(STATE_KEY) if context.call_context else None
    if not isinstance(call, Call):
        raise RuntimeError("a plait A2A request carries its Call (see plait.protocols.a2a)")
    return call


async def _open(
    runner: Runner, updater: TaskUpdater, message: Message, task: Task | None
) -> RunStream:
    """Return the run a message starts (a new task) or resumes (an `input-required` one).

    Raises:
        UsageError: The message has nothing to run, or its task takes no message now.
    """
    if task is None:
        submitted = Task(
            id=updater.task_id,
            context_id=updater.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
            history=[message],
        )
        await updater.event_queue.enqueue_event(submitted)
        return _start(runner, message, updater.context_id)
    if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
        return _resume(runner, task, message)
    raise UsageError(f"task {task.id} is {TaskState.Name(task.status.state)}")


def _start(runner: Runner, message: Message, context_id: str) -> RunStream:
    text = "\n".join(get_text_parts(message.parts))
    if not text:
        data = [plain(value) for value in get_data_parts(message.parts)]
        text = "\n".join(json.dumps(value) for value in data)
    if not text:
        raise UsageError("the message has no text or data part")
    return runner.run([PlaitMessage.user(text)], session_id=context_id)


def _resume(runner: Runner, task: Task, message: Message) -> RunStream:
    meta = struct_dict(task.metadata).get(META) or {}
    checkpoint_id = meta.get("checkpoint_id")
    if not isinstance(checkpoint_id, str):
        raise UsageError(f"task {task.id} has no paused run to resume")
    data = get_data_parts(message.parts)
    value: Any = plain(data[0]) if data else "\n".join(get_text_parts(message.parts))
    pending = meta.get("interrupts") or []
    if len(pending) > 1 and isinstance(value, dict):
        return runner.resume(checkpoint_id, value)
    return runner.resume(checkpoint_id, value=value)


async def _drive(live: _Live, gone: asyncio.Event) -> RunResult:
    """Iterate the run, writing its text to the answer; return its result. The run is
    stopped (and saved) if the client leaves first."""
    stream, answer = live.stream, live.answer
    async with stream, answer.sending(), _stopped_when(gone, stream):
        async for event in stream:
            await _relay(event, answer)
        return await stream.collect()


@contextlib.asynccontextmanager
async def _stopped_when(gone: asyncio.Event, stream: RunStream) -> AsyncIterator[None]:
    """Stop `stream`'s run as soon as `gone` is set, while the block runs."""

    async def watch() -> None:
        await gone.wait()
        stream.cancel()

    watcher = asyncio.ensure_future(watch())
    try:
        yield
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def _relay(event: AgentEvent, answer: AnswerStream) -> None:
    """Write the text of a top-level assistant message to the answer, as it streams; send
    what waits before the message's tool calls run."""
    variant = event.message
    if variant is None or variant.role != "assistant" or event.depth != 0:
        return
    await answer.begin(event.agent_name)
    whole = variant.message
    if variant.stream is not None:
        try:
            async for chunk in variant.stream:
                await answer.add(chunk.content)
            whole = await variant.stream.collect()
        except Exception:  # the run reports the model's error itself
            whole = None
    elif whole is not None:
        await answer.add(whole.content)
    if whole is None or whole.tool_calls:
        await answer.flush()


async def _finish(result: RunResult, answer: AnswerStream, updater: TaskUpdater) -> None:
    """End the task as its run ended: failed, waiting for input, or completed."""
    if result.error is not None:
        await answer.flush()
        await _fail(updater, type(result.error).__name__, result.error.message)
    elif result.interrupts:
        await answer.flush()
        interrupts = [{"id": i.id, "info": i.info, "address": i.address} for i in result.interrupts]
        parts = [Part(text=_ask_text(result)), data_part({"interrupts": interrupts})]
        meta = {"checkpoint_id": result.checkpoint_id, "interrupts": interrupts}
        await updater.update_status(
            TaskState.TASK_STATE_INPUT_REQUIRED,
            message=updater.new_agent_message(parts),
            metadata={META: jsonable(meta)},
        )
    else:
        final = result.final_output
        await answer.finish(final)
        await updater.complete(updater.new_agent_message([Part(text=text_of(final))]))


async def _fail(updater: TaskUpdater, kind: str, message: str) -> None:
    error = {"type": kind, "message": message}
    parts = [Part(text=f"{kind}: {message}"), data_part({"error": error})]
    await updater.failed(updater.new_agent_message(parts))


def _ask_text(result: RunResult) -> str:
    """Say what the pending interrupts ask, one line each."""
    return "\n".join(text_of(i.info) for i in result.interrupts)


def _asked_parts(metadata: Any) -> list[Part]:
    """Return the data part that says which interrupts are still pending."""
    meta = struct_dict(metadata).get(META) if metadata is not None else None
    if not isinstance(meta, dict):
        return []
    return [data_part({"interrupts": meta.get("interrupts") or []})]
