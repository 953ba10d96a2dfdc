"""The JSON of the records the server keeps of a run (`<user>/r/<checkpoint id>`), and new ids.

A record is the run's summary (`RunSummary`) with the fields of a `RunRecord` after it: the
id of the run it belongs to, when the run started, when the record was written and, while
it runs, the worker that runs it. Each record is made from the summary's JSON text, without
reading it back.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii
from typing import Any

from pydantic_core import to_json

from plait.server.bodies import RunSummary, UsageOut

__all__ = ["NO_USAGE", "encode_record", "new_run_id", "record_head", "running_record"]

NO_USAGE = UsageOut()  # a running run's usage (never changed in place)
#: The fields of a running run's summary between its `checkpoint_id` and its `agent`.
_RUNNING: dict[str, Any] = {
    "final_output": None,
    "interrupts": [],
    "error": None,
    "usage": NO_USAGE,
    "handoffs": [],
}


def new_run_id() -> str:
    """Return a new random id: the 32 hex digits of a version 4 UUID (as `uuid4().hex`)."""
    return "%032x" % (int.from_bytes(os.urandom(16)) & _KEEP | _VERSION_4)


#: The bits of a random 128-bit number a version 4 UUID keeps, and those it sets (its
#: version, 4, and its variant, RFC 4122's), as `uuid.UUID(..., version=4)` does.
_KEEP = ~(0xF000 << 64) & ~(0xC000 << 48) & ((1 << 128) - 1)
_VERSION_4 = (4 << 76) | (0x8000 << 48)


def record_head(run_id: str, started_at: datetime) -> str:
    """Return what every record of run `run_id` adds after its summary's fields, up to the
    time it was written."""
    started = started_at.isoformat()
    return f',"run_id":{encode_basestring_ascii(run_id)},"started_at":"{started}","updated_at":"'


def encode_record(summary: RunSummary, head: str, worker: str) -> bytes:
    """Return the record of `summary` (`head`: its `record_head`; `worker`: who runs it,
    written while it runs)."""
    text = summary.model_dump_json()
    now = datetime.now(UTC).isoformat()
    tail = f'{now}","worker":"{worker}"}}' if summary.status == "running" else f'{now}"}}'
    return (text[:-1] + head + tail).encode()


def running_record(
    checkpoint_id: str, agent: str, session_id: str | None, head: str, worker: str
) -> bytes:
    """Return the record of a running run's summary (its `checkpoint_id`, `agent` and
    `session_id`; the rest as every running run's), as `encode_record` writes it."""
    text = to_json(
        {
            "status": "running",
            "checkpoint_id": checkpoint_id,
            **_RUNNING,
            "agent": agent,
            "session_id": session_id,
            "metadata": {},
        }
    )
    now = datetime.now(UTC).isoformat()
    return text[:-1] + f'{head}{now}","worker":"{worker}"}}'.encode()
