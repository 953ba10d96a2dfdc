"""The client side of `plait.protocols.a2a.RemoteAgent`: one remote A2A agent, called with
the a2a-sdk's client.

A run sends one message and reads the remote task's events until it completes, fails or
asks for input. The streamed text is the text of `working` updates and of artifact chunks
(an artifact sent in several chunks, as plait's server sends its answer); the answer is the
task's artifacts (else its last status message, else the streamed text). A task that asks for
input pauses the local run: the remote task id is kept with `save_state`, and the answer
given on resume is sent to that task.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.helpers import get_data_parts, get_text_parts
from a2a.types import (
    AgentCard,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskArtifactUpdateEvent,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH

from plait.core.agent import AgentInput
from plait.core.agent_context import AgentContext
from plait.core.interrupt import interrupt
from plait.errors import RemoteAgentError
from plait.events import AgentEvent, AgentOutput, MessageStream, MessageVariant
from plait.messages import Message as PlaitMessage
from plait.protocols._a2a_parts import part_of, plain, state_name, text_of

__all__ = ["Remote", "request_text"]

#: The `save_state` key of a remote task waiting for input: `{"task_id", "context_id",
#: "asked"}` (`asked`: what the remote asked, one entry per time it asked).
STATE_KEY = "a2a_task"
_ENDS = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
    TaskState.TASK_STATE_INPUT_REQUIRED,
    TaskState.TASK_STATE_AUTH_REQUIRED,
}
_ASKS = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
_FAILS = {
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


class Remote:
    """A remote A2A agent at `url`: its card (fetched once) and its runs."""

    def __init__(self, url: str, timeout: float, headers: Mapping[str, str]) -> None:
        self.url = url
        self.timeout = timeout
        self.headers = dict(headers)
        self._card: AgentCard | None = None

    def error(self, message: str, name: str | None, **details: Any) -> RemoteAgentError:
        """Return a `RemoteAgentError` about this remote."""
        who = f"remote agent '{name}'" if name else "remote agent"
        return RemoteAgentError(
            f"{who} at {self.url}: {message}", url=self.url, agent_name=name, **details
        )

    def fetch_card_sync(self, name: str | None) -> AgentCard:
        """Fetch and keep the agent card, blocking (at most `timeout` seconds)."""
        where = self.url + AGENT_CARD_WELL_KNOWN_PATH
        try:
            with httpx.Client(timeout=self.timeout, headers=self.headers) as http:
                response = http.get(where)
                response.raise_for_status()
                card = parse_agent_card(response.json())
        except Exception as exc:
            raise self.error(f"cannot read its agent card at {where}: {exc}", name) from exc
        return self._keep(card, name)

    async def card(self, name: str) -> AgentCard:
        """Return the agent card, fetched on first use."""
        if self._card is None:
            try:
                async with self._http() as http:
                    card = await A2ACardResolver(http, self.url).get_agent_card()
            except Exception as exc:
                raise self.error(f"cannot read its agent card: {exc}", name) from exc
            self._keep(card, name)
        assert self._card is not None
        return self._card

    def _keep(self, card: AgentCard, name: str | None) -> AgentCard:
        if not card.supported_interfaces:
            raise self.error("its agent card names no interface to call", name)
        self._card = card
        return card

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), headers=self.headers)

    async def run(
        self, name: str, input: AgentInput, ctx: AgentContext
    ) -> AsyncIterator[AgentEvent]:
        """Run the remote agent on `input`; a failure is the last event."""
        try:
            async for event in self._run(name, input, ctx):
                yield event
        except RemoteAgentError as err:
            yield ctx.event(error=err)

    async def _run(
        self, name: str, input: AgentInput, ctx: AgentContext
    ) -> AsyncIterator[AgentEvent]:
        card = await self.card(name)
        saved = ctx.load_state(STATE_KEY)
        asked: list[Any] = []
        message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex)
        if saved is None:
            message.parts.append(Part(text=request_text(input.messages)))
            if ctx.session_id is not None:
                message.context_id = context_for(self.url, name, ctx.session_id)
        else:
            asked = list(saved["asked"])
            for info in asked[:-1]:
                interrupt(info)  # answered before: returns that answer again
            answer = interrupt(asked[-1])  # pauses until the run is resumed with an answer
            message.task_id, message.context_id = saved["task_id"], saved["context_id"]
            message.parts.append(part_of(answer))
        exchange = _Exchange(self, name)
        streamed = ""
        async with self._http() as http:
            config = ClientConfig(streaming=card.capabilities.streaming, httpx_client=http)
            try:
                client = ClientFactory(config).create(card)
            except Exception as exc:
                raise self.error(f"cannot call it: {exc}", name) from exc
            exchange.open(client.send_message(SendMessageRequest(message=message)))
            try:
                if input.enable_streaming and card.capabilities.streaming:
                    first = await exchange.next_delta()
                    if first is not None:
                        stream = MessageStream(exchange.chunks(first))
                        variant = MessageVariant(is_streaming=True, role="assistant", stream=stream)
                        yield ctx.event(output=AgentOutput(message=variant))
                        streamed = (await stream.collect()).content
                await exchange.finish()
            finally:
                await exchange.close()
        if exchange.state in _ASKS:
            asked.append(exchange.asked())
            ctx.save_state(
                STATE_KEY,
                {"task_id": exchange.task_id, "context_id": exchange.context_id, "asked": asked},
            )
            interrupt(asked[-1])
        ctx.save_state(STATE_KEY, None)
        if exchange.state in _FAILS:
            said = exchange.status_text or "no reason given"
            raise exchange.failure(
                f"its task {exchange.task_id} ended {exchange.state_name}: {said}"
            )
        answer = exchange.answer()
        if not streamed or answer != streamed:
            yield ctx.event(output=AgentOutput(message=_whole(answer)))


def _whole(text: str) -> MessageVariant:
    return MessageVariant(
        is_streaming=False, role="assistant", message=PlaitMessage.assistant(text)
    )


class _Exchange:
    """The events of one message to the remote, read as the run needs them."""

    def __init__(self, remote: Remote, name: str) -> None:
        self._remote, self._name = remote, name
        self._responses: AsyncIterator[StreamResponse] | None = None
        self.task_id: str | None = None
        self.context_id: str | None = None
        self.state: TaskState | None = None
        self.status_text = ""
        self.status_data: list[Any] = []
        self.deltas: list[str] = []
        self.artifacts: dict[str, list[Part]] = {}
        self.streamed: set[str] = set()  # the artifacts whose text came in chunks
        self.done = False

    @property
    def state_name(self) -> str | None:
        """The task's last state as A2A names it."""
        return None if self.state is None else state_name(self.state)

    def failure(self, message: str, exc: BaseException | None = None) -> RemoteAgentError:
        """Return the error of this exchange (with the task's id and state)."""
        err = self._remote.error(message, self._name, task_id=self.task_id, state=self.state_name)
        err.__cause__ = exc
        return err

    def open(self, responses: AsyncIterator[StreamResponse]) -> None:
        """Start reading `responses`."""
        self._responses = responses

    async def next_delta(self) -> str | None:
        """Read events up to the next streamed text; None when the task has ended."""
        assert self._responses is not None
        while not self.done:
            try:
                async with asyncio.timeout(self._remote.timeout):
                    response = await anext(self._responses)
            except StopAsyncIteration:
                self.done = True
                if self.state not in _ENDS:
                    raise self.failure("its answer ended before its task did") from None
                break
            except TimeoutError as exc:
                raise self.failure(
                    f"no answer within {self._remote.timeout:g} s (timeout=)", exc
                ) from exc
            except Exception as exc:
                raise self.failure(f"the call failed: {type(exc).__name__}: {exc}", exc) from exc
            delta = self._take(response)
            if delta:
                self.deltas.append(delta)
                return delta
        return None

    async def chunks(self, first: str) -> AsyncIterator[PlaitMessage]:
        """Yield the streamed text from `first` on, one chunk per update."""
        yield PlaitMessage.assistant(first)
        while (delta := await self.next_delta()) is not None:
            yield PlaitMessage.assistant(delta)

    async def finish(self) -> None:
        """Read the remaining events."""
        while await self.next_delta() is not None:
            pass

    async def close(self) -> None:
        """Close the response stream."""
        aclose = getattr(self._responses, "aclose", None)
        if aclose is not None:
            await aclose()

    def _take(self, response: StreamResponse) -> str:
        """Note one event; return the text it streams ("" for none)."""
        if response.HasField("task"):
            task = response.task
            self.task_id, self.context_id = task.id, task.context_id
            self.artifacts = {a.artifact_id: list(a.parts) for a in task.artifacts}
            return self._status(task.status.state, task.status.message, streams=False)
        if response.HasField("status_update"):
            update = response.status_update
            self.task_id, self.context_id = update.task_id, update.context_id
            return self._status(update.status.state, update.status.message, streams=True)
        if response.HasField("artifact_update"):
            return self._artifact(response.artifact_update)
        if response.HasField("message"):
            reply = response.message
            self.task_id = self.task_id or reply.task_id or None
            self.context_id = reply.context_id or self.context_id
            return self._status(TaskState.TASK_STATE_COMPLETED, reply, streams=False)
        raise self.failure("an event that is no task, status, artifact or message")

    def _artifact(self, update: TaskArtifactUpdateEvent) -> str:
        """Note an artifact's chunk; return its text when it streams (a chunk appended, or
        the first of several: text a server streams as an artifact), else ""."""
        artifact = update.artifact
        parts = self.artifacts.setdefault(artifact.artifact_id, [])
        if not update.append:
            parts.clear()
            self.streamed.discard(artifact.artifact_id)
        parts.extend(artifact.parts)
        whole = not update.append and update.last_chunk
        if whole:
            return ""
        self.streamed.add(artifact.artifact_id)
        return "".join(get_text_parts(artifact.parts))

    def _status(self, state: TaskState, message: Message, *, streams: bool) -> str:
        self.state = state
        text = "\n".join(get_text_parts(message.parts))
        if streams and state == TaskState.TASK_STATE_WORKING:
            return text
        if state in _ENDS:
            self.done = True
            self.status_text = text
            self.status_data = [plain(value) for value in get_data_parts(message.parts)]
        return ""

    def answer(self) -> str:
        """Return the task's answer: its artifacts' text, else its last status message,
        else the text it streamed."""
        texts = [
            _parts_text(parts, "" if key in self.streamed else "\n")
            for key, parts in self.artifacts.items()
        ]
        if any(texts):
            return "\n".join(text for text in texts if text)
        return self.status_text or "".join(self.deltas)

    def asked(self) -> Any:
        """Return what the remote asked: a plait remote's one interrupt info (all its
        interrupts when several), else the status message's text or data."""
        for data in self.status_data:
            pending = data.get("interrupts") if isinstance(data, dict) else None
            if isinstance(pending, list) and pending:
                if len(pending) == 1 and isinstance(pending[0], dict):
                    return pending[0].get("info")
                return {"interrupts": pending}
        if self.status_text:
            return self.status_text
        return self.status_data[0] if self.status_data else None


def _parts_text(parts: Sequence[Part], joint: str) -> str:
    """Return the text of an artifact's parts: its text parts joined by `joint` ("" for the
    chunks of a streamed text), then its data parts as JSON, one a line."""
    text = joint.join(get_text_parts(parts))
    data = [text_of(plain(value)) for value in get_data_parts(parts)]
    return "\n".join([text, *data] if text else data)


def request_text(messages: Sequence[PlaitMessage]) -> str:
    """Return what to send: the trailing user messages, joined by new lines (else the
    last message with text)."""
    trailing: list[str] = []
    for message in reversed(messages):
        if message.role != "user":
            break
        trailing.append(message.content)
    if trailing:
        return "\n".join(reversed(trailing))
    for message in reversed(messages):
        if message.content:
            return message.content
    return ""


def context_for(url: str, name: str, session_id: str) -> str:
    """Return the remote context id of a local session (the same for each of its runs)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{url}#plait:{name}:{session_id}"))
