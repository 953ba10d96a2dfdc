"""The JSON of the records the server keeps of a run (`<user>/r/<checkpoint id>`), and new ids.

A record is the run's summary (`RunSummary`) with the fields of a `RunRecord` after it: the
id of the run it belongs to, when the run started, when the record was written and, while
it runs, the worker that runs it. Each record is made from the summary's JSON text, without
reading it back.
"""

from __future__ import annotations

from datetime import datetime
from json.encoder import encode_basestring_ascii
from typing import Any

from plait._util.clock import iso, iso_now
from plait._util.fast import random_hex
from plait._util.json import json_bytes
from plait.server.bodies import RunSummary, UsageOut

__all__ = ["NO_USAGE", "encode_record", "new_run_id", "record_head", "running_record"]

#: A new run's id: 32 hex digits, as `uuid.uuid4().hex` (`plait._util.fast.random_hex`).
new_run_id = random_hex

NO_USAGE = UsageOut()  # a running run's usage (never changed in place)
#: The fields of a running run's summary between its `checkpoint_id` and its `agent`.
_RUNNING: dict[str, Any] = {
    "final_output": None,
    "interrupts": [],
    "error": None,
    "usage": NO_USAGE,
    "handoffs": [],
}


def record_head(run_id: str, started_at: datetime) -> str:
    """Return what every record of run `run_id` adds after its summary's fields, up to the
    time it was written."""
    started = iso(started_at)
    return f',"run_id":{encode_basestring_ascii(run_id)},"started_at":"{started}","updated_at":"'


def encode_record(summary: RunSummary, head: str, worker: str) -> bytes:
    """Return the record of `summary` (`head`: its `record_head`; `worker`: who runs it,
    written while it runs)."""
    data = json_bytes(summary)
    now = iso_now()
    tail = f'{now}","worker":"{worker}"}}' if summary.status == "running" else f'{now}"}}'
    return data[:-1] + (head + tail).encode()


def running_record(
    checkpoint_id: str, agent: str, session_id: str | None, head: str, worker: str
) -> bytes:
    """Return the record of a running run's summary (its `checkpoint_id`, `agent` and
    `session_id`; the rest as every running run's), as `encode_record` writes it."""
    text = json_bytes(
        {
            "status": "running",
            "checkpoint_id": checkpoint_id,
            **_RUNNING,
            "agent": agent,
            "session_id": session_id,
            "metadata": {},
        }
    )
    now = iso_now()
    return text[:-1] + f'{head}{now}","worker":"{worker}"}}'.encode()
