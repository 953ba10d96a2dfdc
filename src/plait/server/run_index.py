"""The index of each user's runs, so that `GET /v1/runs` can list them from the store.

A store cannot list its records, so beside each run summary (`<user>/r/<checkpoint id>`)
the server keeps one more session record per user, `<user>/runs`: `{"next": n, "runs":
{run id: [number, started, status, agent]}}`, where `number` counts the runs of the index
in the order they were first listed, `started` is the run's start time (microseconds since
the epoch, UTC) and `status` its latest status. A run is listed when it starts and its
entry is updated at each change of status (a resume included: a resumed run keeps its one
entry). The index is written by group commit with compare-and-set (`plait.session_index.
GroupIndex`), so processes sharing the store keep one index.

The index holds at most `MAX_LISTED_RUNS` (1000) runs: past that, the oldest completed or
failed run is dropped first, then the oldest of any status, so paused and cancelled runs
(which wait for a person) go last. A dropped run's summary stays readable at
`GET /v1/runs/{id}`.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _text
from typing import Any

from plait._util.joined import JoinedParts
from plait.stores.base import SessionRecord
from plait.stores.session_index import GroupIndex

__all__ = [
    "MAX_LISTED_RUNS",
    "Listed",
    "RunEntry",
    "RunIndex",
    "decode_cursor",
    "encode_cursor",
    "read_runs",
]

#: The most runs one user's index lists.
MAX_LISTED_RUNS = 1000
_FINISHED = ("completed", "failed")

#: A run's entry as written: (start time in microseconds, status, agent).
RunEntry = tuple[int, str, str]


@dataclass(slots=True, frozen=True)
class Listed:
    """A listed run: its id, number, start time (microseconds), status and agent."""

    run_id: str
    number: int
    started: int
    status: str
    agent: str

    @property
    def position(self) -> tuple[int, int]:
        """Where the run stands in the listing (newest first: the largest first)."""
        return (self.started, self.number)


@dataclass(slots=True)
class _Runs:
    """A run index as this process last wrote (or read) it, with each entry's JSON text (a
    write encodes only the entries that changed)."""

    version: int
    next: int = 0
    runs: dict[str, list[Any]] = field(default_factory=dict)
    parts: JoinedParts = field(default_factory=JoinedParts)

    @classmethod
    def read(cls, found: SessionRecord | None) -> _Runs:
        if found is None:
            return cls(0)
        document: Any = json.loads(found.data)
        runs = document.get("runs") if isinstance(document, dict) else None
        number = document.get("next") if isinstance(document, dict) else None
        known = cls(found.version, number if isinstance(number, int) else 0)
        for run_id, entry in (runs if isinstance(runs, dict) else {}).items():
            if isinstance(entry, list) and len(entry) == 4:
                known.runs[run_id] = entry
                known.parts.set(run_id, _part(run_id, entry))
        return known

    def apply(self, changes: dict[str, RunEntry | None]) -> bool:
        changed = False
        for run_id, entry in changes.items():
            if entry is None:
                if self.runs.pop(run_id, None) is not None:
                    self.parts.pop(run_id)
                    changed = True
                continue
            started, status, agent = entry
            found = self.runs.get(run_id)
            if found is None:
                found = self.runs[run_id] = [self.next, started, status, agent]
                self.next += 1
            elif found[2:] == [status, agent]:
                continue
            else:
                found[2:] = [status, agent]
            self.parts.set(run_id, _entry_part(run_id, found))
            changed = True
        while len(self.runs) > MAX_LISTED_RUNS:
            oldest = next((r for r, e in self.runs.items() if e[2] in _FINISHED), None)
            dropped = oldest if oldest is not None else next(iter(self.runs))
            del self.runs[dropped]
            self.parts.pop(dropped)
        return changed

    def encode(self) -> bytes:
        head = b'{"next": %d, "runs": {' % self.next
        return b"".join((head, self.parts.joined(), b"}}"))


def _part(run_id: str, entry: list[Any]) -> str:
    return f"{json.dumps(run_id)}: {json.dumps(entry)}"


def _entry_part(run_id: str, entry: list[Any]) -> str:
    """Return `_part` of an entry this process set (its status and agent are text)."""
    number, started, status, agent = entry
    if type(number) is int and type(started) is int:  # (else as read back: any JSON)
        return f"{_text(run_id)}: [{number}, {started}, {_text(status)}, {_text(agent)}]"
    return _part(run_id, entry)


class RunIndex(GroupIndex[RunEntry]):
    """The run indexes this process writes (share one among the requests of an app)."""

    def __init__(self) -> None:
        super().__init__(_Runs.read, "run")


def read_runs(found: SessionRecord | None) -> list[Listed]:
    """Return the runs of a stored index, newest first (ties: the one listed last first)."""
    listed = []
    for run_id, entry in _Runs.read(found).runs.items():
        number, started, status, agent = entry
        listed.append(Listed(run_id, number, started, status, agent))
    return sorted(listed, key=lambda run: run.position, reverse=True)


def encode_cursor(run: Listed) -> str:
    """Return the opaque cursor of the page that follows `run`."""
    text = json.dumps([run.started, run.number]).encode()
    return base64.urlsafe_b64encode(text).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, int] | None:
    """Return the position a cursor stands for, or None when it is not one of ours."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error, UnicodeError):
        return None
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return (value[0], value[1])
    return None
