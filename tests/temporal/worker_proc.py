"""A worker process for the Temporal tests: `python worker_proc.py ADDRESS QUEUE DIR`.

It serves the test agents built on DIR and writes DIR/worker-<pid>.ready once it polls."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agents import all_agents
from plait import temporal


async def main(address: str, queue: str, directory: Path) -> None:
    client = await Client.connect(address)
    options = {"default": {"start_to_close_timeout": timedelta(seconds=3)}}
    async with temporal.worker(
        client, all_agents(directory), task_queue=queue, activity_options=options
    ):
        (directory / f"worker-{os.getpid()}.ready").write_text("ready")
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
