"""`runner.approvals`: standing rules, the audit log and the inbox; and the check of the
answers a resume gives to approvals and unknown outcomes, made before the checkpoint is
claimed (a wrong answer leaves it pending).

An approval's answer is `{"approved": bool, "fingerprint": str, "comment": str | None}`;
its fingerprint must be the one the question showed (it binds the answer to the tool and
its exact arguments), unless the question expired (then its default applies, whatever the
answer). An unknown outcome's answer is `{"outcome": "done", "result": value}`,
`{"outcome": "retry"}` or `{"outcome": "skip", "message": str}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from plait.errors import ResumeError, UsageError
from plait.events import InterruptCtx
from plait.stores.base import check_id
from plait.stores.journal import EffectStore, edit_rules, read_audit, read_inbox, read_record
from plait.stores.journal import rules_id as _rules_id
from plait.tools.effects import APPROVAL, UNKNOWN_OUTCOME

__all__ = ["Approvals", "check_answers", "check_user"]

_INBOX_FIELDS = (
    "checkpoint_id",
    "interrupt_id",
    "agent",
    "tool",
    "arguments",
    "fingerprint",
    "expires_at",
    "kind",
)


class Approvals:
    """The approvals of the runs kept in one store: standing rules per user and tool, the
    audit log of every decision, and the inbox of open questions (`runner.approvals`)."""

    def __init__(self, store: EffectStore) -> None:
        self._store = store

    async def allow(self, user: str, tool: str) -> None:
        """Approve `user`'s later calls of `tool` without a pause (a standing rule)."""
        await edit_rules(self._store, _name(user, "user"), _name(tool, "tool"), True)

    async def revoke(self, user: str, tool: str) -> None:
        """Take back `user`'s standing rule for `tool` (its calls ask again)."""
        await edit_rules(self._store, _name(user, "user"), _name(tool, "tool"), False)

    async def rules(self, user: str) -> list[str]:
        """Return the tools `user` approved for good."""
        document, _ = await read_record(self._store, _rules_id(_name(user, "user")))
        return list(document.get("tools", []))

    async def audit(self, limit: int = 100) -> list[dict[str, Any]]:
        """Return the last `limit` decisions, newest first: `{"at", "checkpoint_id",
        "interrupt_id", "tool", "fingerprint", "arguments", "decision", "approver", "via"}`."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError(f"limit must be a positive int, got {limit!r}")
        return await read_audit(self._store, limit)

    async def pending(self) -> list[dict[str, Any]]:
        """Return the open questions (approvals and unknown outcomes) of paused runs,
        oldest first: `{"checkpoint_id", "interrupt_id", "agent", "tool", "arguments",
        "fingerprint", "expires_at", "kind"}`."""
        return [{k: item.get(k) for k in _INBOX_FIELDS} for item in await read_inbox(self._store)]


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or "/" in value or len(value) > 128:
        raise UsageError(f"{what} must be a name of 1 to 128 characters without '/': {value!r}")
    return value


def check_user(value: object, what: str) -> str:
    """Return `value` if it is a user id: a str of 1 to 128 characters without "/" that
    every store can hold.

    Raises:
        UsageError: It is not.
    """
    if not isinstance(value, str) or not 0 < len(value) <= 128 or "/" in value:
        raise UsageError(f"{what} must be a user id of 1 to 128 characters without '/'")
    check_id(value, what)
    return value


def check_answers(
    interrupts: tuple[InterruptCtx, ...],
    states: Mapping[str, Any],
    by_id: Mapping[str, Any],
    now: datetime,
) -> None:
    """Refuse answers that do not fit the approvals and unknown outcomes they answer.

    Raises:
        ResumeError: An approval's answer is not `{"approved": bool, "fingerprint": str,
            "comment": str | None}` with the question's fingerprint (and it has not expired),
            or an unknown outcome's is not done (with a result), retry or skip (with a
            message).
    """
    for interrupt in interrupts:
        if interrupt.id not in by_id:
            continue
        state = states.get(interrupt.address)
        kind = state.get("kind") if isinstance(state, dict) else None
        answer = by_id[interrupt.id]
        if kind == APPROVAL:
            _check_approval(interrupt, state, answer, now)
        elif kind == UNKNOWN_OUTCOME:
            _check_outcome(interrupt, answer)


def _check_approval(interrupt: InterruptCtx, state: Any, answer: Any, now: datetime) -> None:
    expires_at = state.get("expires_at")
    if expires_at is not None and now >= datetime.fromisoformat(expires_at):
        return  # its default applies, whatever the answer
    where = f"interrupt '{interrupt.id}' (an approval)"
    if not isinstance(answer, Mapping):
        raise ResumeError(
            f"{where} takes {{'approved': bool, 'fingerprint': str, 'comment': str | None}}, "
            f"got {type(answer).__name__}"
        )
    extra = set(answer) - {"approved", "fingerprint", "comment"}
    if extra:
        raise ResumeError(f"{where}: unknown fields {sorted(extra)}")
    if not isinstance(answer.get("approved"), bool):
        raise ResumeError(f"{where}: 'approved' must be true or false")
    comment = answer.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise ResumeError(f"{where}: 'comment' must be a string or null")
    if answer.get("fingerprint") != state.get("fingerprint"):
        raise ResumeError(
            f"{where}: the fingerprint is missing or differs from the question's; the "
            "answer must approve exactly the tool and arguments it was shown"
        )


def _check_outcome(interrupt: InterruptCtx, answer: Any) -> None:
    where = f"interrupt '{interrupt.id}' (an unknown outcome)"
    rule = (
        "{'outcome': 'done', 'result': value}, {'outcome': 'retry'} or "
        "{'outcome': 'skip', 'message': str}"
    )
    outcome = answer.get("outcome") if isinstance(answer, Mapping) else None
    if outcome == "done" and "result" in answer and set(answer) <= {"outcome", "result"}:
        return
    if outcome == "retry" and set(answer) == {"outcome"}:
        return
    if outcome == "skip" and isinstance(answer.get("message"), str):
        if set(answer) == {"outcome", "message"}:
            return
    raise ResumeError(f"{where} takes {rule}, got {answer!r:.200}")
