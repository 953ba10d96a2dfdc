"""Resume a paused run from another process: `python resume_proc.py ADDRESS WORKFLOW_ID
VALUE_JSON`; prints "resumed", or the error's class and message."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from temporalio.client import Client

from plait import temporal
from plait.errors import ResumeError


async def main(address: str, workflow_id: str, value: str) -> None:
    client = await Client.connect(address)
    handle = client.get_workflow_handle(workflow_id)
    try:
        await temporal.resume(handle, value=json.loads(value))
    except ResumeError as exc:
        print(f"ResumeError: {exc}")
        return
    print("resumed")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
    # A short-lived process with a Temporal client can abort in the interpreter's shutdown
    # (temporalio/sdk-python#300): leave without it, as docs/temporal.md advises.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
