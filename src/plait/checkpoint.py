"""Checkpoints: the versioned JSON a paused run is saved as, and how a resume is prepared.

A checkpoint holds the run's root input, the history recorded so far, session values and
team state, whether it streamed, every pending interrupt (id, address, info), and what each
part of the run saved along the interrupt paths. It is plain JSON (never pickle) with a
format version; bytes that are not a plait checkpoint are a `CheckpointCorrupt`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from plait._json import load_plain, to_json
from plait.agents.flow import dump_history, load_history
from plait.context import Paused, Resume, RunContext, safe_point_reason
from plait.errors import CheckpointCorrupt, ResumeError, UsageError
from plait.events import InterruptCtx
from plait.messages import Message

__all__ = ["FORMAT", "VERSION", "Checkpoint", "UNSET"]

FORMAT = "plait.checkpoint"
VERSION = 1


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


class Checkpoint:
    """A decoded checkpoint."""

    def __init__(self, data: dict[str, Any], checkpoint_id: str) -> None:
        self.checkpoint_id = checkpoint_id
        self.data = data
        self.interrupts = tuple(
            InterruptCtx(id=i["id"], address=i["address"], info=i.get("info"))
            for i in data["interrupts"]
        )

    @staticmethod
    def encode(
        ctx: RunContext,
        interrupts: tuple[InterruptCtx, ...],
        *,
        agent_name: str,
        session_id: str | None,
        session_turn: Any = None,
        running: bool = False,
    ) -> bytes:
        """Encode a paused run; a value that is not JSON is a `SerializationError` naming it."""
        paused: Paused = ctx._run.paused
        parts = {
            "format": json.dumps(FORMAT),
            "version": str(VERSION),
            "agent": json.dumps(agent_name),
            "session_id": json.dumps(session_id),
            "session_turn": to_json(session_turn, Any, root="session turn"),
            "running": json.dumps(running),
            "streaming": json.dumps(ctx.enable_streaming),
            "root_input": to_json(list(ctx.root_input), list[Message], root="root_input"),
            "history": to_json(dump_history(ctx.history), Any, root="history"),
            "session_values": to_json(ctx.session_values, Any, root="session_values"),
            "state": to_json(ctx.state, Any, root="state"),
            "local": to_json(ctx._run.local, Any, root="local state"),
            "interrupts": to_json(
                [{"id": i.id, "address": i.address, "info": i.info} for i in interrupts],
                Any,
                root="interrupt info",
            ),
            "states": to_json(paused.states, Any, root="agent state"),
            "user_states": to_json(paused.user_states, Any, root="interrupt state"),
            "answers": to_json(paused.answers, Any, root="resume data"),
        }
        return ("{" + ",".join(f'"{k}":{v}' for k, v in parts.items()) + "}").encode()

    @classmethod
    def decode(cls, raw: bytes, checkpoint_id: str) -> Checkpoint:
        """Decode checkpoint bytes, refusing anything that is not a plait checkpoint."""
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CheckpointCorrupt(f"checkpoint '{checkpoint_id}' is not JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CheckpointCorrupt(f"checkpoint '{checkpoint_id}' is not a plait checkpoint")
        if data.get("version") != VERSION:
            raise CheckpointCorrupt(
                f"checkpoint '{checkpoint_id}' has format version {data.get('version')!r}; "
                f"this plait reads version {VERSION}"
            )
        try:
            checkpoint = cls(data, checkpoint_id)
            load_plain(list[Message], data["root_input"])
            load_history(data["history"])
        except Exception as exc:
            raise CheckpointCorrupt(
                f"checkpoint '{checkpoint_id}' is damaged: {type(exc).__name__}: {exc}"
            ) from None
        return checkpoint

    @property
    def pending(self) -> tuple[InterruptCtx, ...]:
        """Return the interrupts waiting for a person (not the runner's own safe points)."""
        return tuple(i for i in self.interrupts if safe_point_reason(i) is None)

    def targets(self, targets: Mapping[str, Any] | None, value: Any) -> dict[str, Any]:
        """Check resume data against the pending interrupts; return {interrupt id: data}."""
        pending = {i.id for i in self.pending}
        if targets is not None and value is not UNSET:
            raise UsageError("resume takes targets= or value=, not both")
        if value is not UNSET:
            if len(pending) != 1:
                raise ResumeError(
                    f"value= resumes exactly one interrupt, but {len(pending)} are pending in "
                    f"checkpoint '{self.checkpoint_id}'; pass targets={{id: data}} instead"
                )
            return {next(iter(pending)): value}
        targets = dict(targets or {})
        unknown = sorted(set(targets) - pending)
        if unknown:
            raise ResumeError(
                f"no pending interrupt {unknown} in checkpoint '{self.checkpoint_id}'; "
                f"pending: {sorted(pending)}"
            )
        return targets

    def restore(self, ctx: RunContext, targets: dict[str, Any]) -> None:
        """Put the saved run back into `ctx` and arm the resume data for `targets`."""
        data = self.data
        ctx.history.extend(load_history(data["history"]))
        ctx.state.update(data["state"])
        ctx._run.local.update(data.get("local") or {})
        answers: dict[str, list[Any]] = {k: list(v) for k, v in data["answers"].items()}
        for interrupt in self.interrupts:
            if interrupt.id in targets:
                answers.setdefault(interrupt.address, []).append(targets[interrupt.id])
        ctx._run.resume = Resume(dict(data["states"]), dict(data["user_states"]), answers)

    @property
    def root_input(self) -> list[Message]:
        """Return the messages the paused run started with."""
        messages: list[Message] = load_plain(list[Message], self.data["root_input"])
        return messages
