"""AG-UI on plait's server: `POST /agui/{agent}` runs an agent for an AG-UI client.

The request is the `ag-ui-protocol` package's `RunAgentInput`; the answer is a stream of
its events, encoded by its `EventEncoder`. The run is an ordinary run of the server (the
same store, keys and per-user isolation; its summary at `GET /v1/runs/{checkpoint_id}`):

- `threadId` is the session id, so the session keeps the conversation. The run's input is
  the trailing user messages of `messages` (the session already holds the rest); on a
  thread the server does not know yet, it is the whole list. `state` (an object) becomes
  session values over the session's own.
- Events: `RUN_STARTED` (its `metadata` holds the `checkpoint_id`), `STEP_STARTED` /
  `STEP_FINISHED` per agent (its name; an agent run by another, or transferred to, is a
  step inside the step of the agent that called it), `TEXT_MESSAGE_START` / `_CONTENT` /
  `_END` (one content per streamed chunk: the run streams), `TOOL_CALL_START` / `_ARGS` /
  `_END` as the model sends the call and `TOOL_CALL_RESULT` when the tool returns,
  `STATE_SNAPSHOT` of the session values when the run starts, when they change and at the
  end, then `RUN_FINISHED` or `RUN_ERROR`.
- A pause ends with `RUN_FINISHED` whose `outcome` is an interrupt outcome (one AG-UI
  `Interrupt` per plait interrupt, same id) and whose `result` holds the `checkpoint_id` and
  the `interrupts` as the run summary shows them. The next request on the thread continues
  it when it carries answers: `resume` entries (`interruptId` -> `payload`; a cancelled
  entry answers None), or `forwardedProps.resume` = `{"value": v}` or `{"targets": {id: v}}`,
  optionally with the `checkpoint_id` to resume (by default the thread's latest pause).
- `tools` are front-end tools (`plait.protocols._agui_tools`), offered to every
  `ChatModelAgent` of the run besides its own; a call of one pauses the run, and the next
  request's tool message answering that call (its `toolCallId`) resumes it with the result.
  While the thread waits for such a result, a request without one is refused.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    DeveloperMessage,
    Interrupt,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SystemMessage,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Response
from pydantic_core import to_jsonable_python

from plait.agents.options import RunOption
from plait.core.agent import AgentInput
from plait.core.agent_context import AgentContext
from plait.errors import CheckpointNotFound, ResumeError
from plait.events import AgentEvent, InterruptCtx, MessageVariant
from plait.messages import Message, ToolCall
from plait.protocols._agui_tools import (
    FRONTEND_TOOL,
    FrontendTool,
    frontend_tools,
    text_of,
    tool_call_of,
    tool_results,
    tool_text,
    waiting_calls,
)
from plait.server.bodies import ErrorResponse, InterruptOut, RunSummary
from plait.server.caller import CHECKPOINT_HEADER, Caller, CallerDep
from plait.server.limits import ApiError
from plait.server.runs import LiveRun, Relay
from plait.server.sse import EventStream
from plait.server.users import UserStore, id_problem

__all__ = ["AguiRelay", "router"]

_log = logging.getLogger("plait.server")

#: Characters some clients take for line ends; inside JSON strings they are sent escaped.
_ESCAPES = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
_UNSENT = object()

router = APIRouter()


@dataclasses.dataclass(frozen=True, slots=True)
class _Resume:
    """A request's answers to a paused run: `targets`, or `answer` (the one-tuple of a
    `value`), and the checkpoint to resume (None: the thread's latest pause); `answered`
    holds the front-end tool calls the request's tool messages answer."""

    targets: dict[str, Any] | None
    answer: tuple[Any] | None
    checkpoint_id: str | None
    answered: frozenset[str] = frozenset()


def _describe(text: str) -> dict[str, Any]:
    return {"model": ErrorResponse, "description": text}


@router.post(
    "/agui/{agent}",
    summary="Run an agent for an AG-UI client",
    responses={
        200: {
            "description": (
                "`text/event-stream` of AG-UI events (RUN_STARTED first, RUN_FINISHED or "
                f"RUN_ERROR last). The `{CHECKPOINT_HEADER}` header holds the run's id."
            ),
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        400: _describe(
            "No user message to answer, a resume that does not fit, a front-end tool named "
            "like a tool of the agent, or a thread that waits for a front-end tool's result."
        ),
        401: _describe("No valid API key."),
        404: _describe("Unknown agent, or a resumed run that is not found."),
        409: _describe("The paused run was already resumed, or is being resumed."),
        413: _describe("The request body is over the server's limit."),
        422: _describe("The body is not a RunAgentInput plait can run."),
    },
    tags=["ag-ui"],
)
async def run_agui(agent: str, body: RunAgentInput, caller: CallerDep) -> Response:
    """Run `agent` on an AG-UI `RunAgentInput` and stream AG-UI events: `threadId` is the
    session, the new user messages the input, `state` the session values, `tools` front-end
    tools; answers in `resume` (or `forwardedProps.resume`), or tool messages answering the
    front-end tool calls it waits for, continue the thread's paused run."""
    if agent not in caller.server.agents:
        raise ApiError(404, f"no agent '{agent[:128]}'; GET /v1/agents lists them")
    problem = id_problem(body.thread_id)
    if problem is not None:
        raise ApiError(422, f"threadId: {problem}")
    tools = frontend_tools(body.tools or (), caller.server.agents[agent])
    relay = AguiRelay(body.thread_id, body.run_id, caller.store)
    resume = _resume_of(body)
    if resume is None:
        resume = await _tool_results(caller, body)
    if resume is None:
        run = await caller.server.runs.start(
            caller.store,
            agent,
            await _input(body, caller),
            session_id=body.thread_id,
            session_values=_values(body.state),
            streaming=True,
            relay=relay,
            options=[RunOption(extra_tools=tools)] if tools else (),
        )
    else:
        relay.answered = resume.answered
        run = await _resume(caller, agent, body.thread_id, resume, relay, tools)
    return EventStream(run, {CHECKPOINT_HEADER: run.checkpoint_id})


async def _resume(
    caller: Caller,
    agent: str,
    thread_id: str,
    resume: _Resume,
    relay: AguiRelay,
    tools: tuple[FrontendTool, ...],
) -> LiveRun:
    """Resume the thread's paused run (or the one named) with the request's answers (and
    its front-end tools, which must include those of the calls the run waits for)."""
    checkpoint_id = resume.checkpoint_id
    if checkpoint_id is None:
        found = await caller.store.get_record("t", thread_id)
        if found is None:
            raise ResumeError(f"thread '{thread_id}' has no paused run to resume")
        checkpoint_id = found.decode()
    elif id_problem(checkpoint_id) is not None:
        raise ApiError(422, "forwardedProps.resume.checkpoint_id is not a run id")
    previous = await caller.server.runs.summary(caller.store, checkpoint_id)
    if previous.agent != agent or previous.session_id != thread_id:
        raise ResumeError(
            f"run '{checkpoint_id}' is not a run of agent '{agent}' on thread '{thread_id}'"
        )
    waiting = {p.info[FRONTEND_TOOL]["tool"] for p in waiting_calls(previous.interrupts).values()}
    missing = sorted(waiting - {tool.name for tool in tools})
    if previous.status == "paused" and missing:
        raise ResumeError(
            f"run '{checkpoint_id}' waits for calls of the front-end tools {missing}, which "
            "the request's tools do not include: send them in tools again"
        )
    options = [RunOption(extra_tools=tools)] if tools else ()
    return await caller.server.runs.resume(
        caller.store, checkpoint_id, resume.targets, resume.answer, relay=relay, options=options
    )


async def _tool_results(caller: Caller, body: RunAgentInput) -> _Resume | None:
    """Return the answers a request's tool messages give to the front-end tool calls its
    thread's latest pause waits for; None when it waits for none.

    Raises:
        ResumeError: The request answers none of them, or has user messages after its
            answers (which the resumed run would not read).
    """
    paused = await _latest_pause(caller, body.thread_id)
    waiting = waiting_calls(paused.interrupts) if paused is not None else {}
    if paused is None or not waiting:
        return None
    results = tool_results(body.messages, waiting, body.thread_id)
    targets = {waiting[call_id].id: text for call_id, text in results.items()}
    return _Resume(targets, None, paused.checkpoint_id, frozenset(results))


async def _latest_pause(caller: Caller, thread_id: str) -> RunSummary | None:
    """Return the summary of the thread's latest pause if it still waits, else None."""
    found = await caller.store.get_record("t", thread_id)
    if found is None:
        return None
    try:
        summary = await caller.server.runs.summary(caller.store, found.decode())
    except CheckpointNotFound:
        return None
    return summary if summary.status == "paused" else None


def _resume_of(body: RunAgentInput) -> _Resume | None:
    """Return the request's answers to a paused run, or None when it starts a new run."""
    props = body.forwarded_props
    given = props.get("resume") if isinstance(props, dict) else None
    if body.resume:
        if given is not None:
            raise ApiError(422, "give resume entries or forwardedProps.resume, not both")
        answers = {
            e.interrupt_id: e.payload if e.status == "resolved" else None for e in body.resume
        }
        return _Resume(answers, None, None)
    if given is None:
        return None
    if not isinstance(given, dict) or not set(given) <= {"value", "targets", "checkpoint_id"}:
        raise ApiError(
            422,
            'forwardedProps.resume is {"value": v} or {"targets": {id: v}}, and an '
            'optional "checkpoint_id"',
        )
    if "value" in given and "targets" in given:
        raise ApiError(422, "forwardedProps.resume gives targets or value, not both")
    targets = given.get("targets")
    if targets is not None and not isinstance(targets, dict):
        raise ApiError(422, "forwardedProps.resume.targets maps interrupt ids to answers")
    checkpoint_id = given.get("checkpoint_id")
    if checkpoint_id is not None and not isinstance(checkpoint_id, str):
        raise ApiError(422, "forwardedProps.resume.checkpoint_id is a string")
    answer = (given["value"],) if "value" in given else None
    return _Resume(targets, answer, checkpoint_id)


def _values(state: Any) -> dict[str, Any] | None:
    """Return the session values a request's `state` gives (an object, or nothing)."""
    if state is None:
        return None
    if not isinstance(state, dict):
        raise ApiError(422, "state must be an object (the session values)")
    return state


async def _input(body: RunAgentInput, caller: Caller) -> list[Message]:
    """Return the run's input: the trailing user messages, or every message of a thread
    the server does not know yet."""
    messages = [m for m in (_message(m) for m in body.messages) if m is not None]
    if not messages or messages[-1].role != "user":
        raise ApiError(400, "messages must end with a user message to answer")
    if await caller.store.get_session(body.thread_id) is None:
        return messages
    start = len(messages)
    while start > 0 and messages[start - 1].role == "user":
        start -= 1
    return messages[start:]


def _message(message: Any) -> Message | None:
    """Return the plait message of an AG-UI message (None for activity and reasoning)."""
    if isinstance(message, UserMessage):
        return Message.user(text_of(message.content, "a user message"))
    if isinstance(message, SystemMessage | DeveloperMessage):
        return Message.system(message.content)
    if isinstance(message, AssistantMessage):
        calls = tuple(
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
            for c in message.tool_calls or ()
        )
        return Message.assistant(message.content or "", calls)
    if isinstance(message, ToolMessage):
        return Message.tool(tool_text(message), message.tool_call_id)
    return None


class AguiRelay(Relay):
    """Send a run's events as AG-UI events (see the module's docstring)."""

    def __init__(self, thread_id: str, run_id: str, store: UserStore) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.store = store
        self._encoder = EventEncoder()
        self._steps: list[tuple[str, ...]] = []  # the open steps' run paths, outermost first
        self._values: dict[str, Any] | None = None  # the run's live session values
        self._shown: Any = _UNSENT  # the values last sent
        self.answered: frozenset[str] = frozenset()  # tool calls whose result the client sent

    def attach(self, run: LiveRun) -> None:
        """Serve `run`: the stream opens with `RUN_STARTED`."""
        super().attach(run)
        self._send(
            RunStartedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                metadata={"checkpoint_id": run.checkpoint_id},
            )
        )
        self.opening = run.queue.qsize()  # it may wait for the run's first event

    def _send(self, event: BaseEvent) -> None:
        self.put(self._encode(event))

    def _encode(self, event: BaseEvent) -> bytes:
        return self._encoder.encode(event).translate(_ESCAPES).encode()

    async def before_run(self, ctx: AgentContext, input: AgentInput) -> None:
        """Watch the run's session values; send them as the run starts."""
        self._values = ctx.session_values
        self._snapshot()

    async def on_pause(
        self, ctx: AgentContext, interrupts: tuple[InterruptCtx, ...], checkpoint_id: str
    ) -> None:
        """Remember the pause as the thread's latest, for the request that resumes it."""
        try:
            await self.store.put_record("t", self.thread_id, checkpoint_id.encode())
        except Exception as exc:  # the run still pauses; resume it by checkpoint_id
            _log.warning("could not record the pause of thread %s: %s", self.thread_id, exc)

    async def relay(self, event: AgentEvent) -> None:
        """Send the AG-UI events of `event`: steps, text, tool calls, results, state."""
        self._enter(event.run_path)
        variant = event.message
        if variant is not None:
            if variant.role == "tool":
                await self._tool_result(variant)
            else:
                await self._assistant(variant)
        self._snapshot()

    def _enter(self, path: tuple[str, ...]) -> None:
        """Finish the steps `path` is not inside of; start those it enters."""
        steps = self._steps
        while steps and path[: len(steps[-1])] != steps[-1]:
            self._send(StepFinishedEvent(step_name=steps.pop()[-1]))
        for n in range(len(steps[-1]) + 1 if steps else 1, len(path) + 1):
            steps.append(path[:n])
            self._send(StepStartedEvent(step_name=path[n - 1]))

    async def _assistant(self, variant: MessageVariant) -> None:
        """Send a model's message: its text as it streams, its tool calls as they come."""
        reply = _Reply(self, uuid.uuid4().hex)
        whole: Message | None = variant.message
        if variant.stream is not None:
            try:
                async for chunk in variant.stream:
                    reply.text(chunk.content)
                    for position, call in enumerate(chunk.tool_calls):
                        reply.call_chunk(call, position)
                whole = await variant.stream.collect()
            except Exception:  # the run reports the model's error itself
                whole = None
        elif whole is not None:
            reply.text(whole.content)
        reply.end(whole)

    async def _tool_result(self, variant: MessageVariant) -> None:
        try:
            message = await variant.get_message()
        except Exception:  # the run reports the error itself
            return
        if message.tool_call_id is None or message.tool_call_id in self.answered:
            return  # the client has the result of a front-end call it answered
        self._send(
            ToolCallResultEvent(
                message_id=uuid.uuid4().hex,
                tool_call_id=message.tool_call_id,
                content=message.content,
                role="tool",
            )
        )

    def _snapshot(self, always: bool = False) -> None:
        """Send the session values if they changed since last sent (or `always`)."""
        if self._values is None:
            return
        now = to_jsonable_python(self._values, fallback=repr)
        if always or now != self._shown:
            self._shown = now
            self._send(StateSnapshotEvent(snapshot=now))

    def closing(self, summary: RunSummary) -> bytes:
        """Finish the open steps; then the state and `RUN_FINISHED`, or `RUN_ERROR`."""
        events: list[BaseEvent] = [
            StepFinishedEvent(step_name=path[-1]) for path in reversed(self._steps)
        ]
        self._steps.clear()
        if summary.status == "failed":
            error = summary.error
            events.append(
                RunErrorEvent(
                    message=error.message if error else "the run failed",
                    code=error.type if error else None,
                )
            )
            return b"".join(self._encode(e) for e in events)
        if self._values is not None:
            self._shown = to_jsonable_python(self._values, fallback=repr)
            events.append(StateSnapshotEvent(snapshot=self._shown))
        events.append(self._finished(summary))
        return b"".join(self._encode(e) for e in events)

    def _finished(self, summary: RunSummary) -> RunFinishedEvent:
        """Return the `RUN_FINISHED` of a run that completed, paused or was cancelled."""
        usage = summary.usage
        tokens = [
            TokenUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                total_tokens=usage.input_tokens + usage.output_tokens,
            )
        ]
        outcome: Any
        if summary.status == "paused":
            result: Any = {
                "checkpoint_id": summary.checkpoint_id,
                "interrupts": [i.model_dump(mode="json") for i in summary.interrupts],
            }
            outcome = RunFinishedInterruptOutcome(
                interrupts=[_interrupt(i) for i in summary.interrupts]
            )
        elif summary.status == "cancelled":
            result = {"checkpoint_id": summary.checkpoint_id}
            outcome = RunFinishedCancelledOutcome()
        else:
            result, outcome = summary.final_output, RunFinishedSuccessOutcome()
        return RunFinishedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            result=result,
            outcome=outcome,
            usage=tokens,
        )


def _interrupt(pending: InterruptOut) -> Interrupt:
    """Return the AG-UI interrupt of a pending plait interrupt (the same id)."""
    info = pending.info
    return Interrupt(
        id=pending.id,
        reason="input_required",
        message=info if isinstance(info, str) else None,
        tool_call_id=tool_call_of(pending.address),
        metadata={"info": info, "address": pending.address},
    )


class _Reply:
    """One model message on its way out: a text message started at its first text, and
    its tool calls, each started once its id and name are known."""

    def __init__(self, relay: AguiRelay, message_id: str) -> None:
        self.relay = relay
        self.message_id = message_id
        self.started = False
        self.calls: dict[int, str] = {}  # index -> id of the calls started
        self.waiting: dict[int, str] = {}  # index -> arguments of calls not started yet

    def text(self, delta: str) -> None:
        """Send a piece of the message's text."""
        if not delta:
            return
        if not self.started:
            self.started = True
            self.relay._send(TextMessageStartEvent(message_id=self.message_id, role="assistant"))
        self.relay._send(TextMessageContentEvent(message_id=self.message_id, delta=delta))

    def call_chunk(self, call: ToolCall, position: int) -> None:
        """Send a piece of a tool call (chunks of one call share its index)."""
        index = call.index if call.index is not None else position
        started = self.calls.get(index)
        if started is not None:
            if call.arguments:
                self.relay._send(ToolCallArgsEvent(tool_call_id=started, delta=call.arguments))
            return
        arguments = self.waiting.pop(index, "") + call.arguments
        if not (call.id and call.name):
            self.waiting[index] = arguments
            return
        self._start(index, call.id, call.name)
        if arguments:
            self.relay._send(ToolCallArgsEvent(tool_call_id=call.id, delta=arguments))

    def _start(self, index: int, call_id: str, name: str) -> None:
        self.calls[index] = call_id
        self.relay._send(
            ToolCallStartEvent(
                tool_call_id=call_id,
                tool_call_name=name,
                parent_message_id=self.message_id,
            )
        )

    def end(self, whole: Message | None) -> None:
        """End the text and the calls; send whole the calls `whole` has that were not sent."""
        if self.started:
            self.relay._send(TextMessageEndEvent(message_id=self.message_id))
        for position, call in enumerate(whole.tool_calls if whole is not None else ()):
            index = call.index if call.index is not None else position
            if index in self.calls:
                continue
            self._start(index, call.id, call.name)
            if call.arguments:
                self.relay._send(ToolCallArgsEvent(tool_call_id=call.id, delta=call.arguments))
        for call_id in self.calls.values():
            self.relay._send(ToolCallEndEvent(tool_call_id=call_id))
