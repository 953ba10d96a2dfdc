"""The app `bench/server.py` serves: plait's HTTP API on a zero-latency scripted model.

Started by the benchmark as
`python -m uvicorn --factory --app-dir bench server_app:build --port N`; the store is the
URL in `PLAIT_BENCH_STORE` (default `memory://`). The agent makes one tool call (`add`),
then answers with 50 words: three events per run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fastapi import FastAPI

from core import BenchModel, add
from plait import ChatModelAgent
from plait.server import create_app
from plait.stores import from_url

STEPS = 1


def build() -> FastAPI:
    """Return the benchmark's app: agent `assistant`, no API keys, the store of the env."""
    model = BenchModel(STEPS)
    agent = ChatModelAgent("assistant", model, instruction="You are helpful.", tools=[add])
    store = from_url(os.environ.get("PLAIT_BENCH_STORE", "memory://"))
    return create_app([agent], store=store)
