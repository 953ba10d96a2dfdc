"""`GET /v1/runs/{id}/turn`: what a paused (or stopped, or running) run's checkpoint holds
of its turn, so a person sees what they are asked about.

The answer has the turn's `request` (the messages the run started with), the `turn` so far
(the messages it added to its session, each with its author: what the session will hold
once the run ends) and, for each pending interrupt, the agents on its path (outermost first)
and the tool call that asked: its `tool`, `call_id` and parsed `arguments` (null when the
interrupt was not asked by a tool, or its call is not in the checkpoint). `id` is the run's
id or the id of its checkpoint; a run with no checkpoint (it completed or failed) is `404`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from plait._util.json import dump_plain
from plait.core.checkpoint import Checkpoint
from plait.errors import CheckpointNotFound
from plait.messages import Message
from plait.server.bodies import SessionMessage, error_responses
from plait.server.users import is_safe_id
from plait.stores.base import GuardedStore

__all__ = ["RunTurn", "turn_router"]


class AskedBy(BaseModel):
    """A pending interrupt with where it was asked: the agents on its path and the tool."""

    interrupt_id: str
    address: str
    info: Any = None
    agents: list[str] = Field(description="The agents on the interrupt's path, outermost first.")
    tool: str | None = Field(default=None, description="The tool that asked, if a tool did.")
    call_id: str | None = None
    arguments: Any = Field(default=None, description="The arguments of that tool call.")


class RunTurn(BaseModel):
    """A run's turn as its checkpoint holds it."""

    run_id: str
    checkpoint_id: str
    agent: str
    session_id: str | None
    request: list[SessionMessage]
    turn: list[SessionMessage]
    interrupts: list[AskedBy]


def _message(author: str, message: Message) -> SessionMessage:
    return SessionMessage.model_validate({**dump_plain(message, Message), "author": author})


def _parts(address: str) -> tuple[list[str], str | None, str | None]:
    """Return the agents of an interrupt's address, and the last tool's name and call id."""
    agents: list[str] = []
    tool = call_id = None
    for part in address.split(";"):
        kind, _, rest = part.partition(":")
        if kind == "agent":
            agents.append(rest)
        elif kind == "tool":
            tool, _, call_id = rest.partition(":")
    return agents, tool, call_id or None


def _calls(value: Any) -> Iterator[dict[str, Any]]:
    """Yield every tool call (`{"id", "name", "arguments"}`) found in `value`."""
    if isinstance(value, dict):
        for call in value.get("tool_calls") or ():
            if isinstance(call, dict) and "id" in call:
                yield call
        for inner in value.values():
            yield from _calls(inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from _calls(inner)


def _arguments(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def describe_turn(run_id: str, checkpoint: Checkpoint) -> RunTurn:
    """Return the turn of `checkpoint`, a checkpoint of run `run_id`."""
    turn = checkpoint.session_turn
    records = [record.model_dump(mode="json") for record in checkpoint.snapshot().records.values()]
    found = [dump_plain(message, Message) for _, message in turn]
    calls = {call["id"]: call for call in _calls([found, records])}
    asked = []
    for pending in checkpoint.interrupts:
        agents, tool, call_id = _parts(pending.address)
        call = calls.get(call_id or "")
        asked.append(
            AskedBy(
                interrupt_id=pending.id,
                address=pending.address,
                info=pending.info,
                agents=agents,
                tool=tool,
                call_id=call_id,
                arguments=None if call is None else _arguments(call.get("arguments")),
            )
        )
    users = [_message("user", message) for message in checkpoint.root_input]
    return RunTurn(
        run_id=run_id,
        checkpoint_id=checkpoint.checkpoint_id,
        agent=checkpoint.agent,
        session_id=checkpoint.session_id,
        request=users,
        turn=[_message(author, message) for author, message in turn],
        interrupts=asked,
    )


def turn_router(caller: Callable[..., Any]) -> APIRouter:
    """Return `GET /v1/runs/{id}/turn`; `caller` is the app's dependency that checks the
    API key."""
    router = APIRouter(tags=["runs"])
    caller_dep: Any = Depends(caller)
    errors = {401: "No valid API key.", 404: "Unknown run, or one with no checkpoint."}

    @router.get(
        "/v1/runs/{run_id}/turn",
        summary="Read a run's turn",
        response_model=RunTurn,
        responses=error_responses(errors, 401, 404),
    )
    async def read_turn(run_id: str, who: Any = caller_dep) -> RunTurn:
        """Return the run's request, its turn so far and, for each pending interrupt, the
        agents on its path and the tool call that asked (from the run's checkpoint)."""
        if not is_safe_id(run_id):
            raise CheckpointNotFound(f"no run '{run_id[:128]}'")
        record = await who.server.runs.record(who.store, run_id)
        checkpoint_id = record.checkpoint_id
        found = None
        if checkpoint_id is not None:
            found = await GuardedStore(who.store).get_checkpoint(checkpoint_id)
        if checkpoint_id is None or found is None:
            raise CheckpointNotFound(f"run '{run_id[:128]}' keeps no checkpoint")
        checkpoint = Checkpoint.decode(found.data, checkpoint_id)
        return describe_turn(record.run_id or run_id, checkpoint)

    return router
