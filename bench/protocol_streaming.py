"""A streamed answer over A2A, AG-UI and OpenAI chat completions: time and events by length.

    .venv/bin/python bench/protocol_streaming.py           # answers of 1,000, 4,000, 16,000 tokens
    .venv/bin/python bench/protocol_streaming.py --quick   # a smoke run (tiny answers, once)

One process serves `create_app([talker], a2a=True)` under uvicorn on a thread of its own;
the agent's model (`plait.testing.FunctionModel`, zero latency) streams an answer of N
tokens, one word each, N being the user's message. Each protocol is read through a real
client over real sockets: A2A with the a2a-sdk's client (streaming, `/a2a/talker`), AG-UI
by raw HTTP streaming (`POST /agui/talker`, a `RunAgentInput`, its SSE events), the OpenAI
API with the `openai` client (`stream=True`). Each answer's text is checked whole.

For each protocol and length it prints the median wall time of `--repeats` answers (server
and client together: they share the process), the events the client received, and the
microseconds per token, which stay about flat when the cost grows linearly. The last line
is the figures as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import uvicorn
from a2a.client import Client, ClientConfig, create_client
from a2a.helpers import get_text_parts
from a2a.types import Message as A2AMessage
from a2a.types import Part, Role, SendMessageRequest
from openai import AsyncOpenAI

from plait import ChatModelAgent, Message
from plait.server import create_app
from plait.stores import MemoryStore
from plait.testing import FunctionModel, reply

SIZES = (1_000, 4_000, 16_000)
QUICK_SIZES = (20, 40, 80)
AGENT = "talker"
TIMEOUT = 600.0


def answer_of(tokens: int) -> str:
    """Return the answer of `tokens` words."""
    return " ".join(f"tok{i}" for i in range(tokens))


def _talk(messages: list[Message], tools: Any) -> Message:
    return reply(answer_of(int(messages[-1].content)))


class Server:
    """The app on a free port, served by uvicorn on a thread of this process."""

    def __init__(self) -> None:
        agent = ChatModelAgent(AGENT, FunctionModel(_talk), description="Talks at length.")
        app = create_app([agent], store=MemoryStore(), a2a=True)
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", ws="none")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


Reader = Callable[[int], Awaitable[tuple[int, str]]]


def a2a_reader(client: Client) -> Reader:
    """Read an answer with the a2a-sdk's client: (events, text of the artifact chunks)."""

    async def read(tokens: int) -> tuple[int, str]:
        message = A2AMessage(role=Role.ROLE_USER, message_id=uuid.uuid4().hex)
        message.parts.append(Part(text=str(tokens)))
        events, texts = 0, []
        async for response in client.send_message(SendMessageRequest(message=message)):
            events += 1
            if response.HasField("artifact_update"):
                texts.extend(get_text_parts(response.artifact_update.artifact.parts))
        return events, "".join(texts)

    return read


def agui_reader(http: httpx.AsyncClient) -> Reader:
    """Read an answer as AG-UI events over raw HTTP: (events, text of the content deltas)."""

    async def read(tokens: int) -> tuple[int, str]:
        body = {
            "threadId": uuid.uuid4().hex,
            "runId": uuid.uuid4().hex,
            "messages": [{"id": "u1", "role": "user", "content": str(tokens)}],
        }
        events, texts = 0, []
        async with http.stream("POST", f"/agui/{AGENT}", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    events += 1
                    event = json.loads(line[5:])
                    if event["type"] == "TEXT_MESSAGE_CONTENT":
                        texts.append(event["delta"])
        return events, "".join(texts)

    return read


def openai_reader(client: AsyncOpenAI) -> Reader:
    """Read a streamed chat completion with the `openai` client: (chunks, text)."""

    async def read(tokens: int) -> tuple[int, str]:
        stream = await client.chat.completions.create(
            model=AGENT, messages=[{"role": "user", "content": str(tokens)}], stream=True
        )
        events, texts = 0, []
        async for chunk in stream:
            events += 1
            if chunk.choices and chunk.choices[0].delta.content:
                texts.append(chunk.choices[0].delta.content)
        return events, "".join(texts)

    return read


async def measure(read: Reader, tokens: int, repeats: int) -> dict[str, Any]:
    """Read `repeats` answers of `tokens` tokens; return the median time and the events."""
    times, events = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        events, text = await read(tokens)
        times.append(time.perf_counter() - started)
        if text != answer_of(tokens):
            raise RuntimeError(f"the answer of {tokens} tokens came back as {len(text)} characters")
    seconds = statistics.median(times)
    return {
        "tokens": tokens,
        "seconds": seconds,
        "events": events,
        "us_per_token": seconds / tokens * 1e6,
    }


async def run(url: str, sizes: tuple[int, ...], repeats: int) -> list[dict[str, Any]]:
    """Measure every protocol at every size; return one row each."""
    rows = []
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http:
        config = ClientConfig(streaming=True, httpx_client=http)
        a2a_client = await create_client(f"{url}/a2a/{AGENT}", client_config=config)
        openai = AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", http_client=http)
        readers = {
            "a2a": a2a_reader(a2a_client),
            "agui": agui_reader(http),
            "openai": openai_reader(openai),
        }
        for name, read in readers.items():
            await read(sizes[0])  # warm up
            for tokens in sizes:
                rows.append({"protocol": name, **await measure(read, tokens, repeats)})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Return the rows as a Markdown table."""
    lines = [
        "| protocol | tokens | seconds | events | µs per token |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['protocol']} | {row['tokens']:,} | {row['seconds']:.3f} | "
            f"{row['events']:,} | {row['us_per_token']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="tiny answers, once each")
    parser.add_argument("--repeats", type=int, default=3, help="answers per figure (median)")
    args = parser.parse_args()
    sizes, repeats = (QUICK_SIZES, 1) if args.quick else (SIZES, args.repeats)
    with Server() as url:
        rows = asyncio.run(run(url, sizes, repeats))
    print(table(rows))
    growth = {}
    for name in dict.fromkeys(row["protocol"] for row in rows):
        mine = [row for row in rows if row["protocol"] == name]
        growth[name] = mine[-1]["us_per_token"] / mine[0]["us_per_token"]
        print(
            f"{name}: time per token at {sizes[-1]:,} tokens / at {sizes[0]:,}: {growth[name]:.2f}"
        )
    print(json.dumps({"rows": rows, "growth": growth}))


if __name__ == "__main__":
    main()
