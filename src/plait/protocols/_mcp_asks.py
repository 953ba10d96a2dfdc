"""What an MCP server asks of `MCPToolset` during a tool call: sampling and elicitation.

A server may ask the client, while one of its tools runs, for a model's answer
(`sampling/createMessage`) or for input from a person (`elicitation/create`). With the
2025-11-25 protocol these are requests of their own, sent mid-call; with 2026-07-28 the
call answers "input required" and is made again with the answers (the SDK drives that
round trip). Either way the question reaches the callbacks here, which hand it to the tool
call it belongs to (`Call`): its task answers it, in the run's context.

- Sampling is answered with the model of the agent whose tool call it is (`ctx.model`), its
  usage counted in the run's (`ctx.record_model_call`); the call goes through the run's
  `wrap_model` hooks, so a cassette records and replays it.
- Elicitation, when the toolset is opened with `elicitation="interrupt"`, pauses the run at
  the tool call (`ctx.interrupt`), its info `{"elicitation": {...}}` holding the server's
  message and requested schema. The MCP session does not outlive a pause (a run may resume
  in another process), so when the run resumes the tool call is made again, from its start,
  and the server's question is answered with the resume value: the content (a JSON object),
  or None to decline. An answer that does not fit the schema asks again, saying why.

Which call a question belongs to: with 2026-07-28 it comes inside the call's own result
(`CURRENT_CALL`, a context variable of the call's task, names it); a 2025-11-25 request
names no call, so it goes to the one call in flight on the session (a session that may
elicit makes its calls one at a time for that reason).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from plait.core.agent_context import AgentContext, HookContext
from plait.messages import Message

if TYPE_CHECKING:
    import mcp_types
    from mcp.client.session import ElicitationFnT, SamplingFnT

__all__ = ["CURRENT_CALL", "Call", "ask_callbacks", "content_problem"]

_T = TypeVar("_T")

#: The tool call in flight in this task (and the tasks it starts), if any.
CURRENT_CALL: contextvars.ContextVar[Call | None] = contextvars.ContextVar(
    "plait_mcp_call", default=None
)


@dataclasses.dataclass(eq=False)
class Call:
    """One tool call in flight on an MCP session, and the questions its server asks during
    it: the callbacks `ask`, the call's task answers (`run`)."""

    ctx: AgentContext
    _: dataclasses.KW_ONLY
    server: str
    tool: str
    arguments: dict[str, Any]
    elicitation: bool
    _asks: list[tuple[Any, asyncio.Future[Any]]] = dataclasses.field(
        default_factory=list, init=False
    )
    _wake: asyncio.Future[None] | None = dataclasses.field(default=None, init=False)
    _ended: bool = dataclasses.field(default=False, init=False)

    @property
    def model(self) -> object:
        """The model of the agent making this call (None: not a model's agent)."""
        return self.ctx.model if isinstance(self.ctx, HookContext) else None

    async def ask(self, params: Any) -> Any:
        """Hand a server's question to the call's task and return its answer (an error,
        when the call ends without answering it)."""
        if self._ended:
            return _refused("the tool call has ended")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._asks.append((params, future))
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
        return await future

    async def run(self, work: Awaitable[_T]) -> _T:
        """Await `work` (the call), answering the questions asked meanwhile; a pause or any
        error while answering ends the call (the server is told the question is
        withdrawn)."""
        task = asyncio.ensure_future(work)
        try:
            while True:
                self._wake = asyncio.get_running_loop().create_future()
                if not self._asks:
                    await asyncio.wait((task, self._wake), return_when=asyncio.FIRST_COMPLETED)
                while self._asks and not task.done():
                    params, future = self._asks[0]
                    answer = await self._answer(params)  # a pause leaves it asked
                    self._asks.pop(0)
                    if not future.done():
                        future.set_result(answer)
                if task.done():
                    return task.result()
        finally:
            self._ended, self._wake = True, None
            try:
                if not task.done():  # the server sees the call cancelled, then the refusal
                    task.cancel()
                    await asyncio.wait((task,))
                if task.done() and not task.cancelled():
                    task.exception()  # retrieved: the caller has what it needs
            finally:
                for _, future in self._asks:
                    if not future.done():
                        future.set_result(_refused("the tool call ended before answering"))
                self._asks.clear()

    async def _answer(self, params: Any) -> Any:
        """Answer one question of the server, in the call's task."""
        import mcp_types

        ctx = self.ctx
        if not isinstance(ctx, HookContext):
            return _refused("the tool call is not made inside a plait run")
        if isinstance(params, mcp_types.CreateMessageRequestParams):
            return await _sample(ctx, params)
        return self._elicit(ctx, params)

    def _elicit(self, ctx: HookContext, params: Any) -> Any:
        """Pause the run with the server's question, or answer it with the resume value."""
        import mcp_types

        url = isinstance(params, mcp_types.ElicitRequestURLParams)
        asked: dict[str, Any] = {
            "server": self.server,
            "tool": self.tool,
            "arguments": self.arguments,
            "mode": "url" if url else "form",
            "message": params.message,
        }
        if url:
            asked["url"] = params.url
        else:
            asked["requested_schema"] = params.requested_schema
        problem: str | None = None
        while True:
            info = {"elicitation": asked if problem is None else {**asked, "problem": problem}}
            value = ctx.interrupt(info)
            if value is None:
                return mcp_types.ElicitResult(action="decline")
            if url:
                return mcp_types.ElicitResult(action="accept")
            problem = content_problem(value, params.requested_schema)
            if problem is None:
                return mcp_types.ElicitResult(action="accept", content=value)


def ask_callbacks(find: Callable[[str], Call | None]) -> tuple[SamplingFnT, ElicitationFnT]:
    """Return the SDK's sampling and elicitation callbacks of one session; `find(kind)`
    names the call a 2025-11-25 request belongs to (None: it cannot be told)."""

    async def sampling(context: Any, params: mcp_types.CreateMessageRequestParams) -> Any:
        call = CURRENT_CALL.get() or find("sampling")
        if call is None:
            return _refused("no tool call of a plait run is waiting on this server")
        return await call.ask(params)

    async def elicitation(context: Any, params: Any) -> Any:
        call = CURRENT_CALL.get() or find("elicitation")
        if call is None or not call.elicitation:
            return _refused("no tool call of a plait run is waiting on this server")
        return await call.ask(params)

    return sampling, elicitation


async def _sample(ctx: HookContext, params: mcp_types.CreateMessageRequestParams) -> Any:
    """Answer a sampling request with the agent's model; its usage counts in the run's."""
    import mcp_types

    if ctx.model is None:
        return _refused("the agent making this tool call has no model")
    model = ctx.side_model(ctx.model)  # through the run's wrap_model hooks (a cassette)
    messages = _messages(params)
    if isinstance(messages, str):
        return _refused(messages)
    options: dict[str, Any] = {"max_tokens": params.max_tokens}
    if params.temperature is not None:
        options["temperature"] = params.temperature
    try:
        reply = await model.generate(messages, **options)
    except Exception as exc:
        return _refused(f"the agent's model failed: {type(exc).__name__}: {exc}")
    if not isinstance(reply, Message):
        return _refused(f"the agent's model answered {type(reply).__name__}, not a Message")
    ctx.record_model_call(reply.usage)
    return mcp_types.CreateMessageResult(
        role="assistant",
        content=mcp_types.TextContent(type="text", text=reply.content),
        model=_model_name(model),
        stop_reason="endTurn",
    )


def _messages(params: mcp_types.CreateMessageRequestParams) -> list[Message] | str:
    """Return the request as plait messages, or what in it cannot be answered."""
    if params.tools:
        return "this client answers sampling without tools"
    messages = [Message.system(params.system_prompt)] if params.system_prompt else []
    for sampled in params.messages:
        texts: list[str] = []
        for block in sampled.content_as_list:
            if block.type != "text":
                return f"this client answers sampling of text only, not of {block.type}"
            texts.append(block.text)
        text = "\n".join(texts)
        messages.append(Message.user(text) if sampled.role == "user" else Message.assistant(text))
    return messages


def _model_name(model: object) -> str:
    """The model's name (its `model` or `name` attribute), else its class name."""
    for attribute in ("model", "model_name", "name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def _refused(why: str) -> Any:
    """The answer to a question the client cannot answer: a JSON-RPC error saying why."""
    import mcp_types

    return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=why)


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
}


def content_problem(value: object, schema: dict[str, Any]) -> str | None:
    """Say why `value` is not the content a form elicitation's schema asks for (None: it
    is): a JSON object of the schema's properties, required ones present, each of its
    type (a string, number, integer, boolean or list of strings), within its choices."""
    if not isinstance(value, dict):
        return f"the answer is a JSON object of the fields asked for, not {type(value).__name__}"
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            return f"the field {name!r} is required"
    for name, field in value.items():
        spec = properties.get(name)
        if not isinstance(spec, dict):
            return f"the form has no field {name!r}"
        if field is None:
            continue
        kind = spec.get("type")
        expected = _TYPES.get(kind) if isinstance(kind, str) else None
        if expected is not None and (
            not isinstance(field, expected) or (isinstance(field, bool) and kind != "boolean")
        ):
            return f"the field {name!r} is a {kind}, not {type(field).__name__}"
        choices = _choices(spec.get("items") if kind == "array" else spec)
        picked = field if isinstance(field, list) else [field]
        if any(not isinstance(p, str) for p in picked) and kind == "array":
            return f"the field {name!r} is a list of strings"
        if choices is not None and any(p not in choices for p in picked):
            return f"the field {name!r} takes one of {sorted(choices)}"
    return None


def _choices(spec: object) -> set[Any] | None:
    """The values an enumeration field allows (`enum`, or `oneOf`/`anyOf` consts)."""
    if not isinstance(spec, dict):
        return None
    if isinstance(spec.get("enum"), list):
        return set(spec["enum"])
    for key in ("oneOf", "anyOf"):
        options = spec.get(key)
        if isinstance(options, list):
            return {o.get("const") for o in options if isinstance(o, dict)}
    return None
