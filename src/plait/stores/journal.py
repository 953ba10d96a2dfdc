"""The records of effects and approvals in a store: the journal of tool calls, the audit log,
standing rules and the inbox of open questions.

They are session records of the run's store (so every store keeps them, with its
compare-and-set, `put_session(..., expected_version=...)`), under ids that start with
`plait.effects/` (a session id of the HTTP API never holds a "/", so none can collide):

- `plait.effects/call/<key>`: one tool call, by its idempotency key: its approval decision
  and, for a `"once"` tool, "started" (with `started_at`), "finished" (with `result`) or
  "failed" (with `error`). Written by compare-and-set, with the run's checkpoint ttl; one
  that is not such an entry is refused as damaged (`read_entry`), never taken as "not
  started".
- `plait.effects/audit` (`{"page": n}`) and `plait.effects/audit/<n>` (`{"entries": [...]}`,
  at most `PAGE` each, oldest first): the audit log, appended by compare-and-set, never
  expiring, never edited.
- `plait.effects/rules/<user>` (`{"tools": [...]}`): the tools `user` approved for good.
- `plait.effects/inbox` (`{"items": [...]}`): the questions runs paused on, oldest first. A
  question leaves it when its answer is applied, and the questions of a resumed checkpoint
  that pauses again are replaced by the new pause's in the same write, so it holds the open
  questions only; an item whose checkpoint is no longer pending (expired, or gone on without
  an answer) is dropped when the inbox is read.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
from collections.abc import Callable, Collection
from typing import Any, Protocol

from plait.errors import CheckpointCorrupt, SessionConflict, StoreError
from plait.stores.base import CheckpointRecord, SessionStore

__all__ = [
    "INBOX",
    "PAGE",
    "PREFIX",
    "EffectStore",
    "add_inbox",
    "append_audit",
    "change",
    "drop_inbox",
    "edit_rules",
    "entry_id",
    "has_rule",
    "put_new",
    "read_audit",
    "read_entry",
    "read_inbox",
    "read_record",
    "rules_id",
]

PREFIX = "plait.effects/"
INBOX = f"{PREFIX}inbox"
AUDIT = f"{PREFIX}audit"
#: Audit entries per record of the log.
PAGE = 64
_ATTEMPTS = 50


class EffectStore(SessionStore, Protocol):
    """What the records need of a store: sessions with compare-and-set, and checkpoints
    read back (the inbox keeps only questions of pending checkpoints)."""

    async def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord | None:
        """Return the checkpoint, or None."""
        ...


def entry_id(key: str) -> str:
    """Return the id of the journal entry of the tool call with idempotency key `key`."""
    return f"{PREFIX}call/{key}"


def rules_id(user: str) -> str:
    """Return the id of the standing rules of `user`."""
    return f"{PREFIX}rules/{user}"


async def read_record(store: EffectStore, record_id: str) -> tuple[dict[str, Any], int]:
    """Return a record's JSON object and version ({} and 0 when there is none)."""
    found = await store.get_session_record(record_id)
    if found is None:
        return {}, 0
    document = json.loads(found.data)
    return (document if isinstance(document, dict) else {}), found.version


#: The states of a journal entry: None (not started, or paused by the tool itself) and
#: the fields each of the others needs, with their type.
_STATES: dict[str | None, tuple[str, type] | None] = {
    None: None,
    "started": None,
    "finished": ("result", str),
    "failed": ("error", str),
}
_DECISIONS = ("approved", "rejected")


async def read_entry(store: EffectStore, key: str) -> tuple[dict[str, Any], int]:
    """Return the journal entry of the call with idempotency key `key` and its version
    ({} and 0 when there is none).

    Raises:
        CheckpointCorrupt: The stored entry is not one plait wrote (not JSON, not an object,
            an unknown state, a state without its field, an approval without a decision):
            whether the call ran is unknown, so it must not be taken as not started.
    """
    found = await store.get_session_record(entry_id(key))
    if found is None:
        return {}, 0
    document: Any = None
    try:
        document = json.loads(found.data)
        problem = _entry_problem(document)
    except ValueError:  # not UTF-8, or not JSON
        problem = "not JSON"
    if problem is not None:
        raise CheckpointCorrupt(
            f"the journal entry '{entry_id(key)}' of the tool call with idempotency key "
            f"'{key}' is damaged ({problem}); the call is not run, since it may have run "
            "already: repair or delete the entry, then resume the run",
            key=key,
            record_id=entry_id(key),
        )
    return document, found.version


def _entry_problem(document: Any) -> str | None:
    """Return what makes `document` no journal entry, or None when it is one."""
    if not isinstance(document, dict):
        return f"a JSON {type(document).__name__}, not an object"
    state = document.get("state")
    if not isinstance(state, str | None) or state not in _STATES:
        return f"unknown state {state!r:.80}"
    need = _STATES[state]
    if need is not None and not isinstance(document.get(need[0]), need[1]):
        return f"state {state!r} without a text '{need[0]}'"
    approval = document.get("approval")
    if approval is not None and (
        not isinstance(approval, dict) or approval.get("decision") not in _DECISIONS
    ):
        return "an approval without a decision"
    return None


def _encode(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


async def change(
    store: EffectStore,
    record_id: str,
    edit: Callable[[dict[str, Any]], dict[str, Any] | None],
    *,
    ttl: float | None = None,
) -> dict[str, Any]:
    """Apply `edit` to a record by compare-and-set, retried on conflict; return the record
    as written (or as read, when `edit` returns None: nothing to write).

    Raises:
        StoreError: The record kept changing under this process.
    """
    for attempt in range(_ATTEMPTS):
        document, version = await read_record(store, record_id)
        edited = edit(document)
        if edited is None:
            return document
        try:
            await store.put_session(record_id, _encode(edited), ttl=ttl, expected_version=version)
        except SessionConflict:
            await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
            continue
        return edited
    raise StoreError(
        f"the record '{record_id}' kept changing under this process",
        operation="writing an effects record",
    )


async def put_new(
    store: EffectStore, record_id: str, document: dict[str, Any], version: int, ttl: float | None
) -> int | None:
    """Write `document` over the record at `version` (0: none yet); None when another
    writer changed it first."""
    try:
        return await store.put_session(
            record_id, _encode(document), ttl=ttl, expected_version=version
        )
    except SessionConflict:
        return None


async def append_audit(store: EffectStore, entry: dict[str, Any]) -> None:
    """Append `entry` to the audit log (a new page once the last one holds `PAGE`)."""
    head, _ = await read_record(store, AUDIT)
    page = int(head.get("page", 0))
    while not await _append_to(store, page, entry):
        page += 1
        await change(store, AUDIT, functools.partial(_move_head, page))


async def _append_to(store: EffectStore, page: int, entry: dict[str, Any]) -> bool:
    """Append `entry` to audit page `page`; False when that page is full."""
    full = False

    def add(document: dict[str, Any]) -> dict[str, Any] | None:
        nonlocal full
        entries = list(document.get("entries", []))
        full = len(entries) >= PAGE
        return None if full else {"entries": [*entries, entry]}

    await change(store, f"{AUDIT}/{page}", add)
    return not full


def _move_head(page: int, head: dict[str, Any]) -> dict[str, Any] | None:
    return None if int(head.get("page", 0)) >= page else {"page": page}


async def read_audit(store: EffectStore, limit: int) -> list[dict[str, Any]]:
    """Return the last `limit` audit entries, newest first."""
    head, _ = await read_record(store, AUDIT)
    page = int(head.get("page", 0))
    while (await store.get_session_record(f"{AUDIT}/{page + 1}")) is not None:
        page += 1  # a writer started a page and has not moved the head yet
    found: list[dict[str, Any]] = []
    while page >= 0 and len(found) < limit:
        document, _ = await read_record(store, f"{AUDIT}/{page}")
        found.extend(reversed(document.get("entries", [])))
        page -= 1
    return found[:limit]


def _question(item: dict[str, Any]) -> tuple[Any, Any]:
    """Return what names an inbox item: its checkpoint id and interrupt id."""
    return item.get("checkpoint_id"), item.get("interrupt_id")


async def add_inbox(
    store: EffectStore,
    items: list[dict[str, Any]],
    *,
    replacing: Collection[tuple[str, str]] = (),
) -> None:
    """Add open questions to the inbox, taking out in the same write the ones `replacing`
    names (by checkpoint id and interrupt id)."""
    gone = set(replacing)

    def add(document: dict[str, Any]) -> dict[str, Any]:
        kept = [i for i in document.get("items", []) if _question(i) not in gone]
        return {"items": [*kept, *items]}

    await change(store, INBOX, add)


async def drop_inbox(store: EffectStore, questions: Collection[tuple[str, str]]) -> None:
    """Take the questions named (by checkpoint id and interrupt id) out of the inbox;
    nothing is written when none of them is in it."""
    gone = set(questions)

    def drop(document: dict[str, Any]) -> dict[str, Any] | None:
        items = document.get("items", [])
        kept = [i for i in items if _question(i) not in gone]
        return None if len(kept) == len(items) else {"items": kept}

    await change(store, INBOX, drop)


async def read_inbox(store: EffectStore) -> list[dict[str, Any]]:
    """Return the open questions, oldest first: those still pending in their checkpoint.

    A question whose checkpoint is done or gone, or no longer holds it (the run went on from
    there, saving steps over it), is dropped from the stored inbox; one whose checkpoint is
    being resumed (claimed) is not shown, but kept, in case the resume gives it back.
    """
    document, _ = await read_record(store, INBOX)
    items: list[dict[str, Any]] = list(document.get("items", []))
    checkpoints = list({item["checkpoint_id"]: None for item in items})
    found = await asyncio.gather(*(_pending(store, cp) for cp in checkpoints))
    pending = dict(zip(checkpoints, found, strict=True))

    def state(item: dict[str, Any]) -> str:
        status, ids = pending[item["checkpoint_id"]]
        if status == "claimed":
            return "claimed"
        return "open" if status == "pending" and item["interrupt_id"] in ids else "gone"

    gone = [_question(item) for item in items if state(item) == "gone"]
    if gone:
        await drop_inbox(store, gone)
    return [item for item in items if state(item) == "open"]


async def _pending(store: EffectStore, checkpoint_id: str) -> tuple[str | None, set[str]]:
    """Return a checkpoint's status and the ids of the interrupts it waits on."""
    found = await store.get_checkpoint(checkpoint_id)
    if found is None:
        return None, set()
    try:
        interrupts = json.loads(found.data).get("interrupts") or []
        return found.status, {i["id"] for i in interrupts if isinstance(i, dict) and "id" in i}
    except (ValueError, AttributeError, TypeError):  # not a checkpoint plait can read
        return found.status, set()


async def edit_rules(store: EffectStore, user: str, tool: str, allow: bool) -> None:
    """Add `tool` to `user`'s standing rules (`allow`), or take it out."""

    def edit(document: dict[str, Any]) -> dict[str, Any] | None:
        tools = [t for t in document.get("tools", []) if t != tool]
        if allow:
            tools.append(tool)
        return None if tools == document.get("tools", []) else {"tools": tools}

    await change(store, rules_id(user), edit)


async def has_rule(store: EffectStore, user: str, tool: str) -> bool:
    """Whether `user` approved `tool` for good."""
    document, _ = await read_record(store, rules_id(user))
    return tool in document.get("tools", [])
