"""The server of `plait.protocols.a2a.app`: an a2a-sdk `AgentExecutor` over a plait `Runner`.

A task is a plait run. Its first message starts the run (the context id is the session id);
the executor relays the run's text as `working` status updates and ends the task as the run
ends: `completed` (the final answer as an artifact and in the status message),
`input-required` (the interrupts as a data part, and their checkpoint in the task's
metadata under `"plait"`), or `failed` (the error). A later message to an `input-required`
task resumes the run from the checkpoint its metadata names, so the mapping lives exactly as
long as the task store keeps the task.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from a2a.helpers import get_data_parts, get_text_parts
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_CURRENT
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from plait.core.agent import Agent
from plait.errors import PlaitError, ResumeError
from plait.events import AgentEvent, RunResult
from plait.messages import Message as PlaitMessage
from plait.protocols._a2a_parts import data_part, jsonable, part_of, plain, struct_dict, text_of
from plait.run.runner import Runner
from plait.run.stream import RunStream
from plait.stores.base import Store

__all__ = ["PlaitExecutor", "build_app"]

#: The key of plait's entries in a task's metadata: `{"checkpoint_id", "interrupts"}`.
META = "plait"
MODES = ["text/plain", "application/json"]


def build_app(
    agent: Agent,
    *,
    url: str | None,
    store: Store | None,
    task_store: TaskStore | None,
    streaming: bool,
    version: str,
) -> Starlette:
    """Build the Starlette app of `plait.protocols.a2a.app` (arguments checked there)."""
    if not isinstance(agent, Agent):
        from plait.errors import UsageError

        raise UsageError(f"a2a.app needs an Agent (name, description, run), got {agent!r}")
    runner = Runner(agent, store=store, enable_streaming=streaming)
    card = _card(agent, url or "http://localhost/", streaming=streaming, version=version)
    handler = DefaultRequestHandler(
        agent_executor=PlaitExecutor(runner),
        task_store=task_store if task_store is not None else InMemoryTaskStore(),
        agent_card=card,
    )

    async def agent_card(request: Request) -> JSONResponse:
        served = card
        if url is None:  # the URL this request came to
            served = AgentCard()
            served.CopyFrom(card)
            served.supported_interfaces[0].url = str(request.base_url)
        return JSONResponse(agent_card_to_dict(served))

    routes: list[BaseRoute] = [Route(AGENT_CARD_WELL_KNOWN_PATH, agent_card, methods=["GET"])]
    routes.extend(create_jsonrpc_routes(handler, rpc_url="/"))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    return Starlette(routes=routes, lifespan=lifespan)


def _card(agent: Agent, url: str, *, streaming: bool, version: str) -> AgentCard:
    """Return the agent card of `agent`, served at `url` over JSON-RPC."""
    return AgentCard(
        name=agent.name,
        description=agent.description or agent.name,
        version=version,
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION_CURRENT
            )
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=MODES,
        default_output_modes=MODES,
        skills=[
            AgentSkill(
                id=agent.name,
                name=agent.name,
                description=agent.description or agent.name,
                tags=["plait"],
            )
        ],
    )


class PlaitExecutor(AgentExecutor):
    """Run a task's messages as plait runs: start one, or resume the paused one."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self._cancelled: set[str] = set()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start or resume the run of this task and publish its states."""
        task_id, context_id = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        message, task = context.message or Message(), context.current_task
        try:
            if task is None:
                await event_queue.enqueue_event(
                    Task(
                        id=task_id,
                        context_id=context_id,
                        status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                        history=[message],
                    )
                )
                stream = self._start(message, context_id)
            elif task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                stream = self._resume(task, message)
            else:
                state = TaskState.Name(task.status.state)
                await self._fail(updater, "UsageError", f"task {task_id} is {state}")
                return
        except PlaitError as exc:
            await self._fail(updater, type(exc).__name__, exc.message)
            return
        await updater.start_work()
        try:
            result = await self._drive(stream, updater)
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
            await self._fail(updater, type(exc).__name__, exc.message)
            return
        finally:
            cancelled = task_id in self._cancelled
            self._cancelled.discard(task_id)
        if not cancelled:
            await self._finish(result, updater)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Mark the task canceled (the SDK then stops a running `execute`)."""
        task_id = str(context.task_id)
        self._cancelled.add(task_id)
        await TaskUpdater(event_queue, task_id, str(context.context_id)).cancel()

    def _start(self, message: Message, context_id: str) -> RunStream:
        text = "\n".join(get_text_parts(message.parts))
        if not text:
            data = [plain(value) for value in get_data_parts(message.parts)]
            text = "\n".join(json.dumps(value) for value in data)
        if not text:
            raise _usage("the message has no text or data part")
        return self._runner.run([PlaitMessage.user(text)], session_id=context_id)

    def _resume(self, task: Task, message: Message) -> RunStream:
        meta = struct_dict(task.metadata).get(META) or {}
        checkpoint_id = meta.get("checkpoint_id")
        if not isinstance(checkpoint_id, str):
            raise _usage(f"task {task.id} has no paused run to resume")
        data = get_data_parts(message.parts)
        value: Any = plain(data[0]) if data else "\n".join(get_text_parts(message.parts))
        pending = meta.get("interrupts") or []
        if len(pending) > 1 and isinstance(value, dict):
            return self._runner.resume(checkpoint_id, value)
        return self._runner.resume(checkpoint_id, value=value)

    async def _drive(self, stream: RunStream, updater: TaskUpdater) -> RunResult:
        """Iterate the run, relaying its text; return its result."""
        async with stream:
            async for event in stream:
                await _relay(event, updater)
            return await stream.collect()

    async def _finish(self, result: RunResult, updater: TaskUpdater) -> None:
        if result.error is not None:
            await self._fail(updater, type(result.error).__name__, result.error.message)
        elif result.interrupts:
            interrupts = [
                {"id": i.id, "info": i.info, "address": i.address} for i in result.interrupts
            ]
            parts = [Part(text=_ask_text(result)), data_part({"interrupts": interrupts})]
            meta = {"checkpoint_id": result.checkpoint_id, "interrupts": interrupts}
            await updater.update_status(
                TaskState.TASK_STATE_INPUT_REQUIRED,
                message=updater.new_agent_message(parts),
                metadata={META: jsonable(meta)},
            )
        else:
            answer = result.final_output
            await updater.add_artifact([part_of(answer)], name="answer", last_chunk=True)
            await updater.complete(updater.new_agent_message([Part(text=text_of(answer))]))

    async def _fail(self, updater: TaskUpdater, kind: str, message: str) -> None:
        error = {"type": kind, "message": message}
        parts = [Part(text=f"{kind}: {message}"), data_part({"error": error})]
        await updater.failed(updater.new_agent_message(parts))


async def _relay(event: AgentEvent, updater: TaskUpdater) -> None:
    """Publish the text of a top-level assistant message as `working` status updates."""
    variant = event.message
    if variant is None or variant.role != "assistant" or event.depth != 0:
        return
    meta = {"agent": event.agent_name}
    if variant.stream is not None:
        async for chunk in variant.stream:
            if chunk.content:
                await _working(updater, chunk.content, meta)
    elif variant.message is not None and variant.message.content:
        await _working(updater, variant.message.content, meta)


async def _working(updater: TaskUpdater, text: str, meta: dict[str, Any]) -> None:
    message = updater.new_agent_message([Part(text=text)], metadata=meta)
    await updater.update_status(TaskState.TASK_STATE_WORKING, message=message)


def _ask_text(result: RunResult) -> str:
    """Say what the pending interrupts ask, one line each."""
    return "\n".join(text_of(i.info) for i in result.interrupts)


def _asked_parts(metadata: Any) -> list[Part]:
    """Return the data part that says which interrupts are still pending."""
    meta = struct_dict(metadata).get(META) if metadata is not None else None
    if not isinstance(meta, dict):
        return []
    return [data_part({"interrupts": meta.get("interrupts") or []})]


def _usage(message: str) -> PlaitError:
    from plait.errors import UsageError

    return UsageError(message)
